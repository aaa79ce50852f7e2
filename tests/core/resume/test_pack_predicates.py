"""Guardrail packs with deny predicates on durable runs, and where pack guards run."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentRunStateError,
    Guardrail,
    create_agent_run_lifecycle,
    resume_agent_run,
    resume_agent_run_stream,
)

from ..durable_support import REVISION, World
from ..helpers import echo_tool, text_turn, tool_turn

pytestmark = pytest.mark.anyio


def no_root(args: dict[str, Any], ctx: Any) -> bool:
    return args.get("path") == "/"


def house_pack(predicate: Any = no_root, reason: str = "never the root") -> dict[str, Any]:
    """An inline pack whose rule is a deny predicate (a callable no checkpoint can hold)."""
    return {
        "id": "house",
        "version": 2,
        "rules": [{"id": "no-root", "tool": "rm", "deny": predicate, "reason": reason}],
    }


TURNS = [
    tool_turn(("c1", "echo", {"x": 1})),
    tool_turn(("c2", "rm", {"path": "/"})),
    text_turn("done"),
]


async def suspended(world: World, log: list[Any]) -> tuple[Any, Any]:
    """A durable run on a session with the predicate pack, suspended before its first tool."""
    agent = world.agent(TURNS, tools=[echo_tool(log=log), echo_tool("rm", log=log)])
    session = agent.create_session(id="s1", guardrail_packs=[house_pack()])
    result = await session.run("clean up", run_state=world.run_state(interrupt_before_tool=True))
    assert result.status == "suspended"
    return agent, result


async def test_a_predicate_pack_runs_durably_and_records_its_identity() -> None:
    """The checkpoint records id, version and a digest instead of the callable."""
    world, log = World(), []
    _, result = await suspended(world, log)
    record = await world.checkpoints.inner.load(AGENT_RUN_NAMESPACE, result.run_id)
    assert record is not None
    rows = record.value["session_state"]["guardrail_packs"]["packs"]
    assert len(rows) == 1
    row = rows[0]
    assert (row["id"], row["version"], row["host_supplied"]) == ("house", 2, True)
    assert row["digest"].startswith("sha256:")
    assert "rules" not in row


async def test_a_resume_reinstates_the_supplied_pack_and_enforces_it() -> None:
    """The host supplies the pack again: matched by identity, its predicate still blocks."""
    world, log = World(), []
    agent, result = await suspended(world, log)
    resumed = await resume_agent_run(
        agent,
        {"run_id": result.run_id, "session_id": "s1"},
        {"decision": "approve", "expected_version": result.run_state.version},
        guardrail_packs=[house_pack()],
        **world.resume_options(),
    )
    assert resumed.status == "succeeded"
    # echo ran once; rm was refused by the pack's predicate and never executed.
    assert log == [("echo", {"x": 1})]
    requests = agent.provider.requests  # type: ignore[union-attr]
    blocked = [m for m in requests[-1].messages if m.role == "tool"][-1].content[0]
    assert blocked.error is not None
    assert "pack:house/no-root" in blocked.error.message


async def test_a_resume_without_the_pack_is_refused_before_the_claim() -> None:
    """Missing, changed, or unrecorded packs refuse the resume naming the pack; nothing is
    written and no tool runs."""
    world, log = World(), []
    agent, result = await suspended(world, log)
    ref = {"run_id": result.run_id, "session_id": "s1"}
    resume = {"decision": "approve", "expected_version": result.run_state.version}
    before = await world.checkpoints.raw(result.run_id)
    saves = world.checkpoints.saves
    with pytest.raises(AgentRunStateError, match=r"'house'.*must be supplied again"):
        await resume_agent_run(agent, ref, resume, **world.resume_options())
    with pytest.raises(AgentRunStateError, match="'house' was supplied with a different"):
        await resume_agent_run(
            agent,
            ref,
            resume,
            guardrail_packs=[house_pack(reason="changed")],
            **world.resume_options(),
        )
    with pytest.raises(AgentRunStateError, match=r"\['other'\] were supplied"):
        await resume_agent_run(
            agent,
            ref,
            resume,
            guardrail_packs=[
                house_pack(),
                {"id": "other", "rules": [{"id": "r", "deny": no_root}]},
            ],
            **world.resume_options(),
        )
    lifecycle = create_agent_run_lifecycle(
        checkpoints=world.checkpoints, resolve_agent=lambda agent_id: (agent, REVISION)
    )
    with pytest.raises(AgentRunStateError, match="'house'"):
        await lifecycle.resume(ref, resume)
    assert world.checkpoints.saves == saves
    assert await world.checkpoints.raw(result.run_id) == before
    assert log == []
    # The same pack through the lifecycle is accepted.
    done = await lifecycle.resume(ref, resume, guardrail_packs=[house_pack()])
    assert done.status == "succeeded"


async def test_pack_guards_run_after_the_agents_and_before_the_runs() -> None:
    """Tool-input order: the agent's guards, then the session's packs, then the run's."""
    world, log = World(), []
    order: list[str] = []

    def watch(name: str) -> Any:
        def evaluate(ctx: Any) -> Any:
            order.append(name)
            return {"action": "allow"}

        return Guardrail(name, "tool_input", evaluate)

    def predicate(args: dict[str, Any], ctx: Any) -> bool:
        order.append("pack")
        return False

    agent = world.agent(
        [tool_turn(("c1", "rm", {"path": "/tmp"})), text_turn("ok")],
        tools=[echo_tool("rm", log=log)],
        guardrails={"tool_input": [watch("agent")]},
    )
    session = agent.create_session(guardrail_packs=[house_pack(predicate)])
    result = await session.run("go", guardrails={"tool_input": [watch("run")]})
    assert result.status == "succeeded"
    assert order == ["agent", "pack", "run"]
    assert log == [("rm", {"path": "/tmp"})]


async def test_the_resume_stream_takes_the_supplied_packs() -> None:
    """resume_agent_run_stream(..., guardrail_packs=...) reinstates and enforces the pack;
    without it the stream is refused before the claim."""
    world, log = World(), []
    agent, result = await suspended(world, log)
    ref = {"run_id": result.run_id, "session_id": "s1"}
    resume = {"decision": "approve", "expected_version": result.run_state.version}
    before = await world.checkpoints.raw(result.run_id)
    refused = resume_agent_run_stream(agent, ref, resume, **world.resume_options())
    with pytest.raises(AgentRunStateError, match="'house'"):
        await refused.__anext__()
    assert await world.checkpoints.raw(result.run_id) == before

    stream = resume_agent_run_stream(
        agent, ref, resume, guardrail_packs=[house_pack()], **world.resume_options()
    )
    events = [event async for event in stream]
    assert events[-1].type == "agent_finished"
    blocked = [e for e in events if e.type == "tool_execution_blocked"]
    assert [(e.tool_call_id, e.reason) for e in blocked] == [("c2", "guardrail_blocked")]
    assert "pack:house/no-root" in blocked[0].error.message
    assert log == [("echo", {"x": 1})]


async def test_a_resumed_run_keeps_the_guard_order() -> None:
    """After a resume the agent's guards still run first, then the packs in the order the
    suspended run had them, whatever order the host supplies them in."""
    world, log = World(), []
    order: list[str] = []

    def watch(ctx: Any) -> Any:
        order.append("agent")
        return {"action": "allow"}

    def pack(name: str) -> dict[str, Any]:
        def predicate(args: dict[str, Any], ctx: Any) -> bool:
            order.append(name)
            return False

        return {"id": name, "rules": [{"id": "r", "tool": "rm", "deny": predicate}]}

    def built() -> Any:
        return world.agent(
            [
                tool_turn(("c1", "rm", {"path": "/a"})),
                tool_turn(("c2", "rm", {"path": "/b"})),
                text_turn("ok"),
            ],
            tools=[echo_tool("rm", log=log)],
            guardrails={"tool_input": [Guardrail("agent", "tool_input", watch)]},
        )

    session = built().create_session(id="s1", guardrail_packs=[pack("first"), pack("second")])
    first = await session.run("go", run_state=world.run_state(interrupt_before_tool=True))
    assert first.status == "suspended"
    assert order == ["agent", "first", "second"]
    order.clear()
    resumed = await resume_agent_run(
        built(),
        {"run_id": first.run_id, "session_id": "s1"},
        {"decision": "approve", "expected_version": first.run_state.version},
        guardrail_packs=[pack("second"), pack("first")],
        **world.resume_options(),
    )
    assert resumed.status == "suspended"
    # The approved call, then the next turn's call before it suspends.
    assert order == ["agent", "first", "second"] * 2
    assert log == [("rm", {"path": "/a"})]
