"""The resume's order and the pack state a checkpoint carries: on_session sees the session
before a pack restore can fail, and an unset pack state is not written."""

from __future__ import annotations

from typing import Any

import pytest

import prism_packs
from prism_core import AGENT_RUN_NAMESPACE, AgentRunStateError, ToolDefinition, resume_agent_run

from ..durable_support import World
from ..helpers import echo_tool, text_turn, tool_turn

pytestmark = pytest.mark.anyio


def tools(results: dict[str, Any]) -> list[ToolDefinition]:
    """A validation tool ``test`` answering ``results["test"]`` and an ``echo``."""
    return [ToolDefinition("test", lambda args, ctx: results["test"]), echo_tool()]


async def test_on_session_sees_the_session_before_a_pack_restore_fails() -> None:
    """A checkpoint whose pack the resuming agent cannot compile: on_session is still called,
    with the new session, before the resume is refused; nothing is written."""
    world = World()
    agent = world.agent(
        [tool_turn(("c1", "echo", {"n": 1})), text_turn("done")],
        tools=[echo_tool()],
        plugins=[prism_packs.plugin],
    )
    session = agent.create_session(id="s1", guardrail_packs=["validation-respect"])
    result = await session.run(
        "go", run_state=world.run_state(interrupt_before_tool=True, persist_session_state=True)
    )
    assert result.status == "suspended"
    seen: list[str] = []
    saves = world.checkpoints.saves
    without_packs = world.agent([text_turn("done")], tools=[echo_tool()])
    with pytest.raises(AgentRunStateError, match="guardrail packs cannot be reinstated"):
        await resume_agent_run(
            without_packs,
            {"run_id": result.run_id, "session_id": "s1"},
            {"expected_version": result.run_state.version, "decision": "approve"},
            on_session=lambda s: seen.append(s.id),
            **world.resume_options(),
        )
    assert seen == ["s1"]
    assert world.checkpoints.saves == saves


async def test_an_unset_pack_state_is_not_written() -> None:
    """validation-respect with nothing failed has no state: the checkpoint's pack block holds
    the pack's row and no state; once a validation fails, its state rides the checkpoint."""
    world = World()
    results: dict[str, Any] = {"test": {"exit_code": 0}}
    turns = [
        tool_turn(("c1", "test", {})),
        tool_turn(("c2", "echo", {"n": 1})),
        text_turn("done"),
    ]
    agent = world.agent(turns, tools=tools(results), plugins=[prism_packs.plugin])
    session = agent.create_session(id="s1", guardrail_packs=["validation-respect"])
    clean = await session.run(
        "go", run_state=world.run_state(checkpoint_policy="every-turn", persist_session_state=True)
    )
    record = await world.checkpoints.inner.load(AGENT_RUN_NAMESPACE, clean.run_id)
    assert record is not None
    block = record.value["session_state"]["guardrail_packs"]
    assert [row["id"] for row in block["packs"]] == ["validation-respect"]
    assert "state" not in block

    results["test"] = {"exit_code": 1}
    failing = world.agent(turns, tools=tools(results), plugins=[prism_packs.plugin])
    other = failing.create_session(id="s2", guardrail_packs=["validation-respect"])
    failed = await other.run(
        "go", run_state=world.run_state(checkpoint_policy="every-turn", persist_session_state=True)
    )
    record = await world.checkpoints.inner.load(AGENT_RUN_NAMESPACE, failed.run_id)
    assert record is not None
    state = record.value["session_state"]["guardrail_packs"]["state"]
    assert state == {"validation-respect": {"validation_failed": "test"}}
