"""The a2a-sdk's agent executor: a run's progress, observed from the stores, as its task's updates.

The executor runs nothing: the run runs in a task of the face's own (a new one) or in a worker
(a decided one). It observes the run (:func:`prism_core.observe_agent_run`) up to its next
stop and publishes, in order: ``working`` (once, unless the task opened so), for each tool call
that ran a ``working`` update with the data part ``{"tool_call": ...}`` and one with
``{"tool_result": ...}``, then the end: ``input-required`` with the pending decisions,
``completed`` after the answer artifact, ``failed`` with the error, or ``canceled`` for a
denied or aborted run (the table in :mod:`._views`). A run a worker left as it is (a call in
doubt, a failed restore hook) ends the updates with a ``working`` update naming why: it stays
working until an operator settles it.

A client that goes away stops only the watching: the SDK's subscription ends, this observation
ends at the run's stop with nobody listening, and the run goes on to that stop either way.
Cancelling a task that waits for input publishes ``canceled``; the task store turns that write
into the run's ``deny``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any, Protocol

from a2a.helpers import new_data_part, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Task, TaskState, TaskStatus
from a2a.utils.errors import InternalError

from prism_core import (
    AgentDeniedEvent,
    AgentEvent,
    AgentFinishedEvent,
    AgentRunNotFoundError,
    AgentSuspendedEvent,
    ErrorEvent,
    MessageFinishedEvent,
    RunLeftError,
    ToolCallContent,
    ToolExecutionFinishedEvent,
    codec,
    observe_agent_run,
)

from ._requests import ObservedRun, PrismRequestContext
from ._views import ANSWER_ARTIFACT_ID, agent_message, error_message, suspended_message

__all__ = ("OBSERVE_POLL_MS", "PrismAgentExecutor", "Updates", "publish_observed")

#: Longest pause between two reads of a running run's stores while a request watches it.
OBSERVE_POLL_MS = 250
_STOPS = (AgentSuspendedEvent, AgentFinishedEvent, AgentDeniedEvent, ErrorEvent)


class Sink(Protocol):
    """Where updates go: the SDK's event queue, or a resubscription's buffer."""

    async def enqueue_event(self, event: Any) -> None:
        """Take one update."""
        ...


class Updates:
    """Publishes one run's observed events as status and artifact updates of its task."""

    def __init__(
        self,
        sink: Sink,
        task_id: str,
        context_id: str,
        *,
        working: bool = False,
        arguments: dict[str, Any] | None = None,
    ) -> None:
        self.updater = TaskUpdater(sink, task_id, context_id)  # type: ignore[arg-type]
        self.task_id = task_id
        self.context_id = context_id
        self.working = working
        self.arguments: dict[str, Any] = dict(arguments or {})
        self.answer = ""
        self._messages = 0

    def _message(self, text: str, data: dict[str, Any]) -> Any:
        self._messages += 1
        parts = [new_text_part(text), new_data_part(codec.unstructure(data))]
        message_id = f"{self.task_id}:update:{self._messages}"
        return agent_message(self.task_id, self.context_id, parts, message_id)

    async def _work(self, message: Any = None) -> None:
        self.working = True
        await self.updater.start_work(message)

    async def publish(self, event: AgentEvent) -> None:
        """The updates ``event`` stands for (none for the events A2A has no use for)."""
        updater = self.updater
        if isinstance(event, MessageFinishedEvent):
            for block in event.message.content:
                if isinstance(block, ToolCallContent):
                    self.arguments[block.id] = codec.unstructure(block.arguments)
            text = "".join(
                getattr(block, "text", "")
                for block in event.message.content
                if getattr(block, "type", None) == "text"
            )
            if text:
                self.answer = text
        elif isinstance(event, ToolExecutionFinishedEvent):
            if not self.working:
                await self._work()
            call = {
                "tool_call_id": event.tool_call_id,
                "tool_name": event.name,
                "arguments": self.arguments.get(event.tool_call_id),
            }
            await self._work(self._message(f"calling {event.name}", {"tool_call": call}))
            error = event.result.error
            outcome = {
                "tool_call_id": event.tool_call_id,
                "tool_name": event.name,
                "value": event.result.value,
                "error": None if error is None else {"code": error.code, "message": error.message},
            }
            text = f"{event.name} {'failed' if error is not None else 'returned'}"
            await self._work(self._message(text, {"tool_result": outcome}))
        elif isinstance(event, AgentSuspendedEvent):
            await updater.requires_input(
                suspended_message(self.task_id, self.context_id, event.interruption, event.version)
            )
        elif isinstance(event, AgentFinishedEvent):
            if not self.working:
                await self._work()
            answer = getattr(event, "text", None) or self.answer
            await updater.add_artifact(
                [new_text_part(answer)], artifact_id=ANSWER_ARTIFACT_ID, name="answer"
            )
            await updater.complete()
        elif isinstance(event, AgentDeniedEvent):
            await updater.cancel()
        elif isinstance(event, ErrorEvent):
            if event.status == "aborted":
                await updater.cancel()
            else:
                await updater.failed(error_message(self.task_id, self.context_id, event.error))

    async def left(self, error: RunLeftError) -> None:
        """The run was left as it is by a worker: say why; it stays working."""
        info = {"code": error.code, "message": str(error)}
        await self._work(self._message(f"the run waits for an operator: {error}", {"left": info}))


class PrismAgentExecutor(AgentExecutor):
    """Observes the run the request-context builder started or decided; cancels by
    publishing ``canceled``."""

    def __init__(self, checkpoints: Any, sessions: Any) -> None:
        self.checkpoints = checkpoints
        self.sessions = sessions

    def observe(self, observed: ObservedRun) -> AsyncIterator[Any]:
        """The stored events of ``observed``'s run after its point, up to its next stop."""
        return observe_agent_run(
            self.checkpoints,
            self.sessions,
            observed.run_id,
            ownership=observed.scope,
            after=observed.after,
            max_poll_ms=OBSERVE_POLL_MS,
        )

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Publish the observed run's events until it stops (or a worker leaves it)."""
        if not isinstance(context, PrismRequestContext):
            raise InternalError("a request that did not start or decide a Prism run")
        task_id, context_id = context.task_id, context.context_id
        if task_id is None or context_id is None:
            raise InternalError("a request context without its task and context ids")
        observed = context.observed
        opening = context.current_task is None and context.message is not None
        updates = Updates(
            event_queue, task_id, context_id, working=opening, arguments=observed.arguments
        )
        if opening:
            # A new task: the SDK takes it from this first event, already working.
            await event_queue.enqueue_event(
                Task(
                    id=task_id,
                    context_id=context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_WORKING),
                    history=[context.message],  # type: ignore[list-item]
                )
            )
        await publish_observed(self, observed, updates)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Publish ``canceled`` (the handler let through only a task that waits for input)."""
        task_id, context_id = context.task_id, context.context_id
        if task_id is None or context_id is None:
            raise InternalError("a cancel without its task and context ids")
        await TaskUpdater(event_queue, task_id, context_id).cancel()


async def publish_observed(
    executor: PrismAgentExecutor, observed: ObservedRun, updates: Updates
) -> None:
    """Publish ``observed``'s run through ``updates`` up to its next stop."""
    stopped = next((e for e in observed.read if isinstance(e, _STOPS)), None)
    try:
        async with contextlib.aclosing(executor.observe(observed)) as events:  # type: ignore[type-var]
            async for item in events:
                await updates.publish(item.event)
    except AgentRunNotFoundError:
        # It ended before its first checkpoint: what was seen live is all there is.
        if stopped is None:
            raise
        await updates.publish(stopped)
    except RunLeftError as exc:
        await updates.left(exc)
