"""A durable run's own guardrails (``guardrails=`` on ``run``) hold across a resume."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentRunStateError,
    Guardrail,
    create_agent,
    create_agent_run_lifecycle,
    resume_agent_run,
    resume_agent_run_stream,
)
from prism_core.durable._state import state_to_json
from prism_core.durable._state_parse import parse_state

from ..durable_support import REVISION, World, by_history
from ..helpers import echo_tool, text_turn, tool_turn

pytestmark = pytest.mark.anyio

CODE = "ERR_PRISM_RUN_GUARDRAILS"

TURNS = [
    tool_turn(("c1", "echo", {"x": 1})),
    tool_turn(("c2", "rm", {"path": "/"})),
    text_turn("done"),
]


def no_root(
    name: str = "no-root", revision: str | None = "2", log: list[str] | None = None
) -> Guardrail:
    """A tool-input guard that blocks ``rm`` of the root."""

    def evaluate(ctx: Any) -> Any:
        if log is not None:
            log.append(name)
        if ctx.tool_name == "rm" and ctx.value.arguments.get("path") == "/":
            return {"action": "block", "reason": "never the root"}
        return {"action": "allow"}

    return Guardrail(name, "tool_input", evaluate, revision=revision)


def polite() -> Guardrail:
    """An output guard that allows everything (a second stage, recorded first)."""
    return Guardrail("polite", "output", lambda ctx: {"action": "allow"})


def guards() -> dict[str, Any]:
    return {"output": [polite()], "tool_input": [no_root()]}


async def suspended(world: World, log: list[Any]) -> tuple[Any, Any]:
    """A durable run with guards of its own, suspended before its first tool."""
    agent = world.agent(TURNS, tools=[echo_tool(log=log), echo_tool("rm", log=log)])
    session = agent.create_session(id="s1")
    result = await session.run(
        "clean up", run_state=world.run_state(interrupt_before_tool=True), guardrails=guards()
    )
    assert result.status == "suspended"
    return agent, result


def ref_of(result: Any) -> dict[str, str]:
    return {"run_id": result.run_id, "session_id": "s1"}


def approve(result: Any) -> dict[str, Any]:
    return {"decision": "approve", "expected_version": result.run_state.version}


async def test_the_checkpoint_records_the_run_guardrails_by_identity() -> None:
    """Stage by stage in declaration order; ``revision`` only when the guard has one; a run
    without guards of its own writes no key at all."""
    world, log = World(), []
    _, result = await suspended(world, log)
    record = await world.checkpoints.inner.load(AGENT_RUN_NAMESPACE, result.run_id)
    assert record is not None
    assert record.value["run_guardrails"] == [
        {"stage": "output", "name": "polite"},
        {"stage": "tool_input", "name": "no-root", "revision": "2"},
    ]
    plain = World()
    agent = plain.agent(TURNS, tools=[echo_tool(), echo_tool("rm")])
    other = await agent.create_session(id="s1").run(
        "clean up", run_state=plain.run_state(interrupt_before_tool=True)
    )
    stored = await plain.checkpoints.inner.load(AGENT_RUN_NAMESPACE, other.run_id)
    assert stored is not None
    assert "run_guardrails" not in stored.value
    assert "run_guardrails" not in state_to_json(parse_state(stored.value, max_bytes=1 << 20))


async def test_a_resume_without_the_guards_is_refused_before_any_write() -> None:
    """No claim, no write, no tool: the refusal names the recorded guards."""
    world, log = World(), []
    agent, result = await suspended(world, log)
    before = await world.checkpoints.raw(result.run_id)
    saves = world.checkpoints.saves
    with pytest.raises(AgentRunStateError) as info:
        await resume_agent_run(agent, ref_of(result), approve(result), **world.resume_options())
    assert info.value.code == CODE
    assert "tool_input:no-root@2" in info.value.message
    assert "guardrails=" in info.value.message
    # deny writes too, so it is refused the same way.
    with pytest.raises(AgentRunStateError) as denied:
        await resume_agent_run(
            agent,
            ref_of(result),
            {"decision": "deny", "expected_version": result.run_state.version},
            **world.resume_options(),
        )
    assert denied.value.code == CODE
    assert world.checkpoints.saves == saves
    assert await world.checkpoints.raw(result.run_id) == before
    assert log == []


async def test_a_resume_with_the_guards_enforces_them() -> None:
    """Handed the same guards, the resumed run blocks ``rm /`` and keeps recording them."""
    world, log = World(), []
    agent, result = await suspended(world, log)
    done = await resume_agent_run(
        agent, ref_of(result), approve(result), guardrails=guards(), **world.resume_options()
    )
    assert done.status == "succeeded"
    assert log == [("echo", {"x": 1})]
    requests = agent.provider.requests  # type: ignore[union-attr]
    blocked = [m for m in requests[-1].messages if m.role == "tool"][-1].content[0]
    assert blocked.error is not None
    assert (blocked.tool_call_id, blocked.error.code) == ("c2", "guardrail_blocked")
    record = await world.checkpoints.inner.load(AGENT_RUN_NAMESPACE, result.run_id)
    assert record is not None
    assert [row["name"] for row in record.value["run_guardrails"]] == ["polite", "no-root"]


async def test_different_or_reordered_guards_are_refused() -> None:
    """Another name, another revision, a missing or extra guard, or another order."""
    world, log = World(), []
    agent, result = await suspended(world, log)
    saves = world.checkpoints.saves
    cases: list[tuple[Any, str]] = [
        (
            {"output": [polite()], "tool_input": [no_root("other")]},
            "missing ['tool_input:no-root@2']; unexpected ['tool_input:other@2']",
        ),
        ({"output": [polite()], "tool_input": [no_root(revision="3")]}, "no-root@3"),
        ({"tool_input": [no_root()]}, "missing ['output:polite']"),
        (
            {"output": [polite()], "tool_input": [no_root(), no_root("extra")]},
            "unexpected ['tool_input:extra@2']",
        ),
    ]
    for supplied, expected in cases:
        with pytest.raises(AgentRunStateError) as info:
            await resume_agent_run(
                agent,
                ref_of(result),
                approve(result),
                guardrails=supplied,
                **world.resume_options(),
            )
        assert info.value.code == CODE
        assert expected in info.value.message
    assert world.checkpoints.saves == saves
    assert log == []


async def test_a_reordered_stage_is_refused() -> None:
    """Guards of one stage run in order, so a resume must keep the recorded order."""
    world, log = World(), []
    agent = world.agent(TURNS, tools=[echo_tool(log=log), echo_tool("rm", log=log)])
    first, second = no_root("a"), no_root("b")
    result = await agent.create_session(id="s1").run(
        "clean up",
        run_state=world.run_state(interrupt_before_tool=True),
        guardrails={"tool_input": [first, second]},
    )
    with pytest.raises(AgentRunStateError, match="another order") as info:
        await resume_agent_run(
            agent,
            ref_of(result),
            approve(result),
            guardrails={"tool_input": [second, first]},
            **world.resume_options(),
        )
    assert info.value.code == CODE
    assert log == []


async def test_guards_for_a_run_that_recorded_none_are_refused() -> None:
    """Adding guards on resume would change what the approver saw."""
    world, log = World(), []
    agent = world.agent(TURNS, tools=[echo_tool(log=log), echo_tool("rm", log=log)])
    result = await agent.create_session(id="s1").run(
        "clean up", run_state=world.run_state(interrupt_before_tool=True)
    )
    saves = world.checkpoints.saves
    with pytest.raises(AgentRunStateError, match="records no run guardrails") as info:
        await resume_agent_run(
            agent, ref_of(result), approve(result), guardrails=guards(), **world.resume_options()
        )
    assert info.value.code == CODE
    assert world.checkpoints.saves == saves
    # An empty config is no guards at all: the run goes on to hold ``rm`` for a decision.
    done = await resume_agent_run(
        agent, ref_of(result), approve(result), guardrails={}, **world.resume_options()
    )
    assert done.status == "suspended"
    assert done.interruption is not None
    assert done.interruption.tool_call_id == "c2"


async def test_the_stream_and_the_lifecycle_take_the_guards() -> None:
    """Both refuse without the guards (before any write) and enforce them when given."""
    world, log = World(), []
    agent, result = await suspended(world, log)
    before = await world.checkpoints.raw(result.run_id)
    refused = resume_agent_run_stream(
        agent, ref_of(result), approve(result), **world.resume_options()
    )
    with pytest.raises(AgentRunStateError) as info:
        await refused.__anext__()
    assert info.value.code == CODE
    lifecycle = create_agent_run_lifecycle(
        checkpoints=world.checkpoints, resolve_agent=lambda agent_id: (agent, REVISION)
    )
    with pytest.raises(AgentRunStateError) as by_lifecycle:
        await lifecycle.resume(ref_of(result), approve(result))
    assert by_lifecycle.value.code == CODE
    stream = lifecycle.resume_stream(ref_of(result), approve(result))
    with pytest.raises(AgentRunStateError):
        await stream.__anext__()
    assert await world.checkpoints.raw(result.run_id) == before
    assert log == []

    events = [
        event
        async for event in resume_agent_run_stream(
            agent,
            ref_of(result),
            approve(result),
            guardrails=guards(),
            **world.resume_options(),
        )
    ]
    assert events[-1].type == "agent_finished"
    blocked = [e for e in events if e.type == "tool_execution_blocked"]
    assert [e.tool_call_id for e in blocked] == ["c2"]
    assert log == [("echo", {"x": 1})]


async def test_the_lifecycle_resume_enforces_the_guards() -> None:
    world, log = World(), []
    agent, result = await suspended(world, log)
    lifecycle = create_agent_run_lifecycle(
        checkpoints=world.checkpoints, resolve_agent=lambda agent_id: (agent, REVISION)
    )
    done = await lifecycle.resume(ref_of(result), approve(result), guardrails=guards())
    assert done.status == "succeeded"
    assert log == [("echo", {"x": 1})]


class WorkerDied(BaseException):
    """Stands in for SIGKILL."""


async def test_a_crashed_every_turn_run_continues_only_with_its_guards() -> None:
    """``continue`` after a crash: refused without the guards, enforced with them."""
    world, log = World(), []
    script = [tool_turn(("c1", "rm", {"path": "/"})), text_turn("done")]

    def dying(request: Any) -> Any:
        raise WorkerDied()

    from prism_core import create_mock_provider

    agent = create_agent(
        id="investigator",
        model={"provider": "mock", "model": "demo"},
        store=world.sessions,
        tools=[echo_tool("rm", log=log)],
        provider=create_mock_provider(dying),
    )
    stream = agent.create_session(id="s1").stream(
        "clean up",
        run_state=world.run_state(checkpoint_policy="every-turn"),
        guardrails={"tool_input": [no_root()]},
    )
    run_ids: list[str] = []

    async def consume() -> None:
        async for event in stream:
            run_ids.append(event.run_id)

    with pytest.raises(WorkerDied):
        await consume()
    run_id = run_ids[-1]
    found = await world.checkpoints.inner.load(AGENT_RUN_NAMESPACE, run_id)
    assert found is not None
    assert found.value["status"] == "running"
    assert found.value["run_guardrails"] == [
        {"stage": "tool_input", "name": "no-root", "revision": "2"}
    ]
    before = await world.checkpoints.raw(run_id)
    revived = create_agent(
        id="investigator",
        model={"provider": "mock", "model": "demo"},
        store=world.sessions,
        tools=[echo_tool("rm", log=log)],
        provider=by_history(script),
    )
    resume = {"decision": "continue", "expected_version": found.version}
    ref = {"run_id": run_id, "session_id": "s1"}
    with pytest.raises(AgentRunStateError) as info:
        await resume_agent_run(revived, ref, resume, **world.resume_options())
    assert info.value.code == CODE
    assert await world.checkpoints.raw(run_id) == before
    done = await resume_agent_run(
        revived,
        ref,
        resume,
        guardrails={"tool_input": [no_root()]},
        **world.resume_options(),
    )
    assert done.status == "succeeded"
    assert log == []


async def test_a_resumed_run_keeps_agent_pack_run_order() -> None:
    """After a resume the run's guards still run after the agent's and the packs'."""
    world, log = World(), []
    order: list[str] = []

    def pack_predicate(args: dict[str, Any], ctx: Any) -> bool:
        order.append("pack")
        return False

    agent = world.agent(
        [tool_turn(("c1", "rm", {"path": "/tmp"})), text_turn("ok")],
        tools=[echo_tool("rm", log=log)],
        guardrails={"tool_input": [no_root("agent", log=order)]},
    )
    pack = {"id": "house", "rules": [{"id": "r", "tool": "rm", "deny": pack_predicate}]}
    session = agent.create_session(id="s1", guardrail_packs=[pack])
    result = await session.run(
        "go",
        run_state=world.run_state(interrupt_before_tool=True),
        guardrails={"tool_input": [no_root("run", log=order)]},
    )
    assert result.status == "suspended"
    order.clear()
    done = await resume_agent_run(
        agent,
        ref_of(result),
        approve(result),
        guardrail_packs=[pack],
        guardrails={"tool_input": [no_root("run", log=order)]},
        **world.resume_options(),
    )
    assert done.status == "succeeded"
    assert order == ["agent", "pack", "run"]
    assert log == [("rm", {"path": "/tmp"})]


async def test_a_checkpoint_without_the_key_resumes_as_before() -> None:
    """A state written before run guardrails were recorded has no key and needs none."""
    world, log = World(), []
    agent, result = await suspended(world, log)
    record = await world.checkpoints.inner.load(AGENT_RUN_NAMESPACE, result.run_id)
    assert record is not None
    old = {key: value for key, value in record.value.items() if key != "run_guardrails"}
    await world.checkpoints.inner.save(
        AGENT_RUN_NAMESPACE,
        result.run_id,
        old,
        version=record.version + 1,
        expected_version=record.version,
    )
    done = await resume_agent_run(
        agent,
        ref_of(result),
        {"decision": "approve", "expected_version": record.version + 1},
        **world.resume_options(),
    )
    # Without the record nothing blocks ``rm``: it is held for a decision, as before.
    assert done.status == "suspended"
    assert done.interruption is not None
    assert done.interruption.tool_call_id == "c2"
    assert log == [("echo", {"x": 1})]


async def test_run_guardrails_beyond_the_record_bounds_are_refused_before_provider_work() -> None:
    world = World()
    agent = world.agent(TURNS)
    many = [no_root(f"g{i}") for i in range(65)]
    with pytest.raises(AgentRunStateError) as info:
        await agent.create_session(id="s1").run(
            "x", run_state=world.run_state(), guardrails={"tool_input": many}
        )
    assert info.value.code == CODE
    assert agent.provider.requests == []  # type: ignore[union-attr]
    assert world.checkpoints.saves == 0


async def test_a_malformed_record_is_refused_when_parsed() -> None:
    world, log = World(), []
    _, result = await suspended(world, log)
    record = await world.checkpoints.inner.load(AGENT_RUN_NAMESPACE, result.run_id)
    assert record is not None
    value = {**record.value, "run_guardrails": [{"stage": "later", "name": "x"}]}
    with pytest.raises(AgentRunStateError, match="unknown stage"):
        parse_state(value, max_bytes=1 << 20)
    value = {**record.value, "run_guardrails": [{"stage": "input", "name": ""}]}
    with pytest.raises(AgentRunStateError, match=r"1\.\.256 characters"):
        parse_state(value, max_bytes=1 << 20)
