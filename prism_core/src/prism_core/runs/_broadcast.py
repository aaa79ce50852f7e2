"""The session-scoped, in-memory event broadcaster and its bounded subscriptions.

It must not know runs or sessions: it moves events to subscribers.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Literal, TypeAlias

import anyio

from ..events import AgentEvent, EventSubscriberOverflowEvent

__all__ = ("EventBroadcaster", "EventSubscription", "OverflowPolicy", "validate_subscribe_options")

OverflowPolicy: TypeAlias = Literal["close", "drop_oldest", "drop_newest"]
_POLICIES = ("close", "drop_oldest", "drop_newest")


def validate_subscribe_options(max_queued_events: Any, overflow: Any) -> None:
    """Fail with ``ValueError`` for a queue bound below 1 or an unknown overflow policy."""
    if isinstance(max_queued_events, bool) or not isinstance(max_queued_events, int):
        raise ValueError(f"max_queued_events must be an integer >= 1, got {max_queued_events!r}")
    if max_queued_events < 1:
        raise ValueError(f"max_queued_events must be >= 1, got {max_queued_events}")
    if overflow not in _POLICIES:
        raise ValueError(f"overflow must be one of {list(_POLICIES)}, got {overflow!r}")


class EventSubscription:
    """A live, bounded queue of one session's events; iterate it with ``async for``.

    It ends when closed (by the host, by the run's end unless ``across_runs``, by session
    teardown, or by an overflow under the ``close`` policy).
    """

    def __init__(
        self,
        broadcaster: EventBroadcaster,
        *,
        across_runs: bool,
        max_queued_events: int,
        overflow: OverflowPolicy,
    ) -> None:
        self._broadcaster = broadcaster
        self.across_runs = across_runs
        self.max_queued_events = max_queued_events
        self.overflow: OverflowPolicy = overflow
        self._queue: deque[AgentEvent] = deque()
        self._closed = False
        self._overflowed = False
        self._dropped = 0
        self._wakeup: anyio.Event | None = None
        self._front_notice: EventSubscriberOverflowEvent | None = None

    @property
    def closed(self) -> bool:
        """Whether the subscription accepts no more events."""
        return self._closed

    @property
    def ready(self) -> bool:
        """Whether an event (or an overflow notice) is queued, so reading will not wait."""
        return bool(self._queue) or self._front_notice is not None

    def _wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    def _deliver(self, event: AgentEvent) -> None:
        if self._closed:
            return
        if len(self._queue) < self.max_queued_events:
            self._queue.append(event)
            self._wake()
            return
        self._dropped += 1
        if self.overflow == "close":
            self._queue.clear()
            self._queue.append(self._notice(event))
            self._overflowed = True
            self._close_quietly()
            return
        first_loss = not self._overflowed
        self._overflowed = True
        if self.overflow == "drop_oldest":
            self._queue.popleft()
            self._queue.append(event)
            if first_loss:
                # The oldest events were lost, so the notice comes before what was kept.
                self._front_notice = self._notice(event)
        elif first_loss:
            # The newest events are lost from here on, so the notice follows what was kept.
            self._queue.append(self._notice(event))
        self._wake()

    def _notice(self, event: AgentEvent) -> EventSubscriberOverflowEvent:
        return EventSubscriberOverflowEvent(
            session_id=event.session_id,
            run_id=getattr(event, "run_id", None),
            max_queued_events=self.max_queued_events,
            overflow=self.overflow,
            dropped=self._dropped,
        )

    def _close_quietly(self) -> None:
        self._closed = True
        self._broadcaster._forget(self)
        self._wake()

    def close(self) -> None:
        """Stop the subscription; events already queued are still delivered."""
        if not self._closed:
            self._close_quietly()

    async def aclose(self) -> None:
        """Close the subscription and drop anything still queued."""
        self.close()
        self._queue.clear()
        self._front_notice = None

    def __aiter__(self) -> EventSubscription:
        return self

    async def __anext__(self) -> AgentEvent:
        while True:
            if self._front_notice is not None:
                notice, self._front_notice = self._front_notice, None
                return notice
            if self._queue:
                return self._queue.popleft()
            if self._closed:
                raise StopAsyncIteration
            self._wakeup = anyio.Event()
            await self._wakeup.wait()
            self._wakeup = None


class EventBroadcaster:
    """Fans each event out to the session's subscriptions, synchronously and without blocking."""

    def __init__(self) -> None:
        self._subscriptions: list[EventSubscription] = []

    def subscribe(
        self,
        *,
        across_runs: bool = False,
        max_queued_events: int = 1024,
        overflow: OverflowPolicy = "close",
    ) -> EventSubscription:
        """A new subscription (see :class:`EventSubscription`)."""
        validate_subscribe_options(max_queued_events, overflow)
        subscription = EventSubscription(
            self,
            across_runs=bool(across_runs),
            max_queued_events=max_queued_events,
            overflow=overflow,
        )
        self._subscriptions.append(subscription)
        return subscription

    def publish(self, event: AgentEvent) -> None:
        """Deliver ``event`` to every open subscription."""
        for subscription in tuple(self._subscriptions):
            subscription._deliver(event)

    def close_run_subscribers(self) -> None:
        """Close run-scoped subscriptions (``across_runs=False``)."""
        for subscription in tuple(self._subscriptions):
            if not subscription.across_runs:
                subscription.close()

    def close_all(self) -> None:
        """Close every subscription."""
        for subscription in tuple(self._subscriptions):
            subscription.close()

    def _forget(self, subscription: EventSubscription) -> None:
        if subscription in self._subscriptions:
            self._subscriptions.remove(subscription)
