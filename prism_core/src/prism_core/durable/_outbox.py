"""The outbox: notification records written with the state change they report.

A run that notifies (its state's ``notify`` flag, set by ``RunStateOptions(notify=True)`` or a
host that has notifiers) gets, for each write that changes what people wait on, one record per
event in the unowned namespace ``prism.outbox``, keyed by the notification's id
(:func:`~prism_core._notification.notification_id`). The writer queues the records in the
same commit as the checkpoint (:mod:`._writer`), so a crash after the commit delays a
notification and never loses it. What a write reports is worked out from the state before and
after it (:func:`state_events`):

- ``decided``: decision records it adds (``allow_*``, ``reject_*``, ``deny``, answers);
- ``expired``: ``expired`` records it adds;
- ``in_doubt``: ``in_doubt`` receipts and in-doubt resolutions it adds;
- ``suspended``: the run waits on a decision it did not wait on before;
- ``finished``: the run ends (``succeeded``, ``failed``, ``aborted``, ``denied``).

A turn checkpoint of a running run reports nothing and writes no record. A record is
``pending`` (due at ``due_at``), ``delivering`` (claimed until ``claimed_until``) or ``dead``
(kept after its last attempt failed); a delivered one is deleted. The status is the value's
top-level ``status``, so a store's status index lists the records due without the dead ones.

It builds and reads records only; it must not decide when to write (the writer does) or
deliver (``workers/_delivery.py`` does).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import attrs

from .._notification import Notification, notification_id
from ..codec import dumps
from ..errors import CheckpointConflictError
from ..redaction import Redactor, redact_value
from ._checkpoints import CheckpointRecord, CheckpointStore, SaveRequest, validate_save
from ._faults import retry_transient
from ._receipts import EXECUTED, EXECUTION_FAILED, IN_DOUBT
from ._state import AgentRunState, DecisionRecord
from ._store_base import save_checkpoint

__all__ = (
    "DEAD",
    "DELIVERING",
    "MAX_ARGUMENTS_BYTES",
    "OUTBOX_NAMESPACE",
    "PENDING",
    "Note",
    "OutboxEntry",
    "note_request",
    "outbox_notes",
    "read_entry",
    "state_events",
    "write_notes",
)

logger = logging.getLogger("prism_core.durable")

#: The namespace of the outbox records (unowned: any deliverer on the stores lists them).
OUTBOX_NAMESPACE = "prism.outbox"
PENDING = "pending"
DELIVERING = "delivering"
DEAD = "dead"
#: Largest canonical JSON of one call's arguments a notification carries; a larger one is
#: left out and the notification says so (``arguments_omitted``).
MAX_ARGUMENTS_BYTES = 16384
#: Largest canonical JSON of all the arguments one notification carries.
MAX_NOTIFICATION_ARGUMENTS_BYTES = 65536

#: ``_expiry.EXPIRED`` (that module writes through the writer, which reads this one).
EXPIRED = "expired"
_RESOLUTIONS = frozenset({"completed", "not_started", "failed"})
_NOT_DECISIONS = frozenset({EXPIRED, EXECUTED, EXECUTION_FAILED, IN_DOUBT, *_RESOLUTIONS})


def _quiet(before: AgentRunState, after: AgentRunState) -> bool:
    """Whether ``after`` reports nothing ``before`` did not (cheap checks, for every turn)."""
    return (
        before.status == after.status
        and before.audit_omitted == after.audit_omitted
        and len(before.audit) == len(after.audit)
        and (not after.audit or before.audit[-1] == after.audit[-1])
        and before.interruption == after.interruption
    )


def state_events(
    before: AgentRunState | None, after: AgentRunState
) -> list[tuple[str, tuple[DecisionRecord, ...]]]:
    """The events a write of ``after`` over ``before`` (``None``: a new record) reports, in
    :data:`~prism_core._notification.NOTIFICATION_EVENTS` order, each with the decision
    records it carries (see the module)."""
    if before is not None and _quiet(before, after):
        return []
    seen = set(before.audit) if before is not None else set()
    added = [record for record in after.audit if record not in seen]
    events: list[tuple[str, tuple[DecisionRecord, ...]]] = []
    decided = tuple(r for r in added if r.outcome not in _NOT_DECISIONS)
    expired = tuple(r for r in added if r.outcome == EXPIRED)
    doubt = tuple(r for r in added if r.outcome == IN_DOUBT or r.outcome in _RESOLUTIONS)
    for event, records in (("decided", decided), ("expired", expired), ("in_doubt", doubt)):
        if records:
            events.append((event, records))
    if after.status == "suspended" and after.interruption is not None:
        waited = (
            {d.approval_id for d in before.interruption.pending_decisions}
            if before is not None and before.status == "suspended" and before.interruption
            else set()
        )
        if any(d.approval_id not in waited for d in after.interruption.pending_decisions):
            events.append(("suspended", ()))
    if after.terminal and (before is None or not before.terminal):
        events.append(("finished", ()))
    return events


def _arguments_json(
    arguments: Mapping[str, Any] | None, redactor: Redactor | None, budget: list[int]
) -> dict[str, Any]:
    """``{"arguments": …}`` redacted, or ``{"arguments_omitted": why}`` when over a bound."""
    if arguments is None:
        return {}
    redacted = redact_value(dict(arguments), redactor)
    size = len(dumps(redacted))
    if size > MAX_ARGUMENTS_BYTES:
        return {"arguments_omitted": f"{size} bytes; the limit is {MAX_ARGUMENTS_BYTES}"}
    if size > budget[0]:
        return {
            "arguments_omitted": f"{size} bytes; the notification's arguments are limited to "
            f"{MAX_NOTIFICATION_ARGUMENTS_BYTES} in all"
        }
    budget[0] -= size
    return {"arguments": redacted}


def pending_json(
    state: AgentRunState,
    arguments: Mapping[str, Mapping[str, Any]] | None,
    redactor: Redactor | None,
) -> list[dict[str, Any]]:
    """The pending decisions of a suspended ``state`` as a notification lists them, each
    with its call's arguments (``arguments``: by tool call id) where known."""
    assert state.interruption is not None
    calls = {call.tool_call_id: call for call in state.pending_calls}
    budget = [MAX_NOTIFICATION_ARGUMENTS_BYTES]
    rows: list[dict[str, Any]] = []
    for decision in state.interruption.pending_decisions:
        call = calls.get(decision.tool_call_id or "")
        tool = call.name if call is not None else None
        if tool is None and decision.scope is not None:
            tool = decision.scope.tool_name
        row: dict[str, Any] = {
            "approval_id": decision.approval_id,
            "kind": decision.kind,
            "tool_call_id": decision.tool_call_id,
            "tool_name": tool,
            "reason": decision.reason,
        }
        optional = {
            "guardrail": decision.guardrail,
            "approvers": decision.approvers,
            "approved_by": list(decision.approved_by) if decision.approved_by else None,
            "expires_at": decision.expires_at,
            "arguments_hash": call.arguments_hash if call is not None else None,
        }
        row.update((key, value) for key, value in optional.items() if value is not None)
        if arguments is not None and decision.tool_call_id is not None:
            row.update(_arguments_json(arguments.get(decision.tool_call_id), redactor, budget))
        rows.append(row)
    return rows


class Note(NamedTuple):
    """The save that creates one outbox record."""

    request: SaveRequest


def note_request(notification: Notification) -> Note:
    """The save that creates ``notification``'s outbox record (``pending``, due now)."""
    value = {
        "status": PENDING,
        "attempts": 0,
        "due_at": notification.occurred_at,
        "notification": notification.to_json(),
    }
    request = validate_save(OUTBOX_NAMESPACE, notification.id, value, version=1, expected_version=0)
    return Note(request)


def outbox_notes(
    before: AgentRunState | None,
    after: AgentRunState,
    version: int,
    *,
    arguments: Mapping[str, Mapping[str, Any]] | None = None,
    redactor: Redactor | None = None,
) -> tuple[Note, ...]:
    """The outbox records a write of ``after`` as checkpoint ``version`` creates: one per
    event it reports (``()`` for a run that does not notify, or a write that reports
    nothing). ``after`` is the state as written (redacted); ``arguments`` by tool call id."""
    if not after.notify:
        return ()
    events = state_events(before, after)
    if not events:
        return ()
    now = time.time()
    pending = (
        tuple(redact_value(pending_json(after, arguments, redactor), redactor))
        if after.status == "suspended" and after.interruption is not None
        else None
    )
    notes: list[Note] = []
    for event, records in events:
        notification = Notification(
            id=notification_id(after.run_id, version, event),
            event=event,
            run_id=after.run_id,
            session_id=after.session_id,
            agent_id=after.agent_id,
            status=after.status,
            version=version,
            occurred_at=now,
            pending_decisions=pending,
            audit=tuple(redact_value(r.to_json(), redactor) for r in records) if records else None,
        )
        notes.append(note_request(notification))
    return tuple(notes)


async def write_notes(store: CheckpointStore, notes: Sequence[Note]) -> None:
    """Write ``notes`` one by one, after the state change they report (a store that cannot
    commit them with it); a record written already is left as it is."""
    for note in notes:

        async def attempt(note: Note = note) -> None:
            try:
                await save_checkpoint(store, note.request)
            except CheckpointConflictError:
                return  # written before (an earlier attempt whose answer was lost)

        await retry_transient(attempt)


@attrs.frozen(kw_only=True)
class OutboxEntry:
    """One outbox record as a deliverer reads it."""

    key: str
    version: int
    status: str
    attempts: int
    due_at: float
    claimed_until: float | None
    delivered_to: tuple[str, ...]
    last_error: str | None
    notification: Notification
    value: Mapping[str, Any]

    def evolved(self, **changes: Any) -> dict[str, Any]:
        """The record's value with ``changes`` (``None`` drops a key)."""
        value = {**self.value, **changes}
        return {key: item for key, item in value.items() if item is not None}


def read_entry(record: CheckpointRecord) -> OutboxEntry | None:
    """The entry ``record`` holds, or ``None`` (logged) when it is not one."""
    value = record.value
    try:
        if not isinstance(value, dict):
            raise ValueError("not an object")
        status, attempts, due = value.get("status"), value.get("attempts"), value.get("due_at")
        if status not in (PENDING, DELIVERING, DEAD):
            raise ValueError(f"unknown status {status!r}")
        if type(attempts) is not int or attempts < 0:
            raise ValueError("attempts is not a count")
        if not isinstance(due, int | float) or isinstance(due, bool):
            raise ValueError("due_at is not a time")
        claimed = value.get("claimed_until")
        if claimed is not None and (
            not isinstance(claimed, int | float) or isinstance(claimed, bool)
        ):
            raise ValueError("claimed_until is not a time")
        delivered = value.get("delivered_to", [])
        if not isinstance(delivered, list) or not all(isinstance(k, str) for k in delivered):
            raise ValueError("delivered_to is not a list of names")
        error = value.get("last_error")
        # A claimed record's attempt is the one its claim counted; a pending one's is next.
        attempt = attempts if status == DELIVERING else attempts + 1
        notification = Notification.from_json(value.get("notification"), attempt=max(attempt, 1))
    except ValueError as exc:
        logger.warning(
            "outbox record %r is not a notification (%s); left as it is", record.key, exc
        )
        return None
    return OutboxEntry(
        key=record.key,
        version=record.version,
        status=status,
        attempts=attempts,
        due_at=float(due),
        claimed_until=None if claimed is None else float(claimed),
        delivered_to=tuple(delivered),
        last_error=error if isinstance(error, str) else None,
        notification=notification,
        value=value,
    )
