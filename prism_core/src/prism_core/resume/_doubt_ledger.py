"""Resume, in-doubt calls in the effect ledger: what a ``continue`` records of them.

A ``continue`` that finds calls in doubt and cannot settle them is refused; before the refusal
is raised, their effect records move from ``dispatched`` to ``in_doubt`` (the store's ledger
only: the checkpoint is left byte for byte as it was). A ``continue`` that settles them (an
operator's resolution, an idempotent tool, a tool's ``reconcile``) writes each one's new
status (``resolved_completed``, ``resolved_not_started``, ``resolved_failed``) with the claim,
or, for ``reconcile``'s answers, with the resumed run's next write.

It reads the ledger and marks in-doubt rows; it must not write a checkpoint.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from .._capability import capability
from .._effect_record import EffectRecord, EffectStatus
from ..content import ToolCallContent, ToolResult
from ..durable._children import child_run_id
from ..durable._effects import EffectLedger, EffectQuery
from ..durable._ledger import approvers, result_hash
from ..durable._state import AgentRunState, PendingCall
from ..tools import idempotency_key

__all__ = ("known_effects", "record_in_doubt", "settled_effects")

logger = logging.getLogger(__package__ or __name__)

_RESOLVED: dict[str, EffectStatus] = {
    "completed": "resolved_completed",
    "not_started": "resolved_not_started",
    "failed": "resolved_failed",
}


async def record_in_doubt(
    checkpoints: object,
    state: AgentRunState,
    ids: Iterable[str],
    ownership: Mapping[str, str] | None,
) -> None:
    """Move the effect records of ``ids`` (calls of the run ``state``, or of the sub-agent
    runs its dispatched calls started) from ``dispatched`` to ``in_doubt``. A store without a
    ledger records nothing; a failure to record is logged, never raised over the refusal."""
    ledger = capability(checkpoints, EffectLedger)
    wanted = tuple(dict.fromkeys(ids))
    if ledger is None or not wanted:
        return
    runs = [state.run_id]
    runs.extend(
        child_run_id(state.run_id, call.tool_call_id)
        for call in state.pending_calls
        if call.status == "dispatched"
    )
    for run_id in runs:
        try:
            await ledger.mark_in_doubt(run_id, wanted, ownership=ownership)
        except Exception:
            logger.warning(
                "run %s: could not record calls %s as in doubt in the effect ledger",
                run_id,
                ", ".join(wanted),
                exc_info=True,
            )


async def known_effects(
    checkpoints: object, run_id: str, ids: Iterable[str], ownership: Mapping[str, str] | None
) -> dict[str, EffectRecord]:
    """The ledger's records of the calls ``ids`` of ``run_id`` (none without a ledger)."""
    ledger = capability(checkpoints, EffectLedger)
    wanted = set(ids)
    if ledger is None or not wanted:
        return {}
    query = EffectQuery.of(run_id=run_id, ownership=ownership, limit=1000)
    found: dict[str, EffectRecord] = {}
    while True:
        page = await ledger.query_effects(query)
        for record in page.effects:
            if record.tool_call_id in wanted:
                found[record.tool_call_id] = record
        if page.cursor is None or len(found) == len(wanted):
            return found
        query = EffectQuery.of(run_id=run_id, ownership=ownership, limit=1000, cursor=page.cursor)


def settled_effects(
    state: AgentRunState,
    settled: Sequence[PendingCall],
    calls: Mapping[str, ToolCallContent],
    known: Mapping[str, EffectRecord],
    *,
    ids: Iterable[str],
    ownership: Mapping[str, str] | None,
) -> list[EffectRecord]:
    """The effect records of the in-doubt calls ``ids`` as ``settled`` (the pending calls
    after their resolutions) leaves them: ``known`` records with the new status, or records
    made from the stored call when the ledger holds none."""
    wanted = set(ids)
    now = time.time()
    records: list[EffectRecord] = []
    for pending in settled:
        status = _RESOLVED.get(pending.resolution or "")
        if pending.tool_call_id not in wanted or status is None:
            continue
        base = known.get(pending.tool_call_id) or _from_call(state, pending, calls, ownership)
        digest = None
        if pending.resolution == "completed":
            digest = result_hash(ToolResult(pending.tool_call_id, pending.name, pending.result))
        records.append(attrs.evolve(base, status=status, result_hash=digest, finished_at=now))
    return records


def _from_call(
    state: AgentRunState,
    pending: PendingCall,
    calls: Mapping[str, ToolCallContent],
    ownership: Mapping[str, str] | None,
) -> EffectRecord:
    """An effect record made from the stored call (its dispatch was never recorded)."""
    call = calls.get(pending.tool_call_id)
    arguments: Any = dict(call.arguments) if call is not None else None
    return EffectRecord(
        run_id=state.run_id,
        session_id=state.session_id,
        parent_run_id=state.parent_run_id,
        agent_id=state.agent_id,
        tool_name=pending.name,
        tool_call_id=pending.tool_call_id,
        idempotency_key=idempotency_key(state.run_id, pending.tool_call_id),
        arguments=arguments,
        arguments_hash=pending.arguments_hash,
        status="in_doubt",
        started_at=time.time(),
        approved_by=approvers(
            r
            for r in state.audit
            if r.tool_call_id == pending.tool_call_id and r.outcome.startswith("allow_")
        ),
        ownership=dict(ownership) if ownership else None,
    )
