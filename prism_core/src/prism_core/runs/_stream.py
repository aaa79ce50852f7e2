"""The base of the owned-run event streams: start on first use, abort when left early, and
deliver the run's events through a bounded subscription.

A stream subscribes to the session before its run starts and hands the consumer what the
subscription queued, stepping the run only while nothing is queued. A step may publish several
events (a tool's progress reports, a burst of deltas); those queue under ``max_queued_events``
and ``overflow`` exactly as a ``session.subscribe`` subscriber's do: ``close`` clears the queue,
delivers one ``event_subscriber_overflow`` notice and ends the stream, the drop policies keep
the newest or the oldest events. A consumer that falls behind never stops the run: after an
overflow closes the stream, the run is stepped on to its end before the stream finishes. Leaving
early (``break``, ``aclose()``) aborts the run.

It drives a run through the :class:`StepDriver` protocol, so it must not import the driver.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..events import AgentEvent
from ..results import AgentRunResult
from ..signals import AbortSignal

__all__ = ("DrivenRun", "DriverStream", "StepDriver", "SubscribedStream", "Subscription")


class DrivenRun(Protocol):
    """What a stream reads of the run it drives."""

    @property
    def signal(self) -> AbortSignal:
        """The run's abort signal."""
        ...

    @property
    def run_id(self) -> str:
        """The run's id."""
        ...

    @property
    def result(self) -> AgentRunResult | None:
        """The run's result once it has ended."""
        ...


class StepDriver(Protocol):
    """What a stream needs of its driver (``RunDriver`` satisfies it)."""

    @property
    def execution(self) -> DrivenRun:
        """The run being driven."""
        ...

    @property
    def settled(self) -> bool:
        """Whether the run has ended and released its session."""
        ...

    async def next(self) -> AgentEvent | None:
        """The next event, or ``None`` once the run has ended and settled."""
        ...

    def abandon(self, reason: Any) -> None:
        """End the run now without awaiting."""
        ...

    def interrupt(self, reason: Any) -> None:
        """Abort the run as ``session.abort()`` does: the step in flight is cancelled and the
        run ends ``aborted`` (its checkpoint records it) at the consumer's next step."""
        ...

    async def drain(self) -> AgentRunResult:
        """Run to the end and return the result."""
        ...


class Subscription(Protocol):
    """What a stream reads of its bounded subscription (``EventSubscription`` satisfies it)."""

    @property
    def ready(self) -> bool:
        """Whether an event is queued."""
        ...

    @property
    def closed(self) -> bool:
        """Whether it accepts no more events."""
        ...

    async def __anext__(self) -> AgentEvent:
        """The next queued event."""
        ...

    def close(self) -> None:
        """Stop it; what is queued is still delivered."""
        ...


class DriverStream:
    """An async iterator over one driven run: it starts the run on the first ``__anext__``
    (through :meth:`_start`), ends when the run ends, and aborts the run when the consumer
    leaves early (``break``, ``aclose()``, or dropping it)."""

    def __init__(self) -> None:
        self._driver: StepDriver | None = None
        self._done = False

    async def _start(self) -> StepDriver:
        raise NotImplementedError

    def __aiter__(self) -> DriverStream:
        return self

    async def __anext__(self) -> AgentEvent:
        if self._done:
            raise StopAsyncIteration
        if self._driver is None:
            try:
                self._driver = await self._start()
            except BaseException:
                self._done = True
                raise
        try:
            event = await self._driver.next()
        except BaseException:
            self._done = True
            self._driver.abandon("cancelled")
            raise
        if event is None:
            self._done = True
            raise StopAsyncIteration
        return event

    def abort(self, reason: Any = None) -> bool:
        """Abort the run while another task consumes this stream (a client that went away):
        the consumer receives the run's ``aborted`` ending, recorded as for
        ``session.abort()``. Safe from any task of the run's event loop; ``False`` when the
        run is not going (not started, or ended)."""
        driver = self._driver
        if driver is None or driver.settled or self._done:
            return False
        driver.interrupt(reason)
        return True

    async def aclose(self) -> None:
        """Stop consuming: abort the run if it is still going and wait for it to settle."""
        if self._done:
            return
        self._done = True
        driver = self._driver
        if driver is None or driver.settled:
            return
        driver.execution.signal.abort("stream closed")
        await driver.drain()

    async def __aenter__(self) -> DriverStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __del__(self) -> None:
        driver = self._driver
        if driver is not None and not driver.settled:
            driver.abandon("stream closed")


class SubscribedStream(DriverStream):
    """A :class:`DriverStream` that delivers its run's events through a bounded subscription
    (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self._subscription: Subscription | None = None

    async def _next_queued(self) -> AgentEvent:
        """The next event the subscription holds, stepping the run while none is queued."""
        subscription = self._subscription
        assert subscription is not None
        while True:
            if subscription.ready:
                return await subscription.__anext__()
            driver = self._driver
            if subscription.closed or driver is None:
                await self._run_to_end()
                raise StopAsyncIteration
            try:
                stepped = await driver.next()
            except BaseException:
                self._done = True
                driver.abandon("cancelled")
                subscription.close()
                raise
            if stepped is None:
                # The run ended and settled: its run-scoped subscription is closed.
                subscription.close()

    async def _run_to_end(self) -> None:
        """The stream ended (the run settled, or an overflow closed it): a run still going is
        stepped on to its end, unobserved."""
        self._done = True
        driver = self._driver
        if driver is not None and not driver.settled:
            await driver.drain()

    async def aclose(self) -> None:
        """Stop consuming: abort the run if it is still going and wait for it to settle."""
        if self._subscription is not None:
            self._subscription.close()
        await super().aclose()
