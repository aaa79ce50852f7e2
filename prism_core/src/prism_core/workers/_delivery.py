"""Delivering the outbox: each notification to every notifier, at least once.

Whoever holds the stores delivers (:func:`run_worker` with ``notifiers=``, the server's and the
faces' workers, a sweep calling :func:`deliver_notifications`): the records live in the
checkpoint store (``durable/_outbox.py``), not in the process that wrote them. One pass lists
the records due (``pending`` past ``due_at``, or ``delivering`` past a claim that was never
finished), claims each by compare-and-swap (``delivering``, one attempt more, until
``claimed_until``), so two deliverers never send one notification at the same time, and
hands it to each notifier that wants its event and does not have it yet:

- every notifier took it: the record is deleted;
- one raised (or took longer than :data:`DELIVER_TIMEOUT_S`): the record goes back to
  ``pending``, due again after ``backoff_ms * 2 ** (attempts - 1)`` (at most
  :data:`MAX_BACKOFF_S`), the notifiers that took it remembered, so they are not sent it
  again; after ``max_attempts`` (8) attempts it is kept as ``dead`` and logged at ``ERROR``.

A process that dies mid-delivery leaves the record claimed; once the claim has passed, the
next pass takes it again (the same ``id``: a receiver deduplicates by it). Every process that
delivers from one store must be given the same notifiers: a record is finished by whichever
one claims it.

It must not write a run's state: it reads and writes outbox records only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import anyio

from .._capability import capability
from .._notification import Notification, check_notifiers, notifier_keys
from ..durable._capabilities import CheckpointStatusIndex
from ..durable._checkpoints import CheckpointRecord, CheckpointStore
from ..durable._outbox import (
    DEAD,
    DELIVERING,
    OUTBOX_NAMESPACE,
    PENDING,
    OutboxEntry,
    read_entry,
)
from ..durable._receipts import process_actor
from ..errors import CheckpointConflictError, PrismError

__all__ = (
    "DEFAULT_BACKOFF_MS",
    "DEFAULT_MAX_ATTEMPTS",
    "DELIVER_TIMEOUT_S",
    "deliver_notifications",
    "run_deliverer",
)

logger = logging.getLogger("prism_core.workers")

DEFAULT_MAX_ATTEMPTS = 8
DEFAULT_BACKOFF_MS = 1000
#: Longest wait between two attempts.
MAX_BACKOFF_S = 3600.0
#: Longest one notifier may take over one notification before it counts as failed (one with
#: a ``timeout_ms`` of its own gets that and 5 s).
DELIVER_TIMEOUT_S = 60.0
#: Most runs whose notifications one pass delivers at once (one run's go in order).
_RUNS_AT_ONCE = 8
#: Most records one pass reads per status.
_PAGE = 100
#: Pages one pass reads from a store without a status index.
_UNINDEXED_PAGES = 10
#: Longest error text a record keeps.
_MAX_ERROR_CHARS = 500


def _bound(notifier: Any) -> float:
    """How long ``notifier`` may take over one notification."""
    own = getattr(notifier, "timeout_ms", None)
    if isinstance(own, int) and not isinstance(own, bool) and own > 0:
        return min(own / 1000 + 5.0, DELIVER_TIMEOUT_S)
    return DELIVER_TIMEOUT_S


def _claim_seconds(notifiers: Sequence[Any]) -> float:
    """How long a claim holds: every notifier's bound, and a margin."""
    return sum(_bound(n) for n in notifiers) + 10.0


async def _due(checkpoints: CheckpointStore, now: float) -> list[OutboxEntry]:
    """The records one pass may claim: pending and due, or claimed and past the claim."""
    index = capability(checkpoints, CheckpointStatusIndex)
    records: list[CheckpointRecord] = []
    if index is not None:
        for status in (PENDING, DELIVERING):
            page = await index.list_by_status(OUTBOX_NAMESPACE, status, limit=_PAGE)
            records.extend(page.records)
    else:
        # Without an index the dead records are listed too: read on past them, a few pages.
        cursor: str | None = None
        for _ in range(_UNINDEXED_PAGES):
            page = await checkpoints.list(OUTBOX_NAMESPACE, limit=_PAGE, cursor=cursor)
            records.extend(page.records)
            cursor = page.cursor
            if cursor is None:
                break
    due: list[OutboxEntry] = []
    for record in records:
        entry = read_entry(record)
        if entry is None or entry.status == DEAD:
            continue
        if entry.status == PENDING and entry.due_at > now:
            continue
        if entry.status == DELIVERING and (entry.claimed_until or 0.0) > now:
            continue
        due.append(entry)
    # Oldest first; one run's events in the order its writes made them.
    due.sort(key=lambda e: (e.notification.occurred_at, e.notification.version))
    return due


async def _claim(
    checkpoints: CheckpointStore, entry: OutboxEntry, until: float
) -> OutboxEntry | None:
    """``entry`` claimed until ``until`` (one attempt more), or ``None`` when another
    deliverer changed it first."""
    value = entry.evolved(
        status=DELIVERING,
        attempts=entry.attempts + 1,
        claimed_until=until,
        claimed_by=process_actor(),
    )
    try:
        record = await checkpoints.save(
            OUTBOX_NAMESPACE,
            entry.key,
            value,
            version=entry.version + 1,
            expected_version=entry.version,
        )
    except CheckpointConflictError:
        return None
    return read_entry(record)


async def _send(
    entry: OutboxEntry, notifiers: Sequence[Any], keys: Sequence[str]
) -> tuple[list[str], list[str]]:
    """Hand the notification to each notifier that wants it and lacks it: the keys of those
    that took it (with those that had it), and the errors of the others."""
    notification: Notification = entry.notification
    done = list(entry.delivered_to)
    errors: list[str] = []
    for notifier, key in zip(notifiers, keys, strict=True):
        if key in done:
            continue
        events = getattr(notifier, "events", None)
        if events is not None and notification.event not in events:
            continue
        try:
            with anyio.fail_after(_bound(notifier)):
                await notifier.deliver(notification)
        except Exception as exc:  # the notifier's failure, whatever it is, is retried
            text = f"{key}: {type(exc).__name__}: {exc}"
            errors.append(text[:_MAX_ERROR_CHARS])
            continue
        done.append(key)
    return done, errors


async def _finish(
    checkpoints: CheckpointStore,
    entry: OutboxEntry,
    done: list[str],
    errors: list[str],
    *,
    now: float,
    max_attempts: int,
    backoff_ms: int,
) -> bool:
    """Settle a claimed record after its attempt: deleted when delivered (``True``), else
    due again later or kept as dead."""
    notification = entry.notification
    if not errors:
        await checkpoints.delete(OUTBOX_NAMESPACE, entry.key)
        logger.debug(
            "notification %s (%s of run %s) delivered",
            notification.id,
            notification.event,
            notification.run_id,
        )
        return True
    error = "; ".join(errors)[:_MAX_ERROR_CHARS]
    dead = entry.attempts >= max_attempts
    wait = min(backoff_ms / 1000 * 2 ** (entry.attempts - 1), MAX_BACKOFF_S)
    value = entry.evolved(
        status=DEAD if dead else PENDING,
        due_at=now + wait,
        claimed_until=None,
        claimed_by=None,
        delivered_to=done,
        last_error=error,
    )
    try:
        await checkpoints.save(
            OUTBOX_NAMESPACE,
            entry.key,
            value,
            version=entry.version + 1,
            expected_version=entry.version,
        )
    except CheckpointConflictError:
        # Its claim ran out and another deliverer took it over: theirs to settle.
        return False
    extra = {"prism_run_id": notification.run_id, "prism_notification_id": notification.id}
    if dead:
        logger.error(
            "notification %s (%s of run %s) is dead after %d attempts: %s",
            notification.id,
            notification.event,
            notification.run_id,
            entry.attempts,
            error,
            extra=extra,
        )
    else:
        logger.warning(
            "notification %s (%s of run %s): attempt %d failed, next in %.0f s: %s",
            notification.id,
            notification.event,
            notification.run_id,
            entry.attempts,
            wait,
            error,
            extra=extra,
        )
    return False


async def deliver_notifications(
    checkpoints: CheckpointStore,
    notifiers: Sequence[Any],
    *,
    now: float | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    backoff_ms: int = DEFAULT_BACKOFF_MS,
) -> int:
    """One pass over the outbox of ``checkpoints`` (see the module): claim each record due,
    hand it to ``notifiers``, settle it; return how many were delivered. ``now`` (epoch
    seconds, default this machine's clock) decides what is due. Safe to run in many
    processes at once. Raises :class:`~prism_core.NotifierConfigError` for a notifier
    without ``deliver`` before it reads anything."""
    chosen = check_notifiers(notifiers)
    for name, value in (("max_attempts", max_attempts), ("backoff_ms", backoff_ms)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if not chosen:
        return 0
    keys = notifier_keys(chosen)
    moment = time.time() if now is None else float(now)
    by_run: dict[str, list[OutboxEntry]] = {}
    for entry in await _due(checkpoints, moment):
        by_run.setdefault(entry.notification.run_id, []).append(entry)
    delivered = [0]
    limiter = anyio.Semaphore(_RUNS_AT_ONCE)

    async def run_of(entries: list[OutboxEntry]) -> None:
        async with limiter:
            for entry in entries:
                if await _deliver_one(
                    checkpoints,
                    entry,
                    chosen,
                    keys,
                    now=now,
                    max_attempts=max_attempts,
                    backoff_ms=backoff_ms,
                ):
                    delivered[0] += 1

    async with anyio.create_task_group() as group:
        for entries in by_run.values():
            group.start_soon(run_of, entries)
    return delivered[0]


async def _deliver_one(
    checkpoints: CheckpointStore,
    entry: OutboxEntry,
    notifiers: Sequence[Any],
    keys: Sequence[str],
    *,
    now: float | None,
    max_attempts: int,
    backoff_ms: int,
) -> bool:
    """Claim, send and settle one record; whether it was delivered."""
    start = time.time() if now is None else float(now)
    claimed = await _claim(checkpoints, entry, start + _claim_seconds(notifiers))
    if claimed is None:
        return False
    done, errors = await _send(claimed, notifiers, keys)
    return await _finish(
        checkpoints,
        claimed,
        done,
        errors,
        now=time.time() if now is None else start,
        max_attempts=max_attempts,
        backoff_ms=backoff_ms,
    )


async def run_deliverer(
    *,
    checkpoints: CheckpointStore,
    notifiers: Sequence[Any],
    poll_ms: int = 500,
    stop: anyio.Event | None = None,
) -> None:
    """Deliver the outbox of ``checkpoints`` to ``notifiers`` every ``poll_ms`` until
    ``stop`` is set (or the task is cancelled): what a process that runs no worker (a face
    with ``workers=0``, say) runs to deliver. A pass that fails (a store down for a moment)
    is logged and tried again at the next. Raises
    :class:`~prism_core.NotifierConfigError` for a malformed notifier before it reads."""
    chosen = check_notifiers(notifiers)
    if isinstance(poll_ms, bool) or not isinstance(poll_ms, int) or poll_ms < 1:
        raise ValueError(f"poll_ms must be a positive integer, got {poll_ms!r}")
    if stop is None:
        await _deliver_forever(checkpoints, chosen, poll_ms / 1000)
        return
    async with anyio.create_task_group() as group:

        async def stopping() -> None:
            await stop.wait()
            group.cancel_scope.cancel()

        group.start_soon(stopping)
        await _deliver_forever(checkpoints, chosen, poll_ms / 1000)


async def _deliver_forever(
    checkpoints: CheckpointStore, notifiers: Sequence[Any], every: float
) -> None:
    while True:
        try:
            await deliver_notifications(checkpoints, notifiers)
        except PrismError as exc:
            logger.warning("notification delivery failed (%s): %s", exc.code, exc.message)
        await anyio.sleep(every)
