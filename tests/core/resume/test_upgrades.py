"""Deploying with runs waiting: a run suspended under definition v1 while v2 is served.

An approve under v2 is refused and names what changed; a ``resolve_agent`` that takes a
``revision`` serves v1 to the v1 run, so the approve goes through; a ``deny`` needs no matching
definition at all, and is audited."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import (
    AgentRunStateError,
    Guardrail,
    RunStateOptions,
    ToolDefinition,
    call_resolve_agent,
    create_agent_run_lifecycle,
    load_agent_run_state,
)
from prism_core.resume._checks import MISMATCH

from ..durable_support import World
from ..helpers import text_turn, tool_turn

SCRIPT = [tool_turn(("c1", "deploy", {"env": "prod"})), text_turn("done")]
V1, V2 = "2026-11-01.1", "2026-12-01.1"


def tools(log: list[Any], version: int) -> list[ToolDefinition]:
    """v1: ``deploy`` and ``notify``. v2: ``deploy`` takes a new ``region`` field, ``notify``
    is gone and ``rollback`` is new."""

    def execute(args: dict[str, Any], context: Any) -> dict[str, Any]:
        log.append(dict(args))
        return {"ok": True}

    properties: dict[str, Any] = {"env": {"type": "string"}}
    if version == 2:
        properties["region"] = {"type": "string"}
    deploy = ToolDefinition(
        "deploy",
        execute,
        parameters={"type": "object", "properties": properties},
        needs_approval=True,
    )
    other = ToolDefinition("notify" if version == 1 else "rollback", execute)
    return [deploy, other]


#: A v2-only input guard.
POLITE = Guardrail("polite", "input", lambda context: {"action": "allow"}, revision="2")


class Host:
    """A host that deploys v2 but can keep serving v1 by revision."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.log: list[Any] = []
        self.asked: list[tuple[str, Any]] = []

    def agent(self, version: int) -> Any:
        extra: dict[str, Any] = {}
        if version == 2:
            extra = {"instructions": "Be careful.", "guardrails": [POLITE]}
        return self.world.agent(SCRIPT, tools=tools(self.log, version), **extra)

    def latest_only(self, agent_id: str) -> Any:
        self.asked.append((agent_id, None))
        return self.agent(2), V2

    async def by_revision(self, agent_id: str, *, revision: str | None = None) -> Any:
        self.asked.append((agent_id, revision))
        if revision == V1:
            return {"agent": self.agent(1), "definition_revision": V1}
        return {"agent": self.agent(2), "definition_revision": V2}


async def waiting_v1_run(host: Host) -> tuple[str, int]:
    """A run suspended before its deploy call under v1."""
    agent = host.agent(1)
    result = await agent.create_session(id="s1").run(
        "ship", run_state=RunStateOptions(host.world.checkpoints, V1)
    )
    assert result.status == "suspended"
    assert result.run_state is not None
    return result.run_id, result.run_state.version


@pytest.mark.anyio
async def test_approve_under_v2_is_refused_naming_each_difference() -> None:
    world = World()
    host = Host(world)
    run_id, version = await waiting_v1_run(host)
    before = await world.checkpoints.raw(run_id)
    lifecycle = create_agent_run_lifecycle(
        checkpoints=world.checkpoints, resolve_agent=host.latest_only
    )
    with pytest.raises(AgentRunStateError) as caught:
        await lifecycle.resume(
            {"run_id": run_id}, {"expected_version": version, "decision": "approve"}
        )
    message = str(caught.value)
    assert message.startswith(f"{MISMATCH}: ")
    details = message[len(MISMATCH) + 2 :].split("; ")
    assert details == [
        f"revision recorded {V1!r}, now {V2!r}",
        "the instructions differ",
        "the guardrails differ",
        "tool 'deploy' differs",
        "tool 'rollback' added",
        "tool 'notify' removed",
    ]
    assert await world.checkpoints.raw(run_id) == before
    assert host.log == []
    assert host.asked == [("investigator", None)]


@pytest.mark.anyio
async def test_a_checkpoint_without_parts_gets_the_bare_refusal_for_same_revision() -> None:
    """An older checkpoint (no recorded parts) under a changed definition at the same
    revision can only be refused generically."""
    world = World()
    host = Host(world)
    run_id, version = await waiting_v1_run(host)
    record = await world.checkpoints.inner.load("prism.agent-run", run_id)
    value = {k: v for k, v in record.value.items() if k != "fingerprint_parts"}
    await world.checkpoints.inner.save(
        "prism.agent-run", run_id, value, version=version + 1, expected_version=version
    )
    lifecycle = create_agent_run_lifecycle(
        checkpoints=world.checkpoints, resolve_agent=lambda agent_id: (host.agent(2), V1)
    )
    with pytest.raises(AgentRunStateError) as caught:
        await lifecycle.resume(
            {"run_id": run_id}, {"expected_version": version + 1, "decision": "approve"}
        )
    assert str(caught.value) == MISMATCH


@pytest.mark.anyio
async def test_resolve_agent_with_revision_serves_v1_and_approve_succeeds() -> None:
    world = World()
    host = Host(world)
    run_id, version = await waiting_v1_run(host)
    lifecycle = create_agent_run_lifecycle(
        checkpoints=world.checkpoints, resolve_agent=host.by_revision
    )
    result = await lifecycle.resume(
        {"run_id": run_id},
        {"expected_version": version, "decision": "approve", "actor": "ops"},
    )
    assert result.status == "succeeded"
    assert host.log == [{"env": "prod"}]
    assert host.asked == [("investigator", V1)]
    status = await load_agent_run_state(world.checkpoints, {"run_id": run_id})
    assert status is not None
    assert (status.audit[0].outcome, status.audit[0].actor) == ("allow_once", "ops")
    assert [(r.outcome, r.channel) for r in status.audit[1:]] == [("executed", "worker")]


@pytest.mark.anyio
@pytest.mark.parametrize("served", ["v2", "none", "raises"])
async def test_deny_needs_no_matching_definition_and_is_audited(served: str) -> None:
    world = World()
    host = Host(world)
    run_id, version = await waiting_v1_run(host)

    def resolve(agent_id: str) -> Any:
        if served == "v2":
            return host.agent(2), V2
        if served == "none":
            return None
        raise KeyError(agent_id)

    lifecycle = create_agent_run_lifecycle(checkpoints=world.checkpoints, resolve_agent=resolve)
    result = await lifecycle.resume(
        {"run_id": run_id},
        {"expected_version": version, "decision": "deny", "actor": "ops", "reason": "retired"},
    )
    assert result.status == "denied"
    assert host.log == []
    status = await load_agent_run_state(world.checkpoints, {"run_id": run_id})
    assert status is not None
    assert status.state.status == "denied"
    assert status.version == version + 1
    assert [(r.tool_call_id, r.outcome, r.actor, r.reason) for r in status.audit] == [
        ("c1", "deny", "ops", "retired")
    ]
    # A second deny is stale: the record moved on and is no longer suspended.
    with pytest.raises(AgentRunStateError):
        await lifecycle.resume(
            {"run_id": run_id}, {"expected_version": version, "decision": "deny"}
        )


@pytest.mark.anyio
async def test_deny_without_definition_streams_its_event() -> None:
    world = World()
    host = Host(world)
    run_id, version = await waiting_v1_run(host)
    lifecycle = create_agent_run_lifecycle(
        checkpoints=world.checkpoints, resolve_agent=lambda agent_id: None
    )
    stream = lifecycle.resume_stream(
        {"run_id": run_id}, {"expected_version": version, "decision": "deny"}
    )
    events = [event async for event in stream]
    assert [event.type for event in events] == ["agent_denied"]
    assert stream.result is not None
    assert stream.result.status == "denied"


@pytest.mark.anyio
async def test_approve_with_no_definition_is_still_refused() -> None:
    world = World()
    host = Host(world)
    run_id, version = await waiting_v1_run(host)
    before = await world.checkpoints.raw(run_id)
    lifecycle = create_agent_run_lifecycle(
        checkpoints=world.checkpoints, resolve_agent=lambda agent_id: None
    )
    with pytest.raises(AgentRunStateError):
        await lifecycle.resume(
            {"run_id": run_id}, {"expected_version": version, "decision": "approve"}
        )
    assert await world.checkpoints.raw(run_id) == before


@pytest.mark.anyio
async def test_call_resolve_agent_passes_revision_only_when_taken() -> None:
    seen: list[Any] = []

    def plain(agent_id: str) -> str:
        seen.append(agent_id)
        return "plain"

    async def keyword(agent_id: str, *, revision: str | None = None) -> str:
        seen.append((agent_id, revision))
        return "keyword"

    def anything(agent_id: str, **kwargs: Any) -> str:
        seen.append((agent_id, kwargs))
        return "kwargs"

    assert await call_resolve_agent(plain, "a", revision="r") == "plain"
    assert await call_resolve_agent(keyword, "a", revision="r") == "keyword"
    assert await call_resolve_agent(keyword, "a") == "keyword"
    assert await call_resolve_agent(anything, "a", revision="r") == "kwargs"
    assert seen == ["a", ("a", "r"), ("a", None), ("a", {"revision": "r"})]
