"""Driving a run step by step: abort and wall time cancel only the step in flight.

It must not hold run logic: what a step does is ``_execution``'s.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any

import anyio

from .._threads import current_loop
from ..events import AgentEvent
from ..results import AgentRunResult
from ._broadcast import EventSubscription
from ._execution import RunExecution
from ._failures import AbortRequested
from ._stream import SubscribedStream

__all__ = ("RunDriver", "RunEventStream")


def _aborted(execution: RunExecution) -> bool:
    # A call, not an attribute read, so type checkers do not carry the pre-step narrowing
    # of ``signal.aborted`` across the awaited step.
    return execution.signal.aborted


def _close_now(events: Any) -> None:
    """Close a suspended run generator without an event loop turn, when its cleanup allows.

    Cleanup that must really wait (a provider closing a network stream) cannot finish here;
    the event loop's async-generator finaliser completes it later.
    """
    closer = events.aclose()
    try:
        closer.send(None)
    except StopIteration:
        return
    closer.close()


def _lease_held(execution: RunExecution) -> AbstractAsyncContextManager[None]:
    """The renewal of a leased durable run's lease while one step is in flight."""
    durable = execution.durable
    return durable.hold_lease() if durable is not None else nullcontext()


class RunDriver:
    """Pulls events from a :class:`RunExecution`, one cancellable step at a time."""

    def __init__(self, execution: RunExecution) -> None:
        self.execution = execution
        self._events = execution.events()
        self._pending: deque[AgentEvent] = deque()
        self._ended = False
        self.settled = False

    async def next(self) -> AgentEvent | None:
        """The next event, or ``None`` once the run has ended and settled."""
        if self._pending:
            return self._pending.popleft()
        if self._ended:
            await self._settle()
            return None
        execution = self.execution
        if execution.signal.aborted:
            return await self._end_with(await execution.abort_terminal(execution.signal.reason))
        # The step stops at the run's step deadline: for a durable run, a little before its
        # wall time runs out, which leaves the terminal checkpoint the rest.
        stop = execution.step_deadline
        deadline = stop if stop is not None else math.inf
        if deadline <= anyio.current_time():
            return await self._end_with(await execution.wall_time_terminal())
        if execution.event_loop is None:
            execution.event_loop = current_loop()
        scope = anyio.CancelScope(deadline=deadline)
        execution.step_scope = scope
        event: AgentEvent | None = None
        try:
            with scope:
                async with _lease_held(execution):
                    event = await self._events.__anext__()
        except StopAsyncIteration:
            self._ended = True
            await self._settle()
            return None
        except AbortRequested:
            return await self._end_with(await execution.abort_terminal(execution.signal.reason))
        finally:
            execution.step_scope = None
        if not scope.cancelled_caught:
            return event
        # Our own scope absorbed a cancellation: an abort or the wall-time deadline.
        if _aborted(execution):
            return await self._end_with(await execution.abort_terminal(execution.signal.reason))
        return await self._end_with(await execution.wall_time_terminal())

    async def _end_with(self, events: list[AgentEvent]) -> AgentEvent | None:
        self._ended = True
        await self._events.aclose()
        self._pending.extend(events)
        if self._pending:
            return self._pending.popleft()
        await self._settle()
        return None

    async def _settle(self) -> None:
        if not self.settled:
            self.settled = True
            self.execution.session.run_slot.settle(self.execution)

    def interrupt(self, reason: Any) -> None:
        """Abort the run as ``session.abort()`` does (see :meth:`RunExecution.interrupt`)."""
        self.execution.interrupt(reason)

    def abandon(self, reason: Any, *, close_events: bool = True) -> None:
        """End the run now without awaiting (the consumer went away or was cancelled).

        ``close_events=False`` leaves the run's event generator open: another task is
        stepping it and is being cancelled, and its cancellation closes it."""
        if self.settled:
            return
        self._ended = True
        if self.execution.result is None:
            self._pending.extend(self.execution.abort_terminal_now(reason))
        self.settled = True
        if close_events:
            _close_now(self._events)
        self.execution.session.run_slot.settle(self.execution)

    async def drain(self) -> AgentRunResult:
        """Run to the end and return the result."""
        try:
            while await self.next() is not None:
                pass
        except BaseException:
            self.abandon("cancelled")
            raise
        result = self.execution.result
        assert result is not None
        return result


class RunEventStream(SubscribedStream):
    """The owned-run event stream of ``session.stream()``.

    Iterating it subscribes to the session (bounded by ``max_queued_events``/``overflow``, as
    ``session.subscribe`` is), then starts the run; it yields only that run's events and ends
    when the run ends. An overflow under the ``close`` policy ends it after the notice while
    the run goes on to its end; leaving early (``break``, ``aclose()``, or dropping it) aborts
    the run. ``result`` holds the :class:`AgentRunResult` once the run has ended.
    """

    def __init__(
        self,
        start: Callable[[], RunExecution],
        subscribe: Callable[[], EventSubscription],
    ) -> None:
        super().__init__()
        #: Validates the run's input and options and makes it the session's active run.
        self._start_run = start
        #: The stream's own bounded subscription to the session.
        self._subscribe = subscribe

    async def _start(self) -> RunDriver:
        subscription = self._subscribe()
        try:
            driver = RunDriver(self._start_run())
        except BaseException:
            subscription.close()
            raise
        self._subscription = subscription
        return driver

    async def __anext__(self) -> AgentEvent:
        if self._done:
            raise StopAsyncIteration
        if self._driver is None:
            try:
                self._driver = await self._start()
            except BaseException:
                self._done = True
                raise
        return await self._next_queued()

    @property
    def result(self) -> AgentRunResult | None:
        """The run's result once it has ended, else ``None``."""
        return self._driver.execution.result if self._driver is not None else None

    @property
    def run_id(self) -> str | None:
        """The owned run's id once it has started."""
        return self._driver.execution.run_id if self._driver is not None else None
