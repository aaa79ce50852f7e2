"""The event stream of one resume, bounded like ``session.subscribe``.

The stream subscribes to the rebuilt session before the resume emits anything (through the
``on_session`` seam, ahead of the host's observer), then steps the resumed run only while its
bounded queue is empty. Events a step publishes (a tool's progress events, the terminal
events) queue there under ``max_queued_events``/``overflow`` exactly as a subscriber's do: the
``close`` policy clears the queue, delivers one ``event_subscriber_overflow`` notice and ends
the stream, and the resumed run still goes on to its end; leaving early aborts it.

It must not change the pipeline: it only observes it and steps the resumed run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..events import AgentEvent
from ..results import AgentRunResult
from ..runs._broadcast import OverflowPolicy
from ..runs._stream import StepDriver, SubscribedStream
from ._pipeline import Prepared, Settled

__all__ = ("ResumeEventStream",)

#: ``prepare(on_session)`` runs the resume pipeline with ``on_session`` as its observer.
Prepare = Callable[[Callable[[Any], Any]], Awaitable[Prepared | Settled]]


class ResumeEventStream(SubscribedStream):
    """The events of one resume: ``agent_denied`` or ``agent_suspended`` for runs that do not
    claim, else ``agent_started``, ``agent_resumed`` and the resumed run's events. Leaving
    early aborts only the resumed execution; an overflow under the ``close`` policy ends the
    stream while the run goes on to its end. ``result`` is set once it has ended."""

    def __init__(
        self,
        prepare: Prepare,
        *,
        on_session: Callable[[Any], Any] | None = None,
        max_queued_events: int = 1024,
        overflow: OverflowPolicy = "close",
    ) -> None:
        super().__init__()
        self._prepare = prepare
        self._host_on_session = on_session
        self._max_queued_events = max_queued_events
        self._overflow: OverflowPolicy = overflow
        self._prepared = False
        self._settled_result: AgentRunResult | None = None
        #: The events of a resume settled without a session (a deny without the run's
        #: definition), handed out in order.
        self._direct: list[AgentEvent] | None = None

    @property
    def result(self) -> AgentRunResult | None:
        """The resume's result once it has ended, else ``None``."""
        if self._settled_result is not None:
            return self._settled_result
        return self._driver.execution.result if self._driver is not None else None

    async def _start(self) -> StepDriver:
        # __anext__ prepares the resume itself, since a deny or a partial batch has no run.
        raise AssertionError("a resume stream prepares its run in __anext__")

    async def _observe(self, session: Any) -> None:
        self._subscription = session.subscribe(
            max_queued_events=self._max_queued_events, overflow=self._overflow
        )
        if self._host_on_session is not None:
            outcome = self._host_on_session(session)
            if hasattr(outcome, "__await__"):
                await outcome

    async def _ensure_prepared(self) -> None:
        if self._prepared:
            return
        self._prepared = True
        try:
            prepared = await self._prepare(self._observe)
        except BaseException:
            self._done = True
            if self._subscription is not None:
                self._subscription.close()
            raise
        if isinstance(prepared, Settled):
            self._settled_result = prepared.result
            if prepared.session is None:
                self._direct = list(prepared.events)
        else:
            self._driver = prepared.driver

    async def __anext__(self) -> AgentEvent:
        if self._done:
            raise StopAsyncIteration
        await self._ensure_prepared()
        if self._direct is not None:
            if not self._direct:
                self._done = True
                raise StopAsyncIteration
            return self._direct.pop(0)
        return await self._next_queued()
