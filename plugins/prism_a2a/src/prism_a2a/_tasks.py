"""The a2a-sdk's task store, backed by the checkpoint store: a task *is* its run's checkpoint.

``get`` reads the run's checkpoint (and its session for the history and the answer), under the
caller's ownership, so ``tasks/get`` answers from durable state and survives a restart;
``list`` answers ``ListTasks`` from the same state (see :mod:`._listing`).

The SDK also reads the task store for itself while it handles a message, and expects to find
there the task its own events built: it refuses to start on a task it finds in a terminal
state. A run moves on its own (in the face's task, in a worker), so by the time the SDK looks
the run may have finished, and the SDK would refuse the very message that started or decided
it. So the message's call context is marked with the task as the request opened it
(:func:`open_request`: none yet for a new run, the waiting task for a decision), and the
store answers the SDK's reads under that context from what the request's events wrote since,
never from the run; every other read (``tasks/get``, ``ListTasks``, a cancel) reads the run.

The SDK's writes change nothing durable, with one exception: writing ``canceled`` over a task
that waits for input is a cancel, and the store records it as the run's ``deny`` (none of the
pending calls runs). A cancel over any other state is refused as a concurrent modification,
as the SDK's store contract has it.
"""

from __future__ import annotations

from typing import Any

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

__all__ = ("CheckpointTaskStore", "open_request")

_VIEW_KEY = "prism_a2a.request_view"


class _RequestView:
    """The task one message request's events have built (``None``: no task yet)."""

    def __init__(self, task_id: str, task: Task | None) -> None:
        self.task_id = task_id
        self.task = task


def open_request(context: ServerCallContext, task_id: str, task: Task | None) -> None:
    """Mark ``context`` (a message request's) as the request that opened ``task_id``, whose
    task was ``task`` then (``None``: a new task, which the SDK creates)."""
    context.state[_VIEW_KEY] = _RequestView(task_id, task)


def _view(context: ServerCallContext, task_id: str) -> _RequestView | None:
    view: Any = context.state.get(_VIEW_KEY)
    if isinstance(view, _RequestView) and view.task_id == task_id:
        return view
    return None


def _copy(task: Task | None) -> Task | None:
    if task is None:
        return None
    copied = Task()
    copied.CopyFrom(task)
    return copied


class CheckpointTaskStore(TaskStore):
    """Tasks as the runs of one agent on the host's checkpoint and session stores."""

    def __init__(self, runs: PrismRuns) -> None:
        self._runs = runs

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The task of run ``task_id`` in the caller's scope, or ``None``; the request's own
        task to the message request that opened it (see the module)."""
        view = _view(context, task_id)
        if view is not None:
            return _copy(view.task)
        scope = call_scope(context)
        found = await self._runs.status(task_id, scope)
        if found is None:
            return None
        updated_at = await self._runs.updated_at(task_id, scope)
        return await task_view(found, self._runs.sessions, updated_at=updated_at)

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """A ``canceled`` write denies the suspended run; every other write changes nothing
        durable (a message request's own task is kept for its reads)."""
        view = _view(context, task.id)
        if view is not None:
            view.task = _copy(task)
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
