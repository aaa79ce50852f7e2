"""``start``: one durable run per session, however often the task is delivered.

Which run a session has is recorded in the checkpoint store itself, as a **session claim**:
namespace ``prism.celery.session``, key = the session id, value ``{"run_id", "agent_id",
"claimed_at"}``. A new run writes the claim with ``expected_version=0`` (must not exist) as
soon as it has an id, before it has read its input or called anything; the store's
compare-and-swap lets exactly one delivery win. A delivery that finds a claim continues that
run instead of starting another (or reports it, once it is suspended or over).

A claim whose run has no checkpoint yet belongs to a worker that has not reached its first
turn boundary: a younger claim than the lease means "try later"; an older one is a worker that
died before its first checkpoint (no tool can have run), and the claim is taken over with a
compare-and-swap on its version.
"""

from __future__ import annotations

import time
from typing import Any

from prism_core import CheckpointConflictError, load_agent_run_state

from ._agents import resolve_task_agent
from ._config import TaskSettings
from ._errors import RunTaskError
from ._outcome import RetryLater, outcome
from ._runs import continue_run, settle
from ._stores import TaskStores

__all__ = ("SESSION_CLAIM_NAMESPACE", "start_run")

#: Where the session claims live in the checkpoint store.
SESSION_CLAIM_NAMESPACE = "prism.celery.session"
_ATTEMPTS = 3


def _check_text(value: Any, what: str, *, blank: bool = False) -> str:
    if not isinstance(value, str) or (not blank and not value.strip()):
        raise RunTaskError(
            f"{what} must be a {'' if blank else 'non-empty '}string",
            code="ERR_PRISM_CELERY_INPUT",
        )
    return value


async def _fresh(
    settings: TaskSettings,
    stores: TaskStores,
    agent_id: str,
    session_id: str,
    text: str,
    expected_version: int,
) -> dict[str, Any] | None:
    """Start a new run and claim the session for it; ``None`` when another delivery's claim
    won (this run is then abandoned before it did anything)."""
    resolved = await resolve_task_agent(settings, agent_id, stores)
    stream = resolved.agent.create_session(id=session_id).stream(text)
    try:
        # The first event is agent_started: the run has an id and has done nothing yet.
        await stream.__anext__()
        claim = {"run_id": stream.run_id, "agent_id": agent_id, "claimed_at": time.time()}
        try:
            await stores.checkpoints.save(
                SESSION_CLAIM_NAMESPACE,
                session_id,
                claim,
                version=expected_version + 1,
                expected_version=expected_version,
            )
        except CheckpointConflictError:
            return None
        async for _event in stream:
            pass
    finally:
        await stream.aclose()
    result = stream.result
    assert result is not None
    return await settle(stores, result)


async def start_run(
    settings: TaskSettings, stores: TaskStores, agent_id: Any, session_id: Any, text: Any
) -> dict[str, Any]:
    """Start the session's run, or carry on with the one it already has."""
    _check_text(agent_id, "agent_id")
    _check_text(session_id, "session_id")
    _check_text(text, "input", blank=True)
    for _ in range(_ATTEMPTS):
        claim = await stores.checkpoints.load(SESSION_CLAIM_NAMESPACE, session_id)
        if claim is None:
            started = await _fresh(settings, stores, agent_id, session_id, text, 0)
        else:
            if claim.value.get("agent_id") != agent_id:
                raise RunTaskError(
                    f"session {session_id!r} already has a run of another agent",
                    code="ERR_PRISM_CELERY_SESSION",
                )
            run_id = claim.value["run_id"]
            found = await load_agent_run_state(stores.checkpoints, {"run_id": run_id})
            if found is not None:
                if found.state.status != "running":
                    return outcome(run_id, session_id, found.state.status)
                return await continue_run(settings, stores, run_id)
            age = time.time() - float(claim.value["claimed_at"])
            grace = settings.lease_ms / 1000
            if age < grace:
                raise RetryLater(max(1.0, grace - age), "the session's run is starting")
            started = await _fresh(settings, stores, agent_id, session_id, text, claim.version)
        if started is not None:
            return started
    raise RetryLater(1.0, "other deliveries keep claiming the session")
