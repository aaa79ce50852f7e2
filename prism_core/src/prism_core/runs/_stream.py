"""The base of the owned-run event streams: start on first use, abort when left early, and
deliver the run's events through a bounded subscription.

A stream subscribes to the session before its run starts, then runs the run on its own (a
detached task of the event loop, see ``_detached``) and hands the consumer what the
subscription queued. The run does not wait for its consumer: events queue under
``max_queued_events`` and ``overflow`` exactly as a ``session.subscribe`` subscriber's do
(``close`` clears the queue, delivers one ``event_subscriber_overflow`` notice and ends the
stream; the drop policies keep the newest or the oldest events), so a consumer that pauses or
falls behind never stalls the run. After an overflow closes the stream, the run goes on to its
end before the stream finishes. Leaving early (``break``, ``aclose()``) aborts the run.

It drives a run through the :class:`StepDriver` protocol, so it must not import the driver.
"""

from __future__ import annotations

import functools
from typing import Any, Protocol

from .._detached import Detached, start_detached
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

    def abandon(self, reason: Any, *, close_events: bool = True) -> None:
        """End the run now without awaiting (``close_events=False``: leave the run's event
        generator to the task that is stepping it, which is being cancelled)."""
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
    """A :class:`DriverStream` whose run goes on by itself and whose events come through a
    bounded subscription (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self._subscription: Subscription | None = None
        self._pump: Detached | None = None

    def _abandon(self, reason: str) -> None:
        """The consumer is gone (dropped, or cancelled while waiting): its run ends now,
        unrecorded, as a crash leaves it, and the task stepping it is cancelled."""
        self._done = True
        driver, pump = self._driver, self._pump
        if driver is not None and not driver.settled:
            driver.abandon(reason, close_events=False)
        if pump is not None:
            pump.cancel()

    async def _next_queued(self) -> AgentEvent:
        """The next event the subscription holds, waiting for the run to publish one."""
        subscription = self._subscription
        assert subscription is not None
        driver = self._driver
        if self._pump is None and driver is not None and not driver.settled:
            # The pump must not hold the stream: dropping the stream ends its run.
            self._pump = start_detached(functools.partial(_drive, driver, subscription))
        try:
            return await subscription.__anext__()
        except StopAsyncIteration:
            await self._run_to_end()
            raise
        except BaseException:
            self._abandon("cancelled")
            raise

    async def _run_to_end(self) -> None:
        """The stream ended (the run settled, or an overflow closed it): a run still going
        goes on to its end, unobserved, before the stream finishes."""
        self._done = True
        pump = self._pump
        if pump is not None:
            await pump.wait()
            return
        driver = self._driver
        if driver is not None and not driver.settled:
            await driver.drain()

    async def aclose(self) -> None:
        """Stop consuming: abort the run if it is still going and wait for it to settle."""
        if self._subscription is not None:
            self._subscription.close()
        pump = self._pump
        if pump is None:
            await super().aclose()
            return
        if self._done and pump.done:
            return
        self._done = True
        driver = self._driver
        if driver is not None and not driver.settled:
            driver.execution.signal.abort("stream closed")
            driver.interrupt("stream closed")
        await pump.wait()

    def __del__(self) -> None:
        pump = self._pump
        if pump is None:
            super().__del__()
        elif not pump.done:
            self._abandon("stream closed")


async def _drive(driver: StepDriver, subscription: Subscription) -> None:
    """Run ``driver``'s run to its end; close ``subscription`` however it ends, so the
    stream's consumer is never left waiting (a settled run closes it too)."""
    try:
        await driver.drain()
    finally:
        subscription.close()
