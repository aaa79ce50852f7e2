"""The host's agent, made ready to run one task's durable run on that task's stores."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from prism_core import PrismError, RunStateOptions, call_resolve_agent

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


#: Durable options the tasks set themselves, whatever the agent's ``run_state`` says.
_TASK_OWNED = frozenset(
    {"checkpoints", "definition_revision", "checkpoint_policy", "lease_ms", "fencing_token"}
)


def _run_state(agent: Any, revision: str, stores: TaskStores, lease_ms: int) -> RunStateOptions:
    configured = agent.run_state
    if configured is None:
        base = RunStateOptions(stores.checkpoints, revision)
    elif isinstance(configured, RunStateOptions):
        base = configured
    elif isinstance(configured, Mapping):
        try:
            # The store and the revision are the tasks' own; the mapping may leave them out.
            options: dict[str, Any] = {k: v for k, v in configured.items() if k not in _TASK_OWNED}
            base = RunStateOptions(stores.checkpoints, revision, **options)
        except (TypeError, PrismError) as exc:
            raise RunTaskError(
                f"the agent's run_state mapping is not RunStateOptions: {exc}",
                code="ERR_PRISM_CELERY_AGENT",
            ) from exc
    else:
        raise RunTaskError(
            "the agent's run_state must be RunStateOptions or a mapping",
            code="ERR_PRISM_CELERY_AGENT",
        )
    if base.ownership:
        # A task names a run by id alone; an owner scope would need the owner on every task.
        raise RunTaskError(
            "the Celery tasks run unowned runs; drop ownership from the agent's run_state",
            code="ERR_PRISM_CELERY_AGENT",
        )
    # The host's own durable options (interrupt_before_tool, session state, metadata) stay;
    # the store, the revision, the policy and the lease are the tasks'.
    return attrs.evolve(
        base,
        checkpoints=stores.checkpoints,
        definition_revision=revision,
        checkpoint_policy="every-turn",
        lease_ms=lease_ms,
        fencing_token=None,
    )


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
    ready = agent.evolve(
        store=stores.sessions, run_state=_run_state(agent, revision, stores, settings.lease_ms)
    )
    return ResolvedAgent(agent=ready, revision=revision)
