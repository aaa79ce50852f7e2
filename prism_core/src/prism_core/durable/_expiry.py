"""Expiring decisions that waited too long: :func:`expire_agent_runs`.

A run or a tool with ``approval_timeout_ms`` records, on each pending decision, when it
started pending and when it expires. An expired decision is settled as a ``reject_once`` with
the reason ``"approval expired after N s"`` and audited as outcome ``"expired"`` (actor
``"prism"``, channel ``"kernel"``), in one compare-and-swap write on the run's checkpoint that
runs no tool and no model turn, so a decision landing at the same moment wins or loses by
version, never both.

The run is left as a recorded decision (``decide_agent_run``) leaves it: still
``suspended`` on the decisions that did not expire, else ``running`` with no lease, its
expired calls ``rejected`` (and calls approved earlier in a partial batch ``approved``), with a
work mark for the workers (``_work``) and a wake-up where the store can, so the next
``continue`` (a worker's, a sweep's, an operator's) takes the rejections to the model. An
expired decision of an input guardrail ends the run ``denied``, as rejecting it does. A
decision a sub-agent run owes is expired in the child first (its own checkpoint), then
mirrored in the parent: the parent waits on what the child still waits for, or, when the
child no longer waits, its call is cleared to run (the parent's continue continues the child
or reads its result). Children are reached through their parents, never on their own.

It must not resolve an agent, read a session or run anything; it reads and writes only
checkpoints (and work marks).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .._capability import capability
from .._decision_record import DecisionRecord
from .._principal import KERNEL_ACTOR, KERNEL_CHANNEL
from ..errors import AgentRunStateError, CheckpointConflictError
from ._capabilities import CheckpointStatusIndex
from ._checkpoints import CheckpointRecord, CheckpointStore, normalise_ownership
from ._children import NESTED_APPROVAL_PREFIX, nested_approval_id
from ._faults import retry_transient
from ._gates import interruption_for
from ._options import AGENT_RUN_NAMESPACE, HARD_MAX_AGENT_RUN_STATE_BYTES, check_store
from ._sidecar import read_sidecar
from ._state import AgentRunState, PendingCall, PendingDecision
from ._state_parse import parse_state
from ._wakeups import RunWakeups
from ._work import mark_work
from ._writer import CheckpointWriter

__all__ = ("EXPIRED", "expire_agent_runs", "expired_reason")

logger = logging.getLogger("prism_core.durable")

#: The audit outcome of an expired decision.
EXPIRED = "expired"
_PAGE = 200


def expired_reason(decision: PendingDecision) -> str:
    """``"approval expired after N s"``: N is the whole seconds the decision could wait."""
    assert decision.expires_at is not None
    assert decision.pending_since is not None
    return f"approval expired after {round(decision.expires_at - decision.pending_since)} s"


def _due(state: AgentRunState, now: float) -> list[PendingDecision]:
    if state.status != "suspended" or state.interruption is None:
        return []
    return [
        d
        for d in state.interruption.pending_decisions
        if d.expires_at is not None and d.expires_at <= now
    ]


async def expire_agent_runs(
    checkpoints: CheckpointStore,
    *,
    now: float | None = None,
    ownership: Mapping[str, str] | None = None,
) -> int:
    """Expire every pending decision of the suspended runs visible to ``ownership`` (matched
    exactly, as every store call does) whose deadline is at or before ``now`` (epoch seconds,
    default this machine's clock); return how many runs were written.

    A run decided or changed by someone else between the read and the write is left to
    them (its compare-and-swap lost); a record that is not a run state is skipped and logged.
    Workers and sweeps call it on their own schedule; it is safe to call from many at once.
    """
    check_store(checkpoints)
    owner = normalise_ownership(ownership)
    moment = time.time() if now is None else float(now)
    due, children = await _scan(checkpoints, owner, moment)
    written = 0
    marked = False
    for run_id in due:
        if run_id in children:
            continue
        try:
            settled = await _expire_run(checkpoints, run_id, owner, moment)
        except CheckpointConflictError:
            logger.info("run %s was decided while its decisions expired; left as it is", run_id)
            continue
        except AgentRunStateError as exc:
            logger.warning("run %s: its expired decisions cannot be recorded: %s", run_id, exc)
            continue
        if settled is None:
            continue
        written += 1
        status, version = settled
        if status == "running":
            # As a recorded decision does: the run waits for a worker, whoever owns it.
            await mark_work(checkpoints, run_id, version, owner)
            marked = True
    if marked:
        await _wake(checkpoints)
    return written


async def _wake(checkpoints: CheckpointStore) -> None:
    wakeups = capability(checkpoints, RunWakeups)
    if wakeups is None:
        return
    try:
        await wakeups.notify_runs()
    except Exception as exc:
        # A wake-up is a hint: the mark is written, a worker's poll finds it.
        logger.warning("could not wake the workers: %s", exc)


async def _scan(
    checkpoints: CheckpointStore, owner: Mapping[str, str] | None, now: float
) -> tuple[list[str], set[str]]:
    """The suspended runs with a decision due, and the child runs suspended parents wait on."""
    by_status = capability(checkpoints, CheckpointStatusIndex)
    due: list[str] = []
    children: set[str] = set()
    cursor: str | None = None
    while True:
        # Bound to this loop's variables now: each page is read with the cursor it was given.
        async def page(cursor: str | None = cursor) -> Any:
            if by_status is not None:
                return await by_status.list_by_status(
                    AGENT_RUN_NAMESPACE, "suspended", ownership=owner, limit=_PAGE, cursor=cursor
                )
            return await checkpoints.list(
                AGENT_RUN_NAMESPACE, ownership=owner, limit=_PAGE, cursor=cursor
            )

        listed = await retry_transient(page)
        for record in listed.records:
            state = _parsed(record)
            if state is None or state.status != "suspended":
                continue
            children.update(c.child_run_id for c in state.pending_calls if c.child_run_id)
            if _due(state, now):
                due.append(state.run_id)
        cursor = listed.cursor
        if cursor is None:
            return due, children


def _parsed(record: CheckpointRecord) -> AgentRunState | None:
    try:
        state = parse_state(
            record.value, max_bytes=HARD_MAX_AGENT_RUN_STATE_BYTES, run_id=record.key
        )
    except AgentRunStateError as exc:
        logger.warning(
            "run record %r is not a run state; no decision of it expires: %s", record.key, exc
        )
        return None
    return state if state.run_id == record.key else None


async def _load(
    checkpoints: CheckpointStore, run_id: str, owner: Mapping[str, str] | None
) -> tuple[CheckpointRecord, AgentRunState] | None:
    async def load() -> CheckpointRecord | None:
        return await checkpoints.load(AGENT_RUN_NAMESPACE, run_id, ownership=owner)

    record = await retry_transient(load)
    if record is None:
        return None
    state = _parsed(record)
    return None if state is None else (record, state)


async def _expire_run(
    checkpoints: CheckpointStore,
    run_id: str,
    owner: Mapping[str, str] | None,
    now: float,
) -> tuple[str, int] | None:
    """Expire the due decisions of ``run_id`` (its children's first); the status and version
    it was written at, or ``None`` when nothing was due."""
    loaded = await _load(checkpoints, run_id, owner)
    if loaded is None:
        return None
    record, state = loaded
    due = _due(state, now)
    if not due:
        return None
    assert state.interruption is not None
    calls = {c.tool_call_id: c for c in state.pending_calls}
    left = {d.approval_id: d for d in state.interruption.pending_decisions}
    audit: list[DecisionRecord] = []
    denied = False
    for call_id in sorted({d.tool_call_id for d in due if _nested(d) and d.tool_call_id}):
        await _expire_child(checkpoints, state, calls, left, call_id, owner, now)
    for decision in due:
        call = calls.get(decision.tool_call_id or "")
        if _nested(decision):
            # Audited only when the child no longer waits for it.
            if decision.approval_id not in left:
                audit.append(_record(decision, call, record.version, now))
            continue
        audit.append(_record(decision, call, record.version, now))
        left.pop(decision.approval_id, None)
        if decision.kind == "input_guardrail":
            denied = True
        elif call is not None:
            calls[call.tool_call_id] = attrs.evolve(
                call, status="rejected", reason=expired_reason(decision)
            )
    if not audit:
        return None
    expired = _settled(state, audit, list(left.values()), calls, denied)
    writer = CheckpointWriter(
        store=checkpoints,
        run_id=run_id,
        max_state_bytes=state.max_state_bytes or HARD_MAX_AGENT_RUN_STATE_BYTES,
        ownership=owner,
        fencing_token=record.fencing_token,
        version=record.version,
        metadata=read_sidecar(record),
        base=state,
    )
    await writer.save(expired)
    logger.info(
        "run %s: %d decision(s) expired; the run is %s at version %d",
        run_id,
        len(due),
        expired.status,
        writer.version,
    )
    return expired.status, writer.version


def _nested(decision: PendingDecision) -> bool:
    return decision.approval_id.startswith(NESTED_APPROVAL_PREFIX)


async def _expire_child(
    checkpoints: CheckpointStore,
    state: AgentRunState,
    calls: dict[str, PendingCall],
    left: dict[str, PendingDecision],
    call_id: str,
    owner: Mapping[str, str] | None,
    now: float,
) -> None:
    """Expire the child run that sub-agent call ``call_id`` waits on, then mirror it: the
    parent's nested decisions of that call become what the child still waits for, or the call
    is cleared to run when the child waits for nothing."""
    call = calls.get(call_id)
    if call is None or call.child_run_id is None:
        return
    await _expire_run(checkpoints, call.child_run_id, owner, now)
    loaded = await _load(checkpoints, call.child_run_id, owner)
    if loaded is None:
        # No child to mirror: its decisions stay pending in the parent, as they were.
        return
    for approval_id in [a for a, d in left.items() if d.tool_call_id == call_id and _nested(d)]:
        del left[approval_id]
    child = loaded[1]
    if child.status == "suspended" and child.interruption is not None:
        for decision in child.interruption.pending_decisions:
            nested = nested_approval_id(state.run_id, decision.approval_id)
            left[nested] = attrs.evolve(
                decision,
                approval_id=nested,
                tool_call_id=call_id,
                guardrail_rule=None,
            )
        return
    calls[call_id] = attrs.evolve(call, status="approved", child_resume=None)


def _record(
    decision: PendingDecision, call: PendingCall | None, version: int, now: float
) -> DecisionRecord:
    tool = call.name if call is not None else None
    if tool is None and decision.scope is not None:
        tool = decision.scope.tool_name
    return DecisionRecord(
        approval_id=decision.approval_id,
        tool_call_id=decision.tool_call_id,
        tool_name=tool,
        outcome=EXPIRED,
        actor=KERNEL_ACTOR,
        channel=KERNEL_CHANNEL,
        reason=expired_reason(decision),
        arguments_hash=call.arguments_hash if call is not None else None,
        decided_at=now,
        version=version,
    )


def _settled(
    state: AgentRunState,
    audit: Sequence[DecisionRecord],
    left: Sequence[PendingDecision],
    calls: Mapping[str, PendingCall],
    denied: bool,
) -> AgentRunState:
    """``state`` after its expiries: denied (an input decision expired), still suspended on
    what is left, or running with no lease, its decided calls ready for a continue."""
    assert state.interruption is not None
    recorded = (*state.audit, *audit)
    if denied:
        return attrs.evolve(
            state,
            audit=recorded,
            status="denied",
            interruption=None,
            pending_calls=(),
            pending_input=(),
            sticky_decisions=(),
        )
    pending = tuple(calls[c.tool_call_id] for c in state.pending_calls)
    if left:
        interruption = interruption_for(
            left,
            reason=f"{len(left)} approval request(s) remain",
            kind=state.interruption.kind,
        )
        return attrs.evolve(state, audit=recorded, interruption=interruption, pending_calls=pending)
    return attrs.evolve(
        state,
        audit=recorded,
        status="running",
        interruption=None,
        stop_reason=None,
        stop_detail=None,
        pending_calls=pending,
        lease_expires_at=None,
    )
