"""Receipts: after an allowed call has run, its audit gains ``executed`` or
``execution_failed`` on channel ``worker`` naming the process (``host:pid``); a crash after
the result was stored gets its receipt from the continue; the records ride the commits the
run makes anyway; a run never ends ``succeeded`` owing one."""

from __future__ import annotations

import os
import socket
from typing import Any

import pytest

from prism_core import (
    ProviderRequest,
    ToolDefinition,
    create_agent,
    create_mock_provider,
    load_agent_run_state,
    resume_agent_run,
)
from prism_core.durable import _run

from ..durable_support import World
from ..helpers import text_turn, tool_turn
from ..resume.test_in_doubt import WorkerDied

ME = f"{socket.gethostname()}:{os.getpid()}"
SCRIPT = [tool_turn(("p1", "pay", {"amount": 250})), text_turn("paid")]


def _pay(log: list[Any], *, fail: bool = False) -> ToolDefinition:
    def pay(args: dict[str, Any], context: Any) -> Any:
        log.append(args["amount"])
        if fail:
            raise RuntimeError("card declined")
        return {"paid": args["amount"]}

    return ToolDefinition("pay", pay, needs_approval=True)


async def _suspend(world: World, tool: ToolDefinition, **options: Any) -> Any:
    agent = world.agent(SCRIPT, id="payer", tools=[tool])
    result = await agent.create_session(id="s1").run("pay", run_state=world.run_state(**options))
    assert result.status == "suspended"
    return result


async def _approve(world: World, tool: ToolDefinition, result: Any, **config: Any) -> Any:
    agent = world.agent(SCRIPT, id="payer", tools=[tool], **config)
    return await resume_agent_run(
        agent,
        {"run_id": result.run_id, "session_id": "s1"},
        {"expected_version": result.run_state.version, "decision": "approve", "actor": "ann"},
        **world.resume_options(),
    )


async def _audit(world: World, run_id: str) -> Any:
    found = await load_agent_run_state(world.checkpoints, {"run_id": run_id})
    assert found is not None
    return found


@pytest.mark.anyio
async def test_an_allowed_call_that_ran_has_an_executed_receipt() -> None:
    world, log = World(), []
    result = await _suspend(world, _pay(log))
    (pending,) = result.interruption.pending_decisions
    done = await _approve(world, _pay(log), result)
    assert done.status == "succeeded"
    assert log == [250]
    found = await _audit(world, result.run_id)
    allow, executed = found.audit
    assert allow.outcome == "allow_once"
    assert (executed.outcome, executed.actor, executed.channel) == ("executed", ME, "worker")
    assert (executed.approval_id, executed.tool_call_id, executed.tool_name) == (
        pending.approval_id,
        "p1",
        "pay",
    )
    assert executed.arguments_hash == allow.arguments_hash
    assert executed.decided_at >= allow.decided_at


@pytest.mark.anyio
async def test_a_raising_tool_has_an_execution_failed_receipt() -> None:
    world, log = World(), []
    result = await _suspend(world, _pay(log, fail=True))
    done = await _approve(world, _pay(log, fail=True), result)
    assert done.status == "succeeded"
    found = await _audit(world, result.run_id)
    assert [(r.outcome, r.actor, r.reason) for r in found.audit] == [
        ("allow_once", "ann", None),
        ("execution_failed", ME, "tool_execution_error"),
    ]


@pytest.mark.anyio
async def test_an_allowed_call_blocked_before_it_started_says_so() -> None:
    """The host validator refuses the approved call on its re-check: it never runs, and its
    receipt is ``execution_failed`` saying it was not run."""
    world, log = World(), []
    result = await _suspend(world, _pay(log))
    done = await _approve(world, _pay(log), result, validate=lambda call, tool, ctx: "frozen")
    assert done.status == "succeeded"
    assert log == []
    found = await _audit(world, result.run_id)
    assert [(r.outcome, r.reason) for r in found.audit] == [
        ("allow_once", None),
        ("execution_failed", "not run: blocked before it started"),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("policy", ["decision", "every-turn"])
async def test_receipts_cost_no_commit(policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same approved run writes as many checkpoints with receipts as without them, and
    its last checkpoint carries the receipt."""

    async def saves() -> tuple[int, Any]:
        world, log = World(), []
        result = await _suspend(world, _pay(log), checkpoint_policy=policy)
        before = world.checkpoints.saves
        done = await _approve(world, _pay(log), result)
        assert done.status == "succeeded"
        return world.checkpoints.saves - before, await _audit(world, result.run_id)

    with_receipts, found = await saves()
    assert [r.outcome for r in found.audit] == ["allow_once", "executed"]
    monkeypatch.setattr(_run.ReceiptBook, "owe", lambda self, audit, calls: None)
    without, found = await saves()
    assert [r.outcome for r in found.audit] == ["allow_once"]
    assert with_receipts == without


@pytest.mark.anyio
async def test_a_run_that_would_succeed_owing_a_receipt_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Were a receipt never written, the run ends ``failed`` (``ERR_PRISM_RECEIPT_MISSING``),
    never ``succeeded``."""
    monkeypatch.setattr(_run.ReceiptBook, "settle", lambda self, *a, **kw: None)
    world, log = World(), []
    result = await _suspend(world, _pay(log))
    with pytest.raises(Exception) as caught:
        await _approve(world, _pay(log), result)
    assert getattr(caught.value, "code", None) == "ERR_PRISM_RECEIPT_MISSING"
    found = await _audit(world, result.run_id)
    assert found.state.status == "failed"
    assert found.state.error.code == "ERR_PRISM_RECEIPT_MISSING"


@pytest.mark.anyio
async def test_a_crash_after_the_result_was_stored_gets_its_receipt_from_the_continue() -> None:
    """The worker dies on the model call after the approved call stored its result (its
    receipt was to ride the next checkpoint): the continue records ``executed``, naming the
    process the ``dispatched`` mark recorded, and does not run the call again."""
    world, log = World(), []
    result = await _suspend(world, _pay(log))

    def dying(request: ProviderRequest) -> Any:
        raise WorkerDied()

    agent = create_agent(
        id="payer",
        model={"provider": "mock", "model": "demo"},
        provider=create_mock_provider(dying),
        store=world.sessions,
        tools=[_pay(log)],
    )
    with pytest.raises(WorkerDied):
        await resume_agent_run(
            agent,
            {"run_id": result.run_id, "session_id": "s1"},
            {"expected_version": result.run_state.version, "decision": "approve", "actor": "ann"},
            **world.resume_options(),
        )
    assert log == [250]
    crashed = await _audit(world, result.run_id)
    assert crashed.state.status == "running"
    (mark,) = crashed.state.pending_calls
    assert (mark.status, mark.dispatched_by) == ("dispatched", ME)
    assert [r.outcome for r in crashed.audit] == ["allow_once"]
    done = await resume_agent_run(
        world.agent(SCRIPT, id="payer", tools=[_pay(log)]),
        {"run_id": result.run_id, "session_id": "s1"},
        {"expected_version": crashed.version, "decision": "continue"},
        **world.resume_options(),
    )
    assert done.status == "succeeded"
    assert log == [250]
    found = await _audit(world, result.run_id)
    assert [(r.outcome, r.actor, r.channel) for r in found.audit] == [
        ("allow_once", "ann", "host"),
        ("executed", ME, "worker"),
    ]
    assert found.audit[1].reason == "recorded by the continue after a restart"


@pytest.mark.anyio
async def test_a_call_a_sticky_allow_let_through_has_its_own_receipt() -> None:
    """``allow_for_run`` lets a later identical call run without a decision of its own; that
    call is still an allowed call and ends with its own ``executed`` receipt, naming the
    ``allow_for_run`` decision that let it through."""
    world, log = World(), []
    script = [
        tool_turn(("p1", "pay", {"amount": 250})),
        tool_turn(("p2", "pay", {"amount": 250})),
        text_turn("paid twice"),
    ]
    agent = world.agent(script, id="payer", tools=[_pay(log)])
    result = await agent.create_session(id="s1").run("pay", run_state=world.run_state())
    assert result.status == "suspended"
    (pending,) = result.interruption.pending_decisions
    done = await resume_agent_run(
        world.agent(script, id="payer", tools=[_pay(log)]),
        {"run_id": result.run_id, "session_id": "s1"},
        {
            "expected_version": result.run_state.version,
            "decisions": [{"approval_id": pending.approval_id, "outcome": "allow_for_run"}],
            "actor": "ann",
        },
        **world.resume_options(),
    )
    assert done.status == "succeeded"
    assert log == [250, 250]
    found = await _audit(world, result.run_id)
    assert [(r.tool_call_id, r.outcome, r.actor, r.channel) for r in found.audit] == [
        ("p1", "allow_for_run", "ann", "host"),
        ("p1", "executed", ME, "worker"),
        ("p2", "executed", ME, "worker"),
    ]
    assert {r.approval_id for r in found.audit} == {pending.approval_id}
