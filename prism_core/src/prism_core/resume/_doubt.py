"""Resume, in-doubt calls: settling the calls a crash left between their dispatched mark and
their stored result, for ``continue``.

Before the claim (reads only): each in-doubt call takes the operator's resolution if the
resume carries one, else is cleared to run again when its tool is idempotent, else waits for
its tool's ``reconcile`` after the claim (a sub-agent call runs again: it continues its child
run); a call with none of these refuses the continue with
``ERR_PRISM_TOOL_IN_DOUBT`` and nothing is written. After the claim (so two racing continues
cannot both act on one call): ``reconcile(call, context)`` is asked for the rest. Every
settlement is audited in the state (:class:`ResolutionRecord`).

It must not run the resumed turn: that is the run loop's, after the claim.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .._threads import call_host
from ..codec import dumps
from ..content import ToolCallContent, ToolResult
from ..durable._in_doubt import in_doubt_calls, in_doubt_error
from ..durable._state import (
    AgentRunState,
    PendingCall,
    ResolutionRecord,
    check_state_bounds,
    state_to_json,
)
from ..errors import AgentDecisionError, AgentRunStateError
from ..runs._delegation import delegate_of
from ..tools import RECONCILE_NOT_STARTED, ToolExecutionContext
from ._input import ResumeInput
from ._ports import ResumableAgent

__all__ = ("Settlement", "check_claim_size", "reconcile_in_doubt", "settle_in_doubt")


@attrs.frozen(kw_only=True)
class Settlement:
    """The claim's pending calls after resolutions, their audits, and the in-doubt calls left
    for ``reconcile`` after the claim."""

    pending_calls: tuple[PendingCall, ...]
    resolutions: tuple[ResolutionRecord, ...]
    to_reconcile: tuple[str, ...]


def settle_in_doubt(
    agent: ResumableAgent,
    state: AgentRunState,
    plan: ResumeInput,
    calls: Mapping[str, ToolCallContent],
    *,
    version: int,
) -> Settlement:
    """Apply resolutions and idempotency to ``state``'s in-doubt calls; refuse what nothing
    can settle. Raises :class:`AgentDecisionError` for a resolution that names no call of the
    run (``ERR_PRISM_DECISION_UNKNOWN``) or a call that is not in doubt
    (``ERR_PRISM_DECISION_SCOPE``)."""
    in_doubt = set(in_doubt_calls(state))
    by_id = {r.tool_call_id: r for r in plan.resolutions or ()}
    for index, given in enumerate(plan.resolutions or ()):
        if given.tool_call_id not in calls:
            raise AgentDecisionError(
                f"resolutions[{index}].tool_call_id names no tool call this run owes a result",
                code="ERR_PRISM_DECISION_UNKNOWN",
            )
        if given.tool_call_id not in in_doubt:
            raise AgentDecisionError(
                f"resolutions[{index}].tool_call_id names a call that is not in doubt",
                code="ERR_PRISM_DECISION_SCOPE",
            )
    now = time.time()
    pending: list[PendingCall] = []
    audits: list[ResolutionRecord] = []
    to_reconcile: list[str] = []
    unresolved: list[str] = []
    for call in state.pending_calls:
        if call.tool_call_id not in in_doubt:
            pending.append(call)
            continue
        resolution = by_id.get(call.tool_call_id)
        tool = agent.config.registry.get(call.name)
        if resolution is not None:
            if resolution.outcome == "completed":
                settled = attrs.evolve(
                    call, status="resolved", resolution="completed", result=resolution.result
                )
            elif resolution.outcome == "failed":
                settled = attrs.evolve(
                    call, status="resolved", resolution="failed", reason=resolution.reason
                )
            else:
                settled = attrs.evolve(call, status="approved", resolution="not_started")
            pending.append(settled)
            audits.append(_audit(call, resolution.outcome, "operator", now))
        elif tool is not None and tool.idempotent:
            pending.append(attrs.evolve(call, status="approved", resolution="not_started"))
            # A sub-agent call runs again by continuing its child run.
            source = "sub_agent" if delegate_of(tool) is not None else "idempotent"
            audits.append(_audit(call, "not_started", source, now))
        elif tool is not None and tool.reconcile is not None:
            pending.append(call)
            to_reconcile.append(call.tool_call_id)
        else:
            unresolved.append(call.tool_call_id)
    if unresolved:
        raise in_doubt_error(unresolved, version=version)
    return Settlement(
        pending_calls=tuple(pending), resolutions=tuple(audits), to_reconcile=tuple(to_reconcile)
    )


def check_claim_size(claimed: AgentRunState, max_bytes: int) -> None:
    """Refuse, before anything is written, resolutions whose results overflow the state."""
    if not any(c.status == "resolved" for c in claimed.pending_calls):
        return
    try:
        check_state_bounds(state_to_json(claimed), max_bytes)
    except AgentRunStateError as exc:
        raise AgentDecisionError(
            f"the resolutions do not fit the run's state: {exc}", code="ERR_PRISM_DECISION_LIMIT"
        ) from None


async def reconcile_in_doubt(
    agent: ResumableAgent,
    state: AgentRunState,
    pending_calls: Sequence[PendingCall],
    calls: Mapping[str, ToolCallContent],
    ids: Sequence[str],
    *,
    version: int,
    fencing_token: int,
) -> tuple[list[PendingCall], list[ResolutionRecord]]:
    """Ask each tool's ``reconcile`` about its in-doubt call (after the claim, so its context
    carries the claim's ``fencing_token``). Returns the
    pending calls with the answers applied and their audits; raises the in-doubt refusal
    when any answer is ``None`` (unknown) or ``reconcile`` fails."""
    wanted = set(ids)
    now = time.time()
    settled: list[PendingCall] = []
    audits: list[ResolutionRecord] = []
    unknown: list[str] = []
    causes: list[BaseException] = []
    for pending in pending_calls:
        if pending.tool_call_id not in wanted:
            settled.append(pending)
            continue
        call = calls[pending.tool_call_id]
        tool = agent.config.registry.get(pending.name)
        assert tool is not None
        assert tool.reconcile is not None
        context = ToolExecutionContext(
            session_id=state.session_id,
            run_id=state.run_id,
            tool_call_id=call.id,
            tool_name=call.name,
            fencing_token=fencing_token,
            started_by=state.started_by,
            approvals=tuple(
                record
                for record in state.audit
                if record.tool_call_id == call.id and record.outcome.startswith("allow_")
            ),
        )
        try:
            answer = await call_host(
                tool.reconcile, call, context, limiter=agent.config.thread_limiter
            )
            outcome = _apply(pending, answer)
        except Exception as exc:
            causes.append(exc)
            outcome = None
        if outcome is None:
            unknown.append(pending.tool_call_id)
            settled.append(pending)
            continue
        settled.append(outcome)
        audits.append(_audit(pending, outcome.resolution or "completed", "reconcile", now))
    if unknown:
        error = in_doubt_error(unknown, version=version)
        if causes:
            raise error from causes[0]
        raise error
    return settled, audits


def _apply(pending: PendingCall, answer: Any) -> PendingCall | None:
    if answer is None:
        return None
    if answer is RECONCILE_NOT_STARTED:
        return attrs.evolve(pending, status="approved", resolution="not_started")
    if isinstance(answer, ToolResult):
        if answer.error is not None:
            return attrs.evolve(
                pending, status="resolved", resolution="failed", reason=answer.error.message
            )
        answer = answer.value
    dumps(answer)
    return attrs.evolve(pending, status="resolved", resolution="completed", result=answer)


def _audit(call: PendingCall, outcome: Any, source: Any, at: float) -> ResolutionRecord:
    return ResolutionRecord(tool_call_id=call.tool_call_id, outcome=outcome, source=source, at=at)
