"""The async body of each task: continue or resume a run, start one per session, sweep.

Every function opens nothing itself: it works on the :class:`TaskStores` it is handed and
returns the task's JSON result, or raises :class:`RetryLater` for Celery to run the task again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prism_core import (
    AgentRunError,
    AgentRunResult,
    AgentRunStateError,
    CheckpointConflictError,
    expire_agent_runs,
    list_agent_runs,
    load_agent_run_state,
    resume_agent_run,
)

from ._agents import resolve_task_agent
from ._config import TaskSettings
from ._errors import RunTaskError
from ._outcome import (
    SUPERSEDED_CODES,
    RetryLater,
    lease_wait_seconds,
    outcome,
    retry_after_lease,
)
from ._stores import TaskStores

__all__ = (
    "STORE_RETRY_SECONDS",
    "continue_run",
    "expire_then_list",
    "recoverable_run_ids",
    "resume_run",
    "settle",
)

#: How long a task waits before trying again when a store did not answer.
STORE_RETRY_SECONDS = 2.0
_STORE_UNAVAILABLE = "ERR_PRISM_STORE_UNAVAILABLE"
_LEASED = "ERR_PRISM_RUN_LEASED"
#: Attempts at claiming a run that other workers keep moving, before retrying the task.
_CLAIM_ATTEMPTS = 3


async def _load(stores: TaskStores, run_id: str) -> Any:
    found = await load_agent_run_state(stores.checkpoints, {"run_id": run_id})
    if found is None:
        raise RunTaskError(f"no durable run {run_id!r}", code="ERR_PRISM_CELERY_RUN_NOT_FOUND")
    return found


async def _superseded(stores: TaskStores, run_id: str) -> dict[str, Any]:
    """The task result once another worker has claimed the run: the stored status when the
    run has settled, else :class:`RetryLater` until that worker's lease would expire, so the
    task ends when the run does, as it does when it finds a live lease up front."""
    found = await _load(stores, run_id)
    state = found.state
    if state.status == "running":
        raise retry_after_lease(state.lease_expires_at, "another worker has the run")
    return outcome(run_id, state.session_id, state.status)


async def settle(stores: TaskStores, result: AgentRunResult) -> dict[str, Any]:
    """The task result for a run that ended on this worker.

    A run that lost its record to another worker's claim wrote nothing more: the task waits
    for that worker to settle it. A run stopped by an unreachable store stays ``running``: try
    later.
    """
    error = result.error
    code = error.code if error is not None else None
    if result.status == "failed" and code in SUPERSEDED_CODES:
        return await _superseded(stores, result.run_id)
    if result.status == "failed" and code == _STORE_UNAVAILABLE:
        raise RetryLater(STORE_RETRY_SECONDS, "a store did not answer")
    return outcome(result.run_id, result.session_id, result.status)


async def _resume(
    settings: TaskSettings, stores: TaskStores, found: Any, run_id: str, resume: Any
) -> dict[str, Any]:
    resolved = await resolve_task_agent(
        settings, found.state.agent_id, stores, revision=found.state.definition_revision
    )
    ref = {"run_id": run_id, "session_id": found.state.session_id}
    try:
        result = await resume_agent_run(
            resolved.agent,
            ref,
            resume,
            checkpoints=stores.checkpoints,
            definition_revision=resolved.revision,
        )
    except AgentRunError as exc:
        return await settle(stores, exc.result)
    except CheckpointConflictError:
        # Another worker claimed the run first: it is that worker's now.
        return await _superseded(stores, run_id)
    except AgentRunStateError as exc:
        if exc.code == _LEASED:
            latest = await _load(stores, run_id)
            raise retry_after_lease(latest.state.lease_expires_at, "leased") from exc
        raise
    return await settle(stores, result)


async def continue_run(settings: TaskSettings, stores: TaskStores, run_id: str) -> dict[str, Any]:
    """Continue ``run_id`` from its last checkpoint, when no live worker holds it.

    A run that is not ``running`` (suspended, ended) is reported as it stands; a live lease
    means another worker is on it: :class:`RetryLater` until the lease would have expired.
    """
    for _ in range(_CLAIM_ATTEMPTS):
        found = await _load(stores, run_id)
        state = found.state
        if state.status != "running":
            return outcome(run_id, state.session_id, state.status)
        if lease_wait_seconds(state.lease_expires_at) > 0:
            raise retry_after_lease(state.lease_expires_at, "leased")
        resume = {"expected_version": found.version, "decision": "continue"}
        try:
            return await _resume(settings, stores, found, run_id, resume)
        except AgentRunStateError as exc:
            if exc.code != "ERR_PRISM_AGENT_RUN_STATE":
                raise
            latest = await _load(stores, run_id)
            if latest.version == found.version:
                raise
            # Another worker moved the run between the read and the claim: look again.
    raise RetryLater(1.0, "the run kept moving under other workers")


async def resume_run(
    settings: TaskSettings, stores: TaskStores, run_id: str, resume: Mapping[str, Any]
) -> dict[str, Any]:
    """Apply the host's resume input (decisions, ``continue``, resolutions) to ``run_id``."""
    found = await _load(stores, run_id)
    return await _resume(settings, stores, found, run_id, resume)


async def expire_then_list(stores: TaskStores) -> list[str]:
    """The sweep's body: expire the decisions past their deadline (the runs they leave
    recoverable are listed with the rest), then every recoverable run."""
    await expire_agent_runs(stores.checkpoints)
    return await recoverable_run_ids(stores)


async def recoverable_run_ids(stores: TaskStores) -> list[str]:
    """Every ``running`` run no live worker holds, over all pages of the listing."""
    found: list[str] = []
    cursor = None
    while True:
        page = await list_agent_runs(stores.checkpoints, recoverable=True, cursor=cursor)
        found.extend(summary.run_id for summary in page.runs)
        cursor = page.cursor
        if cursor is None:
            return found
