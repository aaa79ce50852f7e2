"""The a2a-sdk's default request handler, with two rules Prism adds.

``tasks/cancel`` denies a run that waits for input. A working run is not interrupted from
outside (its tool may be mid-effect) and a finished one has nothing left to cancel: both are
refused with ``TaskNotCancelableError`` before the SDK touches the task.

``message/stream`` opens with the task itself, as A2A asks of a task's stream: the task
already is in the store when the SDK takes the request up (the run has checkpointed), so the
SDK's stream would open with the first status update; the handler sends, in its place, the
task as that update leaves it (its status, and the request's message as its history).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from a2a.server.cluster.task_store import ConcurrentTaskModificationError
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.types import CancelTaskRequest, SendMessageRequest, Task, TaskStatusUpdateEvent

from prism_core import PrismError

from ._access import call_scope
from ._errors import NotCancelable, TaskNotFound, a2a_error
from ._runs import PrismRuns

__all__ = ("PrismRequestHandler",)


class PrismRequestHandler(DefaultRequestHandler):
    """The SDK's handler over a :class:`~._runs.PrismRuns` (see the module)."""

    def __init__(self, *, runs: PrismRuns, **options: Any) -> None:
        super().__init__(**options)
        self.prism_runs = runs

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        """The SDK's stream, opened with the task (see the module)."""
        opened = False
        async for event in super().on_message_send_stream(params, context):
            if not opened and isinstance(event, TaskStatusUpdateEvent):
                event = Task(
                    id=event.task_id,
                    context_id=event.context_id,
                    status=event.status,
                    history=[params.message],
                )
            opened = True
            yield event

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task:
        """Cancel (deny) a task that waits for input; refuse any other."""
        found = await self.prism_runs.status(params.id, call_scope(context))
        if found is None:
            raise a2a_error(TaskNotFound(f"no task {params.id!r}"))
        if found.state.status != "suspended":
            raise a2a_error(
                NotCancelable(
                    f"task {params.id} is {found.state.status}: only a task that waits for "
                    "input can be canceled"
                )
            )
        try:
            task: Task | None = await super().on_cancel_task(params, context)
        except ConcurrentTaskModificationError as exc:
            raise a2a_error(NotCancelable(f"task {params.id} was resumed meanwhile")) from exc
        except PrismError as exc:
            raise a2a_error(exc) from exc
        if task is None:
            raise a2a_error(TaskNotFound(f"no task {params.id!r}"))
        return task
