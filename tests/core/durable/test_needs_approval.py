"""``needs_approval=True`` gates one tool: a durable run suspends before each of its calls."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import (
    AgentRunError,
    RunStateOptions,
    ToolDefinition,
    agent_fingerprint,
    create_memory_checkpoint_store,
    resume_agent_run,
    tool,
)
from tests.core.helpers import scripted_agent, text_turn, tool_turn


def _tools(log: list[str]) -> list[ToolDefinition]:
    def refund(args: dict[str, Any], context: Any) -> str:
        log.append(f"refund {args['amount']}")
        return "refunded"

    def lookup(args: dict[str, Any], context: Any) -> str:
        log.append("lookup")
        return "order A-1"

    return [
        ToolDefinition("refund", refund, needs_approval=True),
        ToolDefinition("lookup", lookup, effect="read"),
    ]


TURNS = [tool_turn(("c1", "lookup", {}), ("c2", "refund", {"amount": 900})), text_turn("done")]


@pytest.mark.anyio
async def test_a_durable_run_suspends_before_the_gated_tool_only() -> None:
    """The gated call is held as a ``tool_approval`` decision while the other call of the same
    turn runs; approving runs the refund once."""
    log: list[str] = []
    checkpoints = create_memory_checkpoint_store()
    agent = scripted_agent(TURNS, id="billing", tools=_tools(log))
    session = agent.create_session()
    result = await session.run("refund A-1", run_state=RunStateOptions(checkpoints, "r1"))
    assert result.status == "suspended"
    assert log == ["lookup"]
    assert result.interruption is not None
    (pending,) = result.interruption.pending_decisions
    assert pending.kind == "tool_approval"
    assert pending.scope.tool_name == "refund"
    assert result.run_state is not None
    resumed = await resume_agent_run(
        agent,
        {"run_id": result.run_id, "session_id": session.id},
        {"expected_version": result.run_state.version, "decision": "approve"},
        checkpoints=checkpoints,
        definition_revision="r1",
    )
    assert resumed.status == "succeeded"
    assert log == ["lookup", "refund 900"]


@pytest.mark.anyio
async def test_a_run_that_cannot_suspend_refuses_the_gated_call() -> None:
    """Without ``run_state`` the call of a ``needs_approval`` tool fails the run with
    ``ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE``; the tool never runs."""
    log: list[str] = []
    agent = scripted_agent(
        [tool_turn(("c2", "refund", {"amount": 5})), text_turn("x")], tools=_tools(log)
    )
    with pytest.raises(AgentRunError) as caught:
        await agent.create_session().run("refund")
    assert caught.value.code == "ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE"
    assert log == []


def test_the_decorator_and_the_fingerprint_know_the_flag() -> None:
    """``@tool(needs_approval=True)`` sets it; the fingerprint changes with it, and stays what
    it was for tools that do not set it; a non-boolean is refused."""

    @tool(needs_approval=True)
    def wire(amount: int) -> str:
        """Wire money."""
        return "sent"

    assert wire.needs_approval
    plain = ToolDefinition("wire", lambda a, c: None)
    gated = ToolDefinition("wire", lambda a, c: None, needs_approval=True)
    before = agent_fingerprint(scripted_agent([], id="a", tools=[plain]), "r1")
    after = agent_fingerprint(scripted_agent([], id="a", tools=[gated]), "r1")
    assert before != after
    # The material of an unflagged tool is what it was before the flag existed.
    from prism_core.durable._fingerprint import fingerprint_material

    (material,) = fingerprint_material(scripted_agent([], id="a", tools=[plain]), "r1")["tools"]
    assert set(material) == {"name", "parameters", "exclusive", "effect"}
    with pytest.raises(TypeError):
        ToolDefinition("wire", lambda a, c: None, needs_approval="yes")  # type: ignore[arg-type]
