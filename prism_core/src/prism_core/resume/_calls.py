"""What a run did, call by call: its tool calls as its branch stores them, with their effect
records, and the sub-agent runs its calls started.

:func:`run_calls` pairs every tool call the run's assistant messages made with its stored
result and, when the store keeps an effect ledger, its effect record (status, key,
approvers); :func:`child_runs` finds the sub-agent runs those calls started (their ids are
derived from the run and the call, so each is one load). ``inspect_agent_run`` serves both
to the operator views. It reads; it must not write.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from .._capability import capability
from .._effect_record import EffectRecord
from ..codec import dumps, loads
from ..durable._checkpoints import CheckpointStore
from ..durable._children import child_run_id
from ..durable._effects import EffectLedger, EffectQuery
from ..durable._options import AGENT_RUN_NAMESPACE
from ..errors import AgentRunStateError
from ..records._entries import SessionEntry
from ..tools import idempotency_key
from ._listing import AgentRunSummary, summarize_run

__all__ = ("CallView", "child_runs", "run_calls", "run_effects")


@attrs.frozen(kw_only=True)
class CallView:
    """One tool call of a run: what it was called with and what came of it.

    ``status`` is the effect record's (``completed``, ``in_doubt``, …) when the ledger keeps
    one, else ``"completed"``/``"failed"`` from the stored result, else ``None`` (no result
    stored: waiting, or in doubt). ``result`` is the stored result's value (as JSON) and
    ``error`` its error message; ``approved_by`` the effect record's approvers.
    """

    tool_call_id: str
    tool_name: str
    arguments: Any
    idempotency_key: str
    status: str | None
    result: Any = None
    error: str | None = None
    approved_by: tuple[str, ...] = ()
    effect: EffectRecord | None = None


def _json(value: Any) -> Any:
    """``value`` as plain JSON (stored values may be frozen containers)."""
    try:
        return loads(dumps(value))
    except (TypeError, ValueError):
        return repr(value)


def run_calls(
    run_id: str, path: Sequence[SessionEntry], effects: Mapping[str, EffectRecord]
) -> tuple[CallView, ...]:
    """Every tool call the run's own assistant messages on ``path`` made, in order, with its
    stored result (any entry of the path) and its effect record from ``effects``."""
    results: dict[str, Any] = {}
    calls: list[Any] = []
    for entry in path:
        message = entry.message
        if message is None:
            continue
        for block in message.content:
            if block.type == "tool_result":
                results[block.tool_call_id] = block
            elif (
                block.type == "tool_call" and message.role == "assistant" and entry.run_id == run_id
            ):
                calls.append(block)
    views = []
    for call in calls:
        stored = results.get(call.id)
        effect = effects.get(call.id)
        status: str | None = effect.status if effect is not None else None
        if status is None and stored is not None:
            status = "failed" if stored.error is not None else "completed"
        views.append(
            CallView(
                tool_call_id=call.id,
                tool_name=call.name,
                arguments=_json(call.arguments),
                idempotency_key=idempotency_key(run_id, call.id),
                status=status,
                result=_json(stored.value) if stored is not None else None,
                error=stored.error.message if stored is not None and stored.error else None,
                approved_by=effect.approved_by if effect is not None else (),
                effect=effect,
            )
        )
    return tuple(views)


async def run_effects(
    checkpoints: object, run_id: str, ownership: Mapping[str, str] | None
) -> dict[str, EffectRecord]:
    """The effect records of run ``run_id`` by call id (none without a ledger)."""
    ledger = capability(checkpoints, EffectLedger)
    if ledger is None:
        return {}
    found: dict[str, EffectRecord] = {}
    query = EffectQuery.of(run_id=run_id, ownership=ownership, limit=1000)
    while True:
        page = await ledger.query_effects(query)
        found.update((record.tool_call_id, record) for record in page.effects)
        if page.cursor is None:
            return found
        query = EffectQuery.of(run_id=run_id, ownership=ownership, limit=1000, cursor=page.cursor)


async def child_runs(
    checkpoints: CheckpointStore,
    run_id: str,
    call_ids: Iterable[str],
    ownership: Mapping[str, str] | None,
) -> tuple[AgentRunSummary, ...]:
    """The sub-agent runs that the calls ``call_ids`` of run ``run_id`` started, in call
    order (a call that started none has none)."""
    found = []
    for call_id in dict.fromkeys(call_ids):
        record = await checkpoints.load(
            AGENT_RUN_NAMESPACE, child_run_id(run_id, call_id), ownership=ownership
        )
        if record is None:
            continue
        try:
            summary = summarize_run(record)
        except AgentRunStateError:
            continue  # not a run state: the run listing names it as unreadable
        # The id is derived from this run and call; records written before runs named their
        # parent have none.
        if summary.parent_run_id in (run_id, None):
            found.append(summary)
    return tuple(found)
