"""Notifications: what a durable run's state changes tell the people who wait on them.

A :class:`Notification` is one event of one run (``"suspended"``, ``"decided"``,
``"expired"``, ``"in_doubt"``, ``"finished"``) as a deliverer hands it to each
:class:`Notifier`: its JSON form (:meth:`Notification.to_json`) is the body every notifier
sends, the same on every attempt, under the same ``id``. Where notifications are written
(``durable/_outbox.py``) and who delivers them (``workers/_delivery.py``) live elsewhere.

It is values and a protocol only: it must not read or write a store, and it must not send.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from ._error_base import PrismError

__all__ = (
    "NOTIFICATION_EVENTS",
    "Notification",
    "Notifier",
    "NotifierConfigError",
    "check_notifiers",
    "check_events",
    "notification_id",
    "notifier_keys",
)

#: The events a run notifies, in the order one write reports them.
NOTIFICATION_EVENTS = ("decided", "expired", "in_doubt", "suspended", "finished")


def notification_id(run_id: str, version: int, event: str) -> str:
    """The id of ``event`` of run ``run_id`` at checkpoint ``version``: ``"ntf_"`` and 32 hex
    digits, the same for every writer that reports that change (a retried write, a worker
    that finds the same call in doubt), so the record is written once and a receiver
    deduplicates by it."""
    digest = hashlib.sha256(f"{run_id}\x00{version}\x00{event}".encode()).hexdigest()
    return f"ntf_{digest[:32]}"


def check_events(events: Any) -> frozenset[str] | None:
    """``events`` as a set of known event names (``None``: every event); anything else is a
    ``ValueError`` naming the known ones."""
    if events is None:
        return None
    if isinstance(events, str) or not isinstance(events, Collection):
        raise ValueError("events must be a collection of event names, or None for all")
    chosen = frozenset(events)
    unknown = sorted(str(e) for e in chosen if e not in NOTIFICATION_EVENTS)
    if unknown or not chosen:
        raise ValueError(
            f"events must name some of {', '.join(NOTIFICATION_EVENTS)}"
            + (f"; unknown: {', '.join(unknown)}" if unknown else "")
        )
    return chosen


@attrs.frozen(kw_only=True)
class Notification:
    """One event of one durable run, as every notifier receives it.

    ``id`` is stable (the same on every retry, see :func:`notification_id`); ``status`` and
    ``version`` are the run's after the change; ``occurred_at`` is when it was written (epoch
    seconds). ``pending_decisions`` (a suspended run's decisions, each with the call's
    arguments redacted with the run's redactor where the writer knew them) and ``audit``
    (the decision records the change added) are ``None`` when they do not apply.
    ``attempt`` counts this delivery's attempts (1 for the first); it is not part of the body.
    """

    id: str
    event: str
    run_id: str
    session_id: str
    agent_id: str
    status: str
    version: int
    occurred_at: float
    pending_decisions: tuple[Mapping[str, Any], ...] | None = None
    audit: tuple[Mapping[str, Any], ...] | None = None
    attempt: int = 1

    def to_json(self) -> dict[str, Any]:
        """The body a notifier sends: every field but ``attempt``, the optional two only
        when set."""
        body: dict[str, Any] = {
            "id": self.id,
            "event": self.event,
            "run_id": self.run_id,
            "session_id": self.session_id,
            "agent_id": self.agent_id,
            "status": self.status,
            "version": self.version,
            "occurred_at": self.occurred_at,
        }
        if self.pending_decisions is not None:
            body["pending_decisions"] = [dict(d) for d in self.pending_decisions]
        if self.audit is not None:
            body["audit"] = [dict(r) for r in self.audit]
        return body

    @classmethod
    def from_json(cls, data: Any, *, attempt: int = 1) -> Notification:
        """The notification a body describes (``ValueError`` for anything else)."""
        if not isinstance(data, Mapping):
            raise ValueError("a notification is a JSON object")
        text = ("id", "event", "run_id", "session_id", "agent_id", "status")
        if any(not isinstance(data.get(name), str) for name in text):
            raise ValueError("a notification names its id, event, run, session, agent, status")
        version, at = data.get("version"), data.get("occurred_at")
        if type(version) is not int or not isinstance(at, int | float) or isinstance(at, bool):
            raise ValueError("a notification's version and occurred_at are numbers")
        return cls(
            id=data["id"],
            event=data["event"],
            run_id=data["run_id"],
            session_id=data["session_id"],
            agent_id=data["agent_id"],
            status=data["status"],
            version=version,
            occurred_at=float(at),
            pending_decisions=_rows(data.get("pending_decisions")),
            audit=_rows(data.get("audit")),
            attempt=attempt,
        )


def _rows(value: Any) -> tuple[Mapping[str, Any], ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(row, Mapping) for row in value):
        raise ValueError("a notification's pending_decisions and audit are lists of objects")
    return tuple(value)


@runtime_checkable
class Notifier(Protocol):
    """Delivers notifications somewhere (a webhook, a chat tool, a pager).

    ``deliver`` sends one notification and returns once the receiver has it; raising (any
    exception) means "not delivered, try again later": the deliverer retries with backoff,
    with the same ``id``. It must be safe to call again for a notification it may already
    have sent (delivery is at least once). A notifier may have ``events`` (a collection of
    event names, ``None`` for all): the deliverer hands it only those. It may have ``name``
    (a string that stays the same across restarts): a notification that reached it is not
    sent to it again when another notifier's delivery is retried; without one, its class
    names it.
    """

    async def deliver(self, notification: Notification) -> None:
        """Send ``notification``; raise to have it retried."""
        ...


class NotifierConfigError(PrismError, ValueError):
    """A notifier or a notifier option is malformed (raised before anything is sent)."""

    code = "ERR_PRISM_NOTIFIER_CONFIG"


def check_notifiers(notifiers: Any) -> tuple[Any, ...]:
    """``notifiers`` as a tuple, each with a callable ``deliver``; anything else is a
    :class:`NotifierConfigError`."""
    if notifiers is None:
        return ()
    if isinstance(notifiers, str | bytes) or not isinstance(notifiers, Sequence):
        raise NotifierConfigError("notifiers must be a sequence of notifiers")
    for notifier in notifiers:
        if not callable(getattr(notifier, "deliver", None)):
            kind = type(notifier).__name__
            raise NotifierConfigError(
                f"a notifier must have an async deliver(notification), got {kind}"
            )
        try:
            check_events(getattr(notifier, "events", None))
        except ValueError as exc:
            raise NotifierConfigError(f"{type(notifier).__name__}.events: {exc}") from None
    return tuple(notifiers)


def notifier_keys(notifiers: Sequence[Any]) -> list[str]:
    """A stable key per notifier: its ``name`` (else its class's qualified name), with
    ``#2``, ``#3``… for a key already taken, so a retry knows which ones have it already."""
    keys: list[str] = []
    for notifier in notifiers:
        name = getattr(notifier, "name", None)
        if not isinstance(name, str) or not name:
            kind = type(notifier)
            name = f"{kind.__module__}.{kind.__qualname__}"
        key, n = name, 1
        while key in keys:
            n += 1
            key = f"{name}#{n}"
        keys.append(key)
    return keys
