"""The base of the owned-run event streams: start on first use, abort when left early.

It drives a run through the :class:`StepDriver` protocol, so it must not import the driver.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..events import AgentEvent
from ..results import AgentRunResult
from ..signals import AbortSignal

__all__ = ("DrivenRun", "DriverStream", "StepDriver")


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
