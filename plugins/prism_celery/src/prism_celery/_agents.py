"""The host's agent, made ready to run one task's durable run on that task's stores."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from prism_core import PrismError, call_resolve_agent

from ._config import TaskSettings
from ._errors import RunTaskError
from ._stores import TaskStores

__all__ = ("ResolvedAgent", "resolve_task_agent")


@attrs.frozen
class ResolvedAgent:
    """A copy of the host's agent on the task's session store, carrying the durable options
    of every run the tasks start (``every-turn`` checkpoints, the lease, the revision)."""

    agent: Any = attrs.field(eq=False)
    revision: str


def _unpack(resolved: Any, agent_id: str) -> tuple[Any, Any]:
    if isinstance(resolved, Mapping):
        return resolved.get("agent"), resolved.get("definition_revision")
    if isinstance(resolved, tuple) and len(resolved) == 2:
        return resolved[0], resolved[1]
    raise RunTaskError(
        f"resolve_agent({agent_id!r}) must return (agent, definition_revision) or a mapping "
        "with those keys",
        code="ERR_PRISM_CELERY_AGENT",
    )


def _hosted(agent: Any, revision: str, stores: TaskStores, lease_ms: int) -> Any:
    """The host's agent as the tasks run it (:meth:`prism_core.Agent.hosted`): the task's
    stores, the revision, every-turn checkpoints, the lease, unowned runs (a task names a run
    by id alone, so an agent whose ``run_state`` names an owner is refused)."""
    try:
        return agent.hosted(stores, definition_revision=revision, lease_ms=lease_ms)
    except (TypeError, PrismError) as exc:
        raise RunTaskError(
            f"the agent cannot be run by the Celery tasks: {exc}", code="ERR_PRISM_CELERY_AGENT"
        ) from exc


async def resolve_task_agent(
    settings: TaskSettings, agent_id: str, stores: TaskStores, *, revision: str | None = None
) -> ResolvedAgent:
    """``resolve_agent(agent_id)`` (sync or async), copied onto the task's stores; called as
    ``resolve_agent(agent_id, revision=revision)`` when it takes a keyword ``revision`` and a
    run's recorded ``revision`` is given (see :func:`prism_core.call_resolve_agent`).

    Raises :class:`RunTaskError` (code ``ERR_PRISM_CELERY_AGENT``) when the host knows no such
    agent or answers with something else than ``(agent, definition_revision)``.
    """
    resolved = await call_resolve_agent(settings.resolve_agent, agent_id, revision=revision)
    agent, revision = _unpack(resolved, agent_id)
    if agent is None:
        raise RunTaskError(
            f"resolve_agent knows no agent {agent_id!r}", code="ERR_PRISM_CELERY_AGENT"
        )
    if not isinstance(revision, str) or not revision.strip():
        raise RunTaskError(
            f"resolve_agent({agent_id!r}) returned no definition_revision",
            code="ERR_PRISM_CELERY_AGENT",
        )
    # A copy: the host's agent object keeps its own store and options.
    ready = _hosted(agent, revision, stores, settings.lease_ms)
    return ResolvedAgent(agent=ready, revision=revision)
