"""The a2a-sdk's default request handler, with the one rule Prism adds: what may be canceled.

``tasks/cancel`` denies a run that waits for input. A working run is not interrupted from
outside (its tool may be mid-effect) and a finished one has nothing left to cancel: both are
refused with ``TaskNotCancelableError`` before the SDK touches the task.
"""

from __future__ import annotations

from typing import Any

from a2a.server.cluster.task_store import ConcurrentTaskModificationError
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.types import CancelTaskRequest, Task

from ._access import call_scope
from ._errors import NotCancelable, TaskNotFound, a2a_error
from ._runs import PrismRuns

__all__ = ("PrismRequestHandler",)


class PrismRequestHandler(DefaultRequestHandler):
    """The SDK's handler over a :class:`~._runs.PrismRuns` (see the module)."""

    def __init__(self, *, runs: PrismRuns, **options: Any) -> None:
        super().__init__(**options)
        self.prism_runs = runs

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
            task = await super().on_cancel_task(params, context)
        except ConcurrentTaskModificationError as exc:
            raise a2a_error(NotCancelable(f"task {params.id} was resumed meanwhile")) from exc
        if task is None:
            raise a2a_error(TaskNotFound(f"no task {params.id!r}"))
        return task
