"""Resume, the decision audit: one :class:`~prism_core.DecisionRecord` per decision that
settles a pending call (approve, deny, each batch entry, each in-doubt resolution).

The records ride the state the resume writes next (the claim, the re-suspension or the denied
state) and every later checkpoint of the run; the writer redacts them with the rest of the
state. It builds records only: it must not write.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from .._principal import KERNEL_ACTOR, KERNEL_CHANNEL
from ..durable._state import (
    AgentRunState,
    DecisionRecord,
    PendingCall,
    PendingDecision,
    ResolutionRecord,
)
from ._input import ResumeInput, RunDecision

__all__ = (
    "HOST_CHANNEL",
    "KERNEL_REASONS",
    "decision_records",
    "denial_records",
    "resolution_records",
)

#: The channel a decision records when its resume input names none (a host calling the API).
HOST_CHANNEL = "host"

#: What a kernel settlement's record says happened, by its source.
KERNEL_REASONS = {
    "idempotent": "idempotent",
    "reconcile": "reconcile",
    "sub_agent": "sub-agent call: it runs again, continuing its child run",
}


def _channel(plan: ResumeInput) -> str:
    return plan.channel if plan.channel is not None else HOST_CHANNEL


def _calls(calls: Iterable[PendingCall]) -> dict[str, PendingCall]:
    return {call.tool_call_id: call for call in calls}


def _decision_record(
    target: PendingDecision,
    by_call: dict[str, PendingCall],
    *,
    outcome: str,
    plan: ResumeInput,
    reason: str | None,
    decided_at: float,
    version: int,
) -> DecisionRecord:
    """The record of a decision on ``target`` (its call, when it has one, names the tool and
    the arguments' hash; else the decision's scope names the tool)."""
    call = by_call.get(target.tool_call_id) if target.tool_call_id is not None else None
    tool_name = call.name if call is not None else None
    if tool_name is None and target.scope is not None:
        tool_name = target.scope.tool_name
    return DecisionRecord(
        approval_id=target.approval_id,
        tool_call_id=target.tool_call_id,
        tool_name=tool_name,
        outcome=outcome,
        actor=plan.actor,
        channel=_channel(plan),
        reason=reason,
        arguments_hash=call.arguments_hash if call is not None else None,
        decided_at=decided_at,
        version=version,
    )


def decision_records(
    state: AgentRunState,
    plan: ResumeInput,
    pending_calls: Sequence[PendingCall],
    *,
    version: int,
    remaining: Iterable[str] = (),
) -> list[DecisionRecord]:
    """The records of an approve or a batch applied to ``state``: ``pending_calls`` are the
    calls after the decisions (an edited call's hash is the edited arguments'); approval ids
    in ``remaining`` were not decided and get none."""
    if state.interruption is None:
        return []
    left = set(remaining)
    pending = [d for d in state.interruption.pending_decisions if d.approval_id not in left]
    if plan.decision == "approve":
        chosen = [RunDecision(approval_id=d.approval_id, outcome="allow_once") for d in pending]
    else:
        wanted = {d.approval_id for d in pending}
        chosen = [d for d in plan.decisions or () if d.approval_id in wanted]
    by_approval = {d.approval_id: d for d in pending}
    by_call = _calls(pending_calls)
    now = time.time()
    return [
        _decision_record(
            by_approval[decision.approval_id],
            by_call,
            outcome=decision.outcome,
            plan=plan,
            reason=decision.reason if decision.reason is not None else plan.reason,
            decided_at=now,
            version=version,
        )
        for decision in chosen
    ]


def denial_records(
    state: AgentRunState, plan: ResumeInput, *, version: int, why: str | None = None
) -> list[DecisionRecord]:
    """One ``"deny"`` record per pending decision of a denied run; its reason is the resume's,
    else ``why`` (what made the deny one without the run's definition)."""
    if state.interruption is None:
        return []
    by_call = _calls(state.pending_calls)
    now = time.time()
    return [
        _decision_record(
            target,
            by_call,
            outcome="deny",
            plan=plan,
            reason=plan.reason if plan.reason is not None else why,
            decided_at=now,
            version=version,
        )
        for target in state.interruption.pending_decisions
    ]


def resolution_records(
    resolutions: Iterable[ResolutionRecord],
    pending_calls: Sequence[PendingCall],
    plan: ResumeInput,
    *,
    version: int,
) -> list[DecisionRecord]:
    """The records of in-doubt resolutions: an operator's carries the resume's actor and
    reason (a ``failed`` resolution's own reason first) and channel; one the kernel made (an
    idempotent tool, a tool's ``reconcile``, a sub-agent call) names actor ``"prism"`` on
    channel ``"kernel"`` and says what it did as the reason (:data:`KERNEL_REASONS`)."""
    by_call = _calls(pending_calls)
    given = {r.tool_call_id: r for r in plan.resolutions or ()}
    records = []
    for resolution in resolutions:
        call = by_call.get(resolution.tool_call_id)
        if resolution.source == "operator":
            own = given.get(resolution.tool_call_id)
            own_reason = own.reason if own is not None else None
            actor, reason = plan.actor, own_reason if own_reason is not None else plan.reason
            channel = _channel(plan)
        else:
            actor, channel = KERNEL_ACTOR, KERNEL_CHANNEL
            reason = KERNEL_REASONS.get(resolution.source, resolution.source)
        records.append(
            DecisionRecord(
                approval_id=None,
                tool_call_id=resolution.tool_call_id,
                tool_name=call.name if call is not None else None,
                outcome=resolution.outcome,
                actor=actor,
                channel=channel,
                reason=reason,
                arguments_hash=call.arguments_hash if call is not None else None,
                decided_at=resolution.at,
                version=version,
            )
        )
    return records
