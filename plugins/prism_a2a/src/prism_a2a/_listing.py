"""``ListTasks``: the caller's tasks of this agent, most recently updated first, page by page.

The tasks are the agent's runs the caller's ownership sees, exactly those ``GetTask`` would
answer for (another owner's runs are never read). ``contextId`` keeps one context's tasks,
``status`` the tasks in that state (``canceled`` is a run ``denied`` or ``aborted``; a state no
run can be in, such as ``rejected``, lists nothing), ``statusTimestampAfter`` the tasks updated
at or after it. Each listed task carries ``status.timestamp``: when its run's checkpoint was
last written.

Tasks are sorted by that timestamp, newest first (ties by task id, descending). A page holds
``pageSize`` tasks (1..100, default 50; the SDK refuses others), ``nextPageToken`` is the
a2a-sdk's cursor (the position of the page's last task, so it stays valid while tasks change)
or ``""`` on the last page, and ``totalSize`` counts every task that matches. A token that is
not one of ours is invalid params.

Runs carry no index by update time, so a listing reads the summaries of the caller's runs
(with ``status``, through the store's status index when it has one). It reads at most
``MAX_LISTED_RUNS`` of them: past that it is refused (:class:`ListTooLarge`), never cut short.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from a2a.types import ListTasksRequest, ListTasksResponse, Task, TaskState
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import ListTasksCursor, decode_list_tasks_cursor, encode_list_tasks_cursor

from prism_core import MAX_CHECKPOINT_PAGE_SIZE, AgentRunSummary, list_agent_runs

from ._errors import ListTooLarge
from ._runs import PrismRuns, Scope
from ._views import TASK_STATES, task_view

__all__ = ("MAX_LISTED_RUNS", "list_tasks")

#: The most of the caller's runs one ``ListTasks`` reads.
MAX_LISTED_RUNS = 10_000

#: A task state → the run statuses shown as it.
_RUN_STATUSES: Mapping[int, tuple[str, ...]] = {
    state: tuple(status for status, shown in TASK_STATES.items() if shown == state)
    for state in set(TASK_STATES.values())
}


def _updated_ns(summary: AgentRunSummary) -> int:
    return round(summary.updated_at * 1e9)


def _cursor(summary: AgentRunSummary) -> ListTasksCursor:
    return ListTasksCursor(timestamp_ns=_updated_ns(summary), task_id=summary.run_id)


def _wanted(state: int) -> tuple[str, ...] | None:
    """The run statuses a ``status`` filter keeps (``None``: every status)."""
    if state == TaskState.TASK_STATE_UNSPECIFIED:
        return None
    return _RUN_STATUSES.get(state, ())


async def _matching(
    runs: PrismRuns, scope: Scope, context_id: str | None, statuses: tuple[str, ...] | None
) -> list[AgentRunSummary]:
    """The summaries of the caller's runs of this agent that pass the filters."""
    # One status: let the store's status index do the filtering.
    indexed: Any = statuses[0] if statuses is not None and len(statuses) == 1 else None
    matching: list[AgentRunSummary] = []
    read = 0
    cursor: str | None = None
    while True:
        page = await list_agent_runs(
            runs.checkpoints,
            status=indexed,
            ownership=scope,
            limit=MAX_CHECKPOINT_PAGE_SIZE,
            cursor=cursor,
        )
        read += len(page.runs)
        if read > MAX_LISTED_RUNS:
            raise ListTooLarge(
                f"listing reads at most {MAX_LISTED_RUNS} runs and the caller has more: "
                "filter by status, or list runs on the host (prism runs list)"
            )
        matching.extend(
            summary
            for summary in page.runs
            if summary.agent_id == runs.agent_id
            and (context_id is None or summary.session_id == context_id)
            and (statuses is None or summary.status in statuses)
        )
        if page.cursor is None:
            return matching
        cursor = page.cursor


async def list_tasks(runs: PrismRuns, params: ListTasksRequest, scope: Scope) -> ListTasksResponse:
    """One page of the caller's tasks (see the module)."""
    size = params.page_size if params.HasField("page_size") else DEFAULT_LIST_TASKS_PAGE_SIZE
    after = None
    if params.page_token:
        after = decode_list_tasks_cursor(params.page_token)
        if after is None:
            raise InvalidParamsError("pageToken is not one this endpoint returned")
    statuses = _wanted(params.status)
    if statuses == ():
        return ListTasksResponse(tasks=[], next_page_token="", page_size=size, total_size=0)
    matching = await _matching(runs, scope, params.context_id or None, statuses)
    if params.HasField("status_timestamp_after"):
        since = params.status_timestamp_after.ToNanoseconds()
        matching = [s for s in matching if _updated_ns(s) >= since]
    matching.sort(key=lambda summary: _cursor(summary).sort_key(), reverse=True)
    start = 0
    if after is not None:
        start = next(
            (i for i, s in enumerate(matching) if _cursor(s).sort_key() < after.sort_key()),
            len(matching),
        )
    page = matching[start : start + size]
    more = start + size < len(matching)
    tasks: list[Task] = []
    for summary in page:
        found = await runs.status(summary.run_id, scope)
        if found is None:
            continue  # deleted since it was listed
        tasks.append(await task_view(found, runs.sessions, updated_at=summary.updated_at))
    return ListTasksResponse(
        tasks=tasks,
        next_page_token=encode_list_tasks_cursor(_cursor(page[-1])) if more else "",
        page_size=size,
        total_size=len(matching),
    )
