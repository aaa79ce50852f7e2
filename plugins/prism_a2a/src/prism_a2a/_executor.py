"""The a2a-sdk's agent executor: a started Prism run's events as the task's updates, in order.

``working`` when the run starts or resumes, a ``working`` update for each tool call that runs
and each result (data parts ``{"tool_call": ...}`` and ``{"tool_result": ...}``), then the
end: ``input-required`` with the pending decisions, ``completed`` after the answer artifact,
``failed`` with the error, or ``canceled`` for a denied or aborted run (the table in
:mod:`._views`). Cancelling a task that waits for input publishes ``canceled``; the task store
turns that write into the run's ``deny``.
"""

from __future__ import annotations

from typing import Any

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
    AgentResumedEvent,
    AgentStartedEvent,
    AgentSuspendedEvent,
    ErrorEvent,
    ToolExecutionFinishedEvent,
    ToolExecutionStartedEvent,
    codec,
)

from ._requests import PrismRequestContext
from ._views import ANSWER_ARTIFACT_ID, agent_message, error_message, suspended_message

__all__ = ("PrismAgentExecutor",)


class _Updates:
    """Publishes one run's events as status and artifact updates of its task."""

    def __init__(self, updater: TaskUpdater, task_id: str, context_id: str) -> None:
        self.updater = updater
        self.task_id = task_id
        self.context_id = context_id
        self.working = False
        self._messages = 0

    def _message(self, text: str, data: dict[str, Any]) -> Any:
        self._messages += 1
        parts = [new_text_part(text), new_data_part(codec.unstructure(data))]
        message_id = f"{self.task_id}:update:{self._messages}"
        return agent_message(self.task_id, self.context_id, parts, message_id)

    async def publish(self, event: AgentEvent) -> None:
        """The updates ``event`` stands for (none for the events A2A has no use for)."""
        updater = self.updater
        if isinstance(event, AgentStartedEvent | AgentResumedEvent):
            if not self.working:
                self.working = True
                await updater.start_work()
        elif isinstance(event, ToolExecutionStartedEvent):
            call = {
                "tool_call_id": event.tool_call_id,
                "tool_name": event.name,
                "arguments": event.arguments,
            }
            await updater.start_work(self._message(f"calling {event.name}", {"tool_call": call}))
        elif isinstance(event, ToolExecutionFinishedEvent):
            error = event.result.error
            outcome = {
                "tool_call_id": event.tool_call_id,
                "tool_name": event.name,
                "value": event.result.value,
                "error": None if error is None else {"code": error.code, "message": error.message},
            }
            text = f"{event.name} {'failed' if error is not None else 'returned'}"
            await updater.start_work(self._message(text, {"tool_result": outcome}))
        elif isinstance(event, AgentSuspendedEvent):
            await updater.requires_input(
                suspended_message(self.task_id, self.context_id, event.interruption, event.version)
            )
        elif isinstance(event, AgentFinishedEvent):
            await updater.add_artifact(
                [new_text_part(event.text)], artifact_id=ANSWER_ARTIFACT_ID, name="answer"
            )
            await updater.complete()
        elif isinstance(event, AgentDeniedEvent):
            await updater.cancel()
        elif isinstance(event, ErrorEvent):
            if event.status == "aborted":
                await updater.cancel()
            else:
                await updater.failed(error_message(self.task_id, self.context_id, event.error))


class PrismAgentExecutor(AgentExecutor):
    """Runs what the request-context builder started; cancels by publishing ``canceled``."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Publish the started run's events until it ends or waits for input."""
        if not isinstance(context, PrismRequestContext):
            raise InternalError("a request that did not start a Prism run")
        task_id, context_id = context.task_id, context.context_id
        if task_id is None or context_id is None:
            raise InternalError("a request context without its task and context ids")
        updates = _Updates(TaskUpdater(event_queue, task_id, context_id), task_id, context_id)
        # A run that ended before its first checkpoint has no task in the store yet.
        if context.current_task is None and context.message is not None:
            await event_queue.enqueue_event(
                Task(
                    id=task_id,
                    context_id=context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[context.message],
                )
            )
        started = context.started
        try:
            async for event in started.events():
                await updates.publish(event)
        finally:
            await started.aclose()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Publish ``canceled`` (the handler let through only a task that waits for input)."""
        task_id, context_id = context.task_id, context.context_id
        if task_id is None or context_id is None:
            raise InternalError("a cancel without its task and context ids")
        await TaskUpdater(event_queue, task_id, context_id).cancel()
