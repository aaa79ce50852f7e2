"""The a2a-sdk's task store, backed by the checkpoint store: a task *is* its run's checkpoint.

``get`` reads the run's checkpoint (and its session for the history and the answer), under the
caller's ownership, so ``tasks/get`` answers from durable state and survives a restart;
``list`` answers ``ListTasks`` from the same state (see :mod:`._listing`). The
task the SDK keeps while a request runs is its own; its writes change nothing, with one
exception: writing ``canceled`` over a task that waits for input is a cancel, and the store
carries it out as the run's ``deny`` (none of the pending calls runs). A cancel over any other
state is refused as a concurrent modification, as the SDK's store contract has it.
"""

from __future__ import annotations

from a2a.server.cluster.task_store import ConcurrentTaskModificationError
from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task, TaskState
from a2a.utils.errors import UnsupportedOperationError

from prism_core import AgentRunStateError, CheckpointConflictError, PrismError

from ._access import call_principal, call_scope
from ._errors import a2a_error
from ._listing import list_tasks
from ._runs import PrismRuns
from ._views import task_view

__all__ = ("CheckpointTaskStore",)


class CheckpointTaskStore(TaskStore):
    """Tasks as the runs of one agent on the host's checkpoint and session stores."""

    def __init__(self, runs: PrismRuns) -> None:
        self._runs = runs

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The task of run ``task_id`` in the caller's scope, or ``None``."""
        scope = call_scope(context)
        found = await self._runs.status(task_id, scope)
        if found is None:
            return None
        updated_at = await self._runs.updated_at(task_id, scope)
        return await task_view(found, self._runs.sessions, updated_at=updated_at)

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """A ``canceled`` write denies the suspended run; every other write changes nothing."""
        if task.status.state != TaskState.TASK_STATE_CANCELED:
            return
        caller = call_principal(context)
        found = await self._runs.status(task.id, caller.scope)
        if found is not None and found.state.status in ("denied", "aborted"):
            return
        if found is None or found.state.status != "suspended":
            raise ConcurrentTaskModificationError(task.id)
        try:
            await self._runs.deny(found, caller)
        except (CheckpointConflictError, AgentRunStateError) as exc:
            # A resume claimed the run first: the task is no longer waiting to be canceled.
            raise ConcurrentTaskModificationError(task.id) from exc

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """One page of the caller's tasks of this agent (``ListTasks``)."""
        try:
            return await list_tasks(self._runs, params, call_scope(context))
        except PrismError as exc:
            raise a2a_error(exc) from exc

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Not served: a task is a run's durable record."""
        raise UnsupportedOperationError("tasks are durable runs and are not deleted over A2A")
