"""The a2a-sdk's default request handler, with three rules Prism adds.

``tasks/cancel`` denies a run that waits for input. A working run is not interrupted from
outside (its tool may be mid-effect) and a finished one has nothing left to cancel: both are
refused with ``TaskNotCancelableError`` before the SDK touches the task.

``message/stream`` opens with the task itself, as A2A asks of a task's stream: the task
already is in the store when the SDK takes the request up (the run has checkpointed), so the
SDK's stream would open with the first status update; the handler sends, in its place, the
task as that update leaves it (its status, and the request's message as its history).

``SubscribeToTask`` (0.3's ``tasks/resubscribe``) observes the run from the stores, wherever it
runs (this face's task, a worker here or in another process): the task as it is now, then its
updates up to the run's next stop. A finished task has nothing left to stream
(``UnsupportedOperationError``). Leaving the stream stops only the watching.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import Any

from a2a.server.cluster.task_store import ConcurrentTaskModificationError
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.types import (
    CancelTaskRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import UnsupportedOperationError

from prism_core import PrismError, RunLeftError, observation_point, observe_agent_run

from ._access import call_scope
from ._errors import NotCancelable, TaskNotFound, a2a_error
from ._executor import OBSERVE_POLL_MS, Updates
from ._runs import PrismRuns
from ._views import task_view

_FINISHED = frozenset(
    (
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
    )
)


class _Buffer:
    """The updates one observed event stands for, until the stream sends them."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    async def enqueue_event(self, event: Any) -> None:
        self.events.append(event)

    def drain(self) -> list[Any]:
        drained, self.events = self.events, []
        return drained


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

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        """The task, then its run's updates, observed, up to the run's next stop."""
        runs = self.prism_runs
        scope = call_scope(context)
        try:
            # Taken first: what happens after it is streamed, nothing before it is missed.
            point = await observation_point(
                runs.checkpoints, runs.sessions, params.id, ownership=scope
            )
        except PrismError as exc:
            raise a2a_error(TaskNotFound(f"no task {params.id!r}")) from exc
        found = await runs.status(params.id, scope)
        if found is None:
            raise a2a_error(TaskNotFound(f"no task {params.id!r}"))
        task = await task_view(
            found, runs.sessions, updated_at=await runs.updated_at(params.id, scope)
        )
        if task.status.state in _FINISHED:
            raise UnsupportedOperationError(
                f"task {params.id} is finished ({TaskState.Name(task.status.state)}): "
                "nothing is left to stream"
            )
        yield task
        buffer = _Buffer()
        updates = Updates(
            buffer,
            task.id,
            task.context_id,
            working=task.status.state == TaskState.TASK_STATE_WORKING,
            arguments=await runs.call_arguments(found),
        )
        observed = observe_agent_run(
            runs.checkpoints,
            runs.sessions,
            params.id,
            ownership=scope,
            after=point,
            max_poll_ms=OBSERVE_POLL_MS,
        )
        async with contextlib.aclosing(observed) as events:  # type: ignore[type-var]
            try:
                async for item in events:
                    await updates.publish(item.event)
                    for event in buffer.drain():
                        yield event
            except RunLeftError as exc:
                await updates.left(exc)
                for event in buffer.drain():
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
