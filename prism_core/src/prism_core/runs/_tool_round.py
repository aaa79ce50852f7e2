"""The tool round: every tool call of a turn, from middleware to its stored result.

Owns, per call: ``tool_call`` middleware, the tool-input guardrail stage (an ``ask`` never
outranks a later deny), the registry/schema/policy checks, the approval gate of a durable run
(sticky decisions, the ``dispatched`` mark), execution with progress events, the tool-output
guardrail stage, ``tool_result`` middleware and delivery of the result to the session. It also
finishes the decided calls of a resumed suspension. It must not decide when a durable run
suspends (``_execution``), and writes checkpoints only through the durable boundary.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Collection, Sequence
from contextlib import aclosing
from typing import Any

import anyio
import attrs

from .._approval_gate import ask_needs_approval
from .._elicitation import elicitation_request
from ..content import ErrorInfo, Message, ToolCallContent, ToolResult
from ..durable import (
    EXECUTED,
    EXECUTION_FAILED,
    MAX_PENDING_DECISIONS,
    DecisionKind,
    Gate,
    approvals_for,
    new_approval_id,
    scope_for,
)
from ..errors import AgentDecisionError
from ..events import (
    AgentEvent,
    ToolExecutionBlockedEvent,
    ToolExecutionErrorEvent,
    ToolExecutionFinishedEvent,
    ToolExecutionProgressEvent,
    ToolExecutionStartedEvent,
)
from ..guardrails import (
    Guardrail,
    GuardrailRecord,
    ask_decision_reason,
    first_decisive,
    pack_rule_of,
)
from ..middleware import MiddlewareContext
from ..redaction import redact_value
from ..tools import (
    DispatchOutcome,
    ToolDefinition,
    ToolExecutionContext,
    check_tool_call,
    execute_tool,
)
from ._boundary import recheck_approved_input
from ._budget import record_dispatch
from ._delegation import ChildOutcome, delegate_of, nested_gates, parent_view
from ._failures import AbortRequested, RunFailure, RunSuspended
from ._guarding import act_on_tool_stage, decision_event, evaluate, strongest
from ._state import RunState

__all__ = (
    "APPROVAL_REJECTED",
    "APPROVAL_REQUIRED",
    "REJECTED_FOR_RUN",
    "TOOL_CALL_BLOCKED",
    "TOOL_RESULT_BLOCKED",
    "UNAPPROVABLE",
    "check_decision_cap",
    "reject",
    "resume_pending",
    "tool_call",
)

logger = logging.getLogger(__package__ or __name__)

DECISION_LIMIT = "ERR_PRISM_DECISION_LIMIT"
#: A gated call's pending reason when nothing more specific asked for the decision.
APPROVAL_REQUIRED = "Tool side effect requires approval"
#: A rejected call's result when the approver gave no reason; a ``reject_for_run`` answering
#: a later call without one.
APPROVAL_REJECTED = "Approval rejected"
REJECTED_FOR_RUN = "Rejected for this run"
TOOL_CALL_BLOCKED = "Tool call blocked by guardrail"
#: The reason of the receipt of an allowed call that was blocked before it started.
NOT_RUN = "not run: blocked before it started"
TOOL_RESULT_BLOCKED = "Tool result blocked by guardrail"
UNAPPROVABLE = (
    "Tool call refused: it needs a human decision, but its arguments hold a value that is "
    "redacted (or rewritten) before it is stored, so the approver could not see what would "
    "run. Call it again without the secret value."
)


def _tool_context(run: RunState, call: ToolCallContent) -> ToolExecutionContext:
    def progress(value: Any) -> None:
        run.deferred.append(
            run.emit(
                ToolExecutionProgressEvent(
                    session_id=run.session_id,
                    run_id=run.run_id,
                    tool_call_id=call.id,
                    name=call.name,
                    progress=value,
                )
            )
        )

    return ToolExecutionContext(
        session_id=run.session_id,
        run_id=run.run_id,
        tool_call_id=call.id,
        tool_name=call.name,
        signal=run.signal,
        metadata=run.plan.metadata,
        fencing_token=run.durable.fencing_token if run.durable is not None else 0,
        on_progress=progress,
        skills=run,
        started_by=run.started_by,
        approvals=(
            approvals_for(run.durable.audit, run.durable.sticky, call.id, call.name)
            if run.durable is not None
            else ()
        ),
    )


def _tool_call_context(run: RunState, call: ToolCallContent) -> MiddlewareContext:
    """The ``tool_call`` point's context: the run's, with the called tool's description."""
    context = run.mw_context("tool_call")
    tool = run.agent.registry.get(call.name)
    if tool is None or not tool.description:
        return context
    return attrs.evolve(context, tool_description=tool.description)


async def tool_call(
    run: RunState,
    call: ToolCallContent,
    invalid: bool,
    gates: list[Gate] | None = None,
    *,
    approved: bool = False,
) -> AsyncGenerator[AgentEvent, None]:
    """One call: middleware, tool-input guardrails, checks, the approval gate, dispatch.

    ``gates`` collects calls a durable run must hold for a decision; ``approved`` marks
    a call a human already approved. In a durable run with a record, a call of a tool that
    is neither read-only nor idempotent is marked ``dispatched`` right before it starts.
    """
    if run.signal.aborted:
        await anyio.lowlevel.checkpoint()
        raise AbortRequested()
    call = await run.agent.middleware.run("tool_call", call, _tool_call_context(run, call))
    ask: GuardrailRecord | None = None
    guards = run.plan.guardrails.for_stage("tool_input")
    if guards:
        decisive: GuardrailRecord | None = None
        can_hold = run.durable is not None and (gates is not None or approved)
        remaining = guards
        while remaining:
            records = await evaluate(run, "tool_input", remaining, call, call=call)
            if not can_hold:
                # A pack's ask rule blocks where the run cannot suspend, and the record
                # says so; any other interrupt is refused as unavailable below.
                records = [
                    _pack_ask_as_block(run, guard, record)
                    for guard, record in zip(remaining, records, strict=False)
                ]
            for record in records:
                yield run.emit(decision_event(run, record, call))
            decisive = strongest(records)
            if decisive is None or decisive.action != "interrupt":
                break
            # An ask never outranks a later deny: keep checking the guards after it.
            ask, decisive = ask or decisive, None
            if run.plan.guardrails.max_concurrency > 1:
                break
            remaining = remaining[len(records) :]
        if decisive is None and ask is not None and not can_hold:
            decisive, ask = ask, None
        if decisive is not None:
            act_on_tool_stage(decisive, "tool_input")
            refusal = None
            if run.session.compiled_packs is not None:
                refusal = run.session.compiled_packs.refusal_message(decisive)
            error = ErrorInfo(refusal or TOOL_CALL_BLOCKED, code="guardrail_blocked")
            yield await _block(run, call, "guardrail_blocked", error)
            return
    context = _tool_context(run, call)
    checked = await check_tool_call(
        call,
        registry=run.agent.registry,
        context=context,
        tool_names=run.plan.tool_names,
        validate=run.agent.validate,
        trust=run.agent.trust,
        permission=run.agent.permission,
        invalid_arguments=invalid,
        limiter=run.agent.thread_limiter,
    )
    if isinstance(checked, DispatchOutcome):
        assert checked.result.error is not None
        assert checked.blocked_reason is not None
        yield await _block(run, call, checked.blocked_reason, checked.result.error)
        return
    held: tuple[bool, str | None] = (False, None)
    if not approved and checked.needs_approval is not False:
        held = await ask_needs_approval(call.name, checked.needs_approval, call.arguments, context)
    if run.durable is None and held[0]:
        raise RunFailure(
            ErrorInfo(
                f"Tool {call.name!r} needs approval for this call, and only a durable run "
                "can suspend for one: run it with run_state=RunStateOptions(...)",
                code="ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE",
            )
        )
    if run.durable is not None and gates is not None and not approved:
        gate = _gate_for(run, call, checked, ask, held)
        if gate is not None and not _shown_as_run(run, call):
            # The approver would decide on arguments other than those the tool runs with
            # (a redacted secret, or a ``tool_call`` middleware edit): such a call can never
            # be approved faithfully, so it is refused before anything is written for it.
            yield await _block(
                run,
                call,
                "unapprovable_arguments",
                ErrorInfo(UNAPPROVABLE, code="unapprovable_arguments"),
            )
            return
        if gate is not None:
            assert gate.scope is not None
            sticky = run.durable.sticky_for(gate.scope)
            if sticky is None:
                gates.append(gate)
                return
            if sticky.outcome == "reject_for_run":
                for event in await reject(run, call, sticky.reason, REJECTED_FOR_RUN):
                    yield event
                return
            # Let through by a person's allow_for_run: the call owes a receipt like one they
            # allowed on its own.
            allows = approvals_for(run.durable.audit, (sticky,), call.id, call.name)
            if allows:
                run.durable.receipts.owe_call(call.id, allows[-1])
    record_dispatch(run, call)
    delegate = delegate_of(checked)
    # A sub-agent call is marked like a side effect: the mark commits the parent's call
    # before the child starts, so a continue finds the same call (and so the same child).
    marked = (
        run.durable is not None
        and run.durable.has_record
        and (checked.needs_dispatch_mark or delegate is not None)
    )
    if run.durable is not None:
        run.durable.ledger.started(call, checked.effect)
    if marked:
        assert run.durable is not None
        await run.durable.mark_dispatched(call)
    elif run.durable is not None:
        # Read-only and idempotent calls get no mark; a superseded worker must still stop.
        await run.durable.check_still_owner()
    yield run.emit(
        ToolExecutionStartedEvent(
            session_id=run.session_id,
            run_id=run.run_id,
            tool_call_id=call.id,
            name=call.name,
            arguments=dict(call.arguments),
        )
    )
    if delegate is not None:
        child = ChildOutcome()
        async with aclosing(delegate.run_child(parent_view(run), call, child)) as child_events:
            async for event in child_events:
                yield event
        if child.suspension is not None:
            nested_gates(run, call, checked, child, gates)
            return
        assert child.result is not None
        outcome = DispatchOutcome(child.result, "failed" if child.result.error else "executed")
    else:
        outcome = await execute_tool(
            checked, call, context, limiter=run.agent.thread_limiter, redactor=run.plan.redactor
        )
    if run.durable is not None and (approved or run.durable.receipts.owes(call.id)):
        failed = outcome.status != "executed"
        code = outcome.result.error.code if outcome.result.error is not None else None
        run.durable.add_receipt(call, EXECUTION_FAILED if failed else EXECUTED, code)
    if run.durable is not None:
        run.durable.ledger.finished(call.id, outcome.result, failed=outcome.status == "failed")
    for event in run.deferred:
        yield event
    run.deferred.clear()
    result = outcome.result
    if outcome.status == "failed":
        assert result.error is not None
        yield run.emit(
            ToolExecutionErrorEvent(
                session_id=run.session_id,
                run_id=run.run_id,
                tool_call_id=call.id,
                name=call.name,
                error=result.error,
            )
        )
    guards = run.plan.guardrails.for_stage("tool_output")
    if guards:
        records = await evaluate(run, "tool_output", guards, result, call=call)
        for record in records:
            yield run.emit(decision_event(run, record, call))
        decisive = first_decisive(records)
        if decisive is not None:
            act_on_tool_stage(decisive, "tool_output")
            result = ToolResult(
                call.id,
                call.name,
                error=ErrorInfo(TOOL_RESULT_BLOCKED, code="guardrail_blocked"),
            )
    result = await run.agent.middleware.run("tool_result", result, run.mw_context("tool_result"))
    yield await deliver(run, call, result)
    if (approved or marked) and run.durable is not None:
        run.durable.settle_pending(call.id)


def check_decision_cap(
    run: RunState, calls: Sequence[ToolCallContent], invalid_ids: Collection[str]
) -> None:
    """Fail the run before any call of a round dispatches when its calls could need more
    decisions than one suspension holds.

    A call counts when it reaches a known, allowed tool and is not decided by a sticky
    decision, and it would gate for certain (an elicitation tool, ``interrupt_before_tool``)
    or could (a tool-input guardrail may ask). Counting the possible asks too keeps the
    promise that nothing of the round runs when its suspension could not be written.
    """
    durable = run.durable
    if durable is None or len(calls) <= MAX_PENDING_DECISIONS:
        return
    may_ask = bool(run.plan.guardrails.for_stage("tool_input"))
    count = 0
    for call in calls:
        tool = run.agent.registry.get(call.name)
        if tool is None or call.id in invalid_ids:
            continue
        if run.plan.tool_names is not None and call.name not in run.plan.tool_names:
            continue
        gated = (
            may_ask
            or tool.elicitation is not None
            or tool.needs_approval is not False
            or durable.options.interrupt_before_tool
        )
        if gated and durable.sticky_for(scope_for(durable.agent_id, call, tool)) is None:
            count += 1
    if count > MAX_PENDING_DECISIONS:
        message = f"Pending decisions exceed {MAX_PENDING_DECISIONS} per run"
        logger.warning(
            "run %s: %s (%d calls of one turn may need a decision; none of them ran)",
            run.run_id,
            message,
            count,
        )
        raise RunFailure(
            ErrorInfo(message, code=DECISION_LIMIT),
            cause=AgentDecisionError(message, code=DECISION_LIMIT),
        )


async def resume_pending(run: RunState) -> AsyncGenerator[AgentEvent, None]:
    """Finish the decided work of a resumed run, in the order of the calls: decided and
    resolved calls first, then the calls of a crashed round that never started (checked and
    gated like any call; held ones suspend the run)."""
    assert run.resume is not None
    assert run.durable is not None
    plan = run.resume
    if plan.pending_input:
        for event in await recheck_approved_input(run, plan.pending_input):
            yield event
    # A decided sub-agent call whose child suspends again holds the run here too.
    gates: list[Gate] = []
    for pending in list(run.durable.pending_calls):
        call = plan.calls[pending.tool_call_id]
        if pending.modified_arguments is not None:
            call = ToolCallContent(call.id, call.name, dict(pending.modified_arguments))
        if pending.status == "resolved":
            if pending.resolution == "failed":
                error = ErrorInfo(
                    f"Tool call outcome unknown after a crash; resolved as failed: "
                    f"{pending.reason or ''}",
                    code="tool_in_doubt_failed",
                )
                yield await deliver(run, call, ToolResult(call.id, call.name, error=error))
            else:
                yield await deliver(run, call, ToolResult(call.id, call.name, pending.result))
            run.durable.settle_pending(call.id)
        elif pending.status == "rejected":
            for event in await reject(run, call, pending.reason):
                yield event
            run.durable.settle_pending(call.id)
        elif pending.status == "answered":
            answer = ToolResult(call.id, call.name, value=dict(pending.answer or {}))
            yield await deliver(run, call, answer)
            run.durable.settle_pending(call.id)
        else:
            tool_events = tool_call(run, call, False, gates, approved=True)
            async with aclosing(tool_events):
                async for event in tool_events:
                    yield event
            # A call blocked on re-check never ran; it is settled all the same (a sub-agent
            # call whose child suspended again is held, and owes its receipt still).
            if not any(gate.call.id == call.id for gate in gates):
                run.durable.add_receipt(call, EXECUTION_FAILED, NOT_RUN)
            run.durable.settle_pending(call.id)
    for call in plan.fresh:
        tool_events = tool_call(run, call, False, gates)
        async with aclosing(tool_events):
            async for event in tool_events:
                yield event
    if gates:
        raise RunSuspended(await run.durable.suspend(gates))
    for message in plan.pending_input:
        await run.session.transcript.append_message(message, run.run_id)


async def deliver(run: RunState, call: ToolCallContent, result: ToolResult) -> AgentEvent:
    """Redact ``result``, store it for the next turn, and emit ``tool_execution_finished``."""
    result = redact_value(result, run.plan.redactor)
    await _append_result(run, result)
    return run.emit(
        ToolExecutionFinishedEvent(
            session_id=run.session_id,
            run_id=run.run_id,
            tool_call_id=call.id,
            name=call.name,
            result=result,
        )
    )


def _pack_ask_as_block(run: RunState, guard: Guardrail, record: GuardrailRecord) -> GuardrailRecord:
    """``record`` as a block when it is an ask of one of the session's own pack rules (the
    guard object itself, not its name: a host guard may be called ``pack:x``)."""
    packs = run.session.compiled_packs
    if record.action != "interrupt" or packs is None:
        return record
    if not any(guard is pack_guard for pack_guard in packs.tool_input):
        return record
    return attrs.evolve(record, action="block")


def _shown_as_run(run: RunState, call: ToolCallContent) -> bool:
    """Whether the session stores ``call`` exactly as it would run: the approver sees the
    stored (redacted) call, and a resume runs the stored call."""
    stored = run.last_message.tool_calls if run.last_message is not None else ()
    for candidate in stored:
        if candidate.id == call.id:
            return candidate.name == call.name and candidate.arguments == call.arguments
    return False


def _gate_for(
    run: RunState,
    call: ToolCallContent,
    tool: ToolDefinition,
    ask: GuardrailRecord | None,
    held: tuple[bool, str | None],
) -> Gate | None:
    """The gate ``call`` must pass in a durable run, or ``None`` when it may run now.

    An elicitation tool asks for an answer instead (its reason, else the ask's, else
    :data:`APPROVAL_REQUIRED`); one whose elicitation function declines or raises is approved
    like any tool. A guard that asked names itself (``"Approval required by guardrail rule
    <name>: <reason>"``, with the pack rule as ``guardrail_rule``). ``held`` is the tool's
    ``needs_approval`` answer for this call (and why, when its check failed closed). An
    approval gate carries the tool's ``approvers``; every gate its ``approval_timeout_ms``."""
    assert run.durable is not None
    kind: DecisionKind
    request = elicitation_request(tool, call.arguments) if tool.elicitation is not None else None
    reason = ask_decision_reason(ask) if ask is not None else held[1] or APPROVAL_REQUIRED
    guardrail = ask.guardrail if ask is not None else None
    if request is not None:
        # An elicitation tool never executes: even a guardrail's ask is answered, not approved.
        kind = "elicitation"
        reason = request.reason or reason
    else:
        gated = ask is not None or tool.elicitation is not None or held[0]
        if not (gated or run.durable.options.interrupt_before_tool):
            return None
        kind = "tool_approval"
    return Gate(
        approvers=tool.approvers if kind == "tool_approval" else 1,
        timeout_ms=tool.approval_timeout_ms,
        call=call,
        tool=tool,
        kind=kind,
        reason=reason,
        guardrail=guardrail,
        scope=scope_for(run.durable.agent_id, call, tool),
        approval_id=new_approval_id(),
        elicitation_schema=request.schema if request is not None else None,
        guardrail_rule=pack_rule_of(ask) if ask is not None else None,
    )


async def reject(
    run: RunState, call: ToolCallContent, reason: str | None, default: str = APPROVAL_REJECTED
) -> list[AgentEvent]:
    """Answer ``call`` with an ``approval_rejected`` result (a human said no): the approver's
    reason, else ``default``."""
    message = reason or default
    return [
        await _block(run, call, "approval_rejected", ErrorInfo(message, code="approval_rejected"))
    ]


async def _block(run: RunState, call: ToolCallContent, reason: str, error: ErrorInfo) -> AgentEvent:
    """Answer ``call`` with an error result that it never ran, and emit
    ``tool_execution_blocked`` with ``reason``."""
    logger.warning("run %s: tool call %s (%s) blocked: %s", run.run_id, call.id, call.name, reason)
    error = redact_value(error, run.plan.redactor)
    await _append_result(run, ToolResult(call.id, call.name, error=error))
    return run.emit(
        ToolExecutionBlockedEvent(
            session_id=run.session_id,
            run_id=run.run_id,
            tool_call_id=call.id,
            name=call.name,
            reason=reason,
            error=error,
        )
    )


async def _append_result(run: RunState, result: ToolResult) -> None:
    message = Message("tool", (redact_value(result, run.plan.redactor).to_content(),))
    await run.session.transcript.append_message(message, run.run_id)
