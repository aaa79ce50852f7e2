"""The tool round: every tool call of a turn, from middleware to its stored result.

Owns, per call: ``tool_call`` middleware, the tool-input guardrail stage (an ``ask`` never
outranks a later deny), the registry/schema/policy checks, the approval gate of a durable run
(sticky decisions, the ``dispatched`` mark), execution with progress events, the tool-output
guardrail stage, ``tool_result`` middleware and delivery of the result to the session. It also
finishes the decided calls of a resumed suspension. It does not decide when a durable run
suspends (``_execution``) and writes checkpoints only through the durable boundary.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

import anyio
import attrs

from ..content import ErrorInfo, Message, ToolCallContent, ToolResult
from ..durable._boundary import DecisionKind, Gate, new_approval_id, scope_for
from ..events import (
    AgentEvent,
    ToolExecutionBlockedEvent,
    ToolExecutionErrorEvent,
    ToolExecutionFinishedEvent,
    ToolExecutionProgressEvent,
    ToolExecutionStartedEvent,
)
from ..guardrails import GuardrailRecord, first_decisive
from ..redaction import redact_value
from ..tools import (
    DispatchOutcome,
    ToolDefinition,
    ToolExecutionContext,
    check_tool_call,
    execute_tool,
)
from ._failures import AbortRequested, RunSuspended
from ._guarding import act_on_tool_stage, decision_event, evaluate, strongest
from ._state import RunState

__all__ = ("TOOL_CALL_BLOCKED", "TOOL_RESULT_BLOCKED", "reject", "resume_pending", "tool_call")

TOOL_CALL_BLOCKED = "Tool call blocked by guardrail"
TOOL_RESULT_BLOCKED = "Tool result blocked by guardrail"


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
        metadata=run.metadata,
        on_progress=progress,
        skills=run,
    )


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
    call = await run.agent.middleware.run("tool_call", call, run.mw_context("tool_call"))
    ask: GuardrailRecord | None = None
    guards = run.guardrails.for_stage("tool_input")
    if guards:
        decisive: GuardrailRecord | None = None
        remaining = guards
        while remaining:
            records = await evaluate(run, "tool_input", remaining, call, call=call)
            for record in records:
                yield run.emit(decision_event(run, record))
            decisive = strongest(records)
            if decisive is None or decisive.action != "interrupt":
                break
            # An ask never outranks a later deny: keep checking the guards after it.
            ask, decisive = ask or decisive, None
            if run.guardrails.max_concurrency > 1:
                break
            remaining = remaining[len(records) :]
        can_hold = run.durable is not None and (gates is not None or approved)
        if decisive is None and ask is not None and not can_hold:
            # A pack's ask rule blocks where the run cannot suspend; any other interrupt
            # is refused as unavailable here.
            pack_ask = ask.guardrail.startswith("pack:")
            decisive = attrs.evolve(ask, action="block") if pack_ask else ask
            ask = None
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
        tool_names=run.tool_names,
        validate=run.agent.validate,
        trust=run.agent.trust,
        permission=run.agent.permission,
        invalid_arguments=invalid,
    )
    if isinstance(checked, DispatchOutcome):
        assert checked.result.error is not None
        assert checked.blocked_reason is not None
        yield await _block(run, call, checked.blocked_reason, checked.result.error)
        return
    if run.durable is not None and gates is not None and not approved:
        gate = _gate_for(run, call, checked, ask)
        if gate is not None:
            sticky = run.durable.sticky_for(gate.scope)
            if sticky is None:
                gates.append(gate)
                return
            if sticky.outcome == "reject_for_run":
                for event in await reject(run, call, sticky.reason):
                    yield event
                return
    marked = run.durable is not None and run.durable.has_record and checked.needs_dispatch_mark
    if marked:
        assert run.durable is not None
        await run.durable.mark_dispatched(call)
    yield run.emit(
        ToolExecutionStartedEvent(
            session_id=run.session_id,
            run_id=run.run_id,
            tool_call_id=call.id,
            name=call.name,
            arguments=dict(call.arguments),
        )
    )
    outcome = await execute_tool(checked, call, context)
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
    guards = run.guardrails.for_stage("tool_output")
    if guards:
        records = await evaluate(run, "tool_output", guards, result, call=call)
        for record in records:
            yield run.emit(decision_event(run, record))
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


async def resume_pending(run: RunState) -> AsyncGenerator[AgentEvent, None]:
    """Finish the decided work of a resumed run, in the order of the calls: decided and
    resolved calls first, then the calls of a crashed round that never started (checked and
    gated like any call; held ones suspend the run)."""
    assert run.resume is not None
    assert run.durable is not None
    plan = run.resume
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
            tool_events = tool_call(run, call, False, approved=True)
            async with aclosing(tool_events):
                async for event in tool_events:
                    yield event
            # A call blocked on re-check never ran; it is settled all the same.
            run.durable.settle_pending(call.id)
    gates: list[Gate] = []
    for call in plan.fresh:
        tool_events = tool_call(run, call, False, gates)
        async with aclosing(tool_events):
            async for event in tool_events:
                yield event
    if gates:
        raise RunSuspended(await run.durable.suspend(gates))
    for message in plan.pending_input:
        await run.session._append_message(message, run.run_id)


async def deliver(run: RunState, call: ToolCallContent, result: ToolResult) -> AgentEvent:
    """Redact ``result``, store it for the next turn, and emit ``tool_execution_finished``."""
    result = redact_value(result, run.redactor)
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


def _gate_for(
    run: RunState, call: ToolCallContent, tool: ToolDefinition, ask: GuardrailRecord | None
) -> Gate | None:
    """The gate ``call`` must pass in a durable run, or ``None`` when it may run now."""
    assert run.durable is not None
    if ask is not None:
        kind: DecisionKind = "tool_approval"
        reason, guardrail = ask.reason, ask.guardrail
    elif tool.elicitation is not None:
        kind, reason, guardrail = "elicitation", None, None
    elif run.durable.options.interrupt_before_tool:
        kind, reason, guardrail = "tool_approval", None, None
    else:
        return None
    return Gate(
        call=call,
        tool=tool,
        kind=kind,
        reason=reason,
        guardrail=guardrail,
        scope=scope_for(run.durable.agent_id, call, tool),
        approval_id=new_approval_id(),
    )


async def reject(run: RunState, call: ToolCallContent, reason: str | None) -> list[AgentEvent]:
    """Answer ``call`` with an ``approval_rejected`` result (a human said no)."""
    message = "Tool call rejected by the approver" + (f": {reason}" if reason else "")
    return [
        await _block(run, call, "approval_rejected", ErrorInfo(message, code="approval_rejected"))
    ]


async def _block(run: RunState, call: ToolCallContent, reason: str, error: ErrorInfo) -> AgentEvent:
    """Answer ``call`` with an error result that it never ran, and emit
    ``tool_execution_blocked`` with ``reason``."""
    error = redact_value(error, run.redactor)
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
    message = Message("tool", (redact_value(result, run.redactor).to_content(),))
    await run.session._append_message(message, run.run_id)
