"""``needs_approval=`` as a check ``(args, context) -> bool``, sync or async, asked per call
before dispatch; a check that fails holds the call (fail closed)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from prism_core import (
    AgentRunError,
    AgentRunStateError,
    RunStateOptions,
    ToolDefinition,
    create_memory_checkpoint_store,
    resume_agent_run,
    tool,
)
from prism_core.durable._fingerprint import fingerprint_material
from prism_core.durable._options import coerce_run_state_options
from tests.core.helpers import scripted_agent, text_turn, tool_turn


def _refund_tool(log: list[str], check: Any, **kw: Any) -> ToolDefinition:
    def refund(args: dict[str, Any], context: Any) -> str:
        log.append(f"refund {args['amount']}")
        return "refunded"

    return ToolDefinition("refund", refund, needs_approval=check, **kw)


def _over_100(args: dict[str, Any], context: Any) -> bool:
    return bool(args["amount"] > 100)


async def _over_100_async(args: dict[str, Any], context: Any) -> bool:
    return bool(args["amount"] > 100)


@pytest.mark.anyio
@pytest.mark.parametrize("check", [_over_100, _over_100_async], ids=["sync", "async"])
async def test_the_check_holds_only_the_calls_it_answers_true_for(check: Any) -> None:
    """A refund of 40 runs at once; one of 900 in the same turn is held for a decision, and
    runs once approved."""
    log: list[str] = []
    checkpoints = create_memory_checkpoint_store()
    agent = scripted_agent(
        [
            tool_turn(("c1", "refund", {"amount": 40}), ("c2", "refund", {"amount": 900})),
            text_turn("done"),
        ],
        id="desk",
        tools=[_refund_tool(log, check)],
    )
    session = agent.create_session()
    result = await session.run("refunds", run_state=RunStateOptions(checkpoints, "r1"))
    assert result.status == "suspended"
    assert log == ["refund 40"]
    assert result.interruption is not None
    (pending,) = result.interruption.pending_decisions
    assert pending.tool_call_id == "c2"
    assert pending.kind == "tool_approval"
    assert result.run_state is not None
    resumed = await resume_agent_run(
        agent,
        {"run_id": result.run_id, "session_id": session.id},
        {"expected_version": result.run_state.version, "decision": "approve", "actor": "ann"},
        checkpoints=checkpoints,
        definition_revision="r1",
    )
    assert resumed.status == "succeeded"
    assert log == ["refund 40", "refund 900"]


@pytest.mark.anyio
async def test_the_check_sees_the_call_and_who_started_the_run_on_the_loop_thread() -> None:
    """Its context names the tool, the call, the run, the session and the run's starter; a
    sync check is called on the event loop's own thread (no worker thread per call)."""
    seen: list[tuple[Any, ...]] = []
    loop_thread = threading.get_ident()

    def check(args: dict[str, Any], context: Any) -> bool:
        seen.append(
            (
                dict(args),
                context.tool_name,
                context.tool_call_id,
                context.run_id,
                context.session_id,
                context.started_by,
                threading.get_ident(),
            )
        )
        return False

    log: list[str] = []
    agent = scripted_agent(
        [tool_turn(("c7", "refund", {"amount": 5})), text_turn("ok")],
        tools=[_refund_tool(log, check)],
    )
    session = agent.create_session()
    result = await session.run("refund", actor="carol")
    assert result.status == "succeeded"
    assert log == ["refund 5"]
    assert seen == [
        ({"amount": 5}, "refund", "c7", result.run_id, session.id, "carol", loop_thread)
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "check",
    [lambda args, context: 1 / 0, lambda args, context: "yes"],
    ids=["raises", "not-a-bool"],
)
async def test_a_failing_check_holds_the_call(check: Any) -> None:
    """A check that raises, or answers anything but a bool, fails closed: the call is held for
    a person, the pending reason says why, and nothing ran."""
    log: list[str] = []
    agent = scripted_agent(
        [tool_turn(("c1", "refund", {"amount": 1})), text_turn("x")],
        id="desk",
        tools=[_refund_tool(log, check)],
    )
    result = await agent.create_session().run(
        "refund", run_state=RunStateOptions(create_memory_checkpoint_store(), "r1")
    )
    assert result.status == "suspended"
    assert log == []
    assert result.interruption is not None
    (pending,) = result.interruption.pending_decisions
    assert pending.reason is not None
    assert "needs_approval check of refund" in pending.reason


@pytest.mark.anyio
async def test_a_run_that_cannot_suspend_refuses_a_call_the_check_holds() -> None:
    """Without ``run_state``: a held call (the check said True, or it raised) fails the run
    with ``ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE`` before the tool runs."""
    for check in (_over_100, lambda args, context: 1 / 0):
        log: list[str] = []
        agent = scripted_agent(
            [tool_turn(("c1", "refund", {"amount": 500})), text_turn("x")],
            tools=[_refund_tool(log, check)],
        )
        with pytest.raises(AgentRunError) as caught:
            await agent.create_session().run("refund")
        assert caught.value.code == "ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE"
        assert log == []


def test_the_definition_records_and_checks_the_approval_settings() -> None:
    """``@tool`` takes the check, ``approvers`` and ``approval_timeout_ms``; the fingerprint
    records a check as ``"callable"`` and ``approvers`` above one; bad values are refused."""

    @tool(needs_approval=_over_100, approvers=2, approval_timeout_ms=60_000)
    def wire(amount: int) -> str:
        """Wire money."""
        return "sent"

    assert wire.needs_approval is _over_100
    assert wire.approvers == 2
    assert wire.approval_timeout_ms == 60_000
    agent = scripted_agent([], id="a", tools=[wire])
    (material,) = fingerprint_material(agent, "r1")["tools"]
    assert material["needs_approval"] == "callable"
    assert material["approvers"] == 2
    plain = ToolDefinition("wire", lambda a, c: None)
    assert plain.approvers == 1
    assert plain.approval_timeout_ms is None
    with pytest.raises(TypeError):
        ToolDefinition("wire", lambda a, c: None, needs_approval=lambda a: True)
    with pytest.raises(ValueError):
        ToolDefinition("wire", lambda a, c: None, approvers=0)
    with pytest.raises(TypeError):
        ToolDefinition("wire", lambda a, c: None, approvers=True)
    with pytest.raises(ValueError):
        ToolDefinition("wire", lambda a, c: None, approval_timeout_ms=0)
    with pytest.raises(TypeError):
        ToolDefinition("wire", lambda a, c: None, approval_timeout_ms=1.5)  # type: ignore[arg-type]
    store = create_memory_checkpoint_store()
    options = coerce_run_state_options(
        {"checkpoints": store, "definition_revision": "r", "approval_timeout_ms": 5}
    )
    assert options is not None
    assert options.approval_timeout_ms == 5
    with pytest.raises(AgentRunStateError):
        coerce_run_state_options(
            {"checkpoints": store, "definition_revision": "r", "approval_timeout_ms": -1}
        )
