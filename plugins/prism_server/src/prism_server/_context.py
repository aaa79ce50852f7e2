"""``ServerContext``: what every route of the API and the console needs.

It holds the stores, the lifecycle, the caller check and the bounds; the routes in ``_app``
and ``_console`` read it and neither is imported here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from starlette.requests import Request

from prism_core import CheckpointStore, call_resolve_agent, create_agent_run_lifecycle

from ._auth import Authorize, caller_scope
from ._errors import RunNotFound
from ._views import run_detail

__all__ = ("ServerContext",)


async def _host_answer(hook: Callable[[Any], Any] | None, state: Any, absent: Any) -> Any:
    """What the host's sync or async ``hook(state)`` answers (``absent`` without a hook)."""
    if hook is None:
        return absent
    answer = hook(state)
    return await answer if inspect.isawaitable(answer) else answer


class ServerContext:
    """What every route needs: the stores, the lifecycle, the caller check, the bounds."""

    def __init__(
        self,
        *,
        checkpoints: CheckpointStore,
        sessions: Any,
        resolve_agent: Callable[[str], Any],
        authorize: Authorize,
        restore_hooks: Sequence[Any],
        title: str,
        max_body_bytes: int,
        default_auth: bool,
        guardrail_packs: Callable[[Any], Any] | None = None,
        guardrails: Callable[[Any], Any] | None = None,
    ) -> None:
        self.checkpoints = checkpoints
        self.guardrail_packs = guardrail_packs
        self.guardrails = guardrails
        self.sessions = sessions
        self.resolve_host_agent = resolve_agent
        self.authorize = authorize
        self.title = title
        self.max_body_bytes = max_body_bytes
        self.default_auth = default_auth
        self.lifecycle = create_agent_run_lifecycle(
            checkpoints=checkpoints, resolve_agent=self.resolve_agent, restore_hooks=restore_hooks
        )

    async def resolve_agent(self, agent_id: str, *, revision: str | None = None) -> Any:
        """The host's agent for ``agent_id``, on the server's session store (the host's
        ``resolve_agent`` gets ``revision`` when it takes one)."""
        resolved = await call_resolve_agent(self.resolve_host_agent, agent_id, revision=revision)
        if isinstance(resolved, Mapping):
            agent, revision = resolved.get("agent"), resolved.get("definition_revision")
        elif isinstance(resolved, tuple) and len(resolved) == 2:
            agent, revision = resolved
        else:
            return resolved  # the lifecycle refuses it with its own message
        if agent is not None and getattr(agent, "store", None) is not self.sessions:
            # A copy: the host's agent object keeps its own store.
            agent = agent.evolve(store=self.sessions)
        return agent, revision

    async def agent_for(self, agent_id: str, revision: str | None = None) -> Any:
        """The resolved agent alone (``None`` when the host does not know it)."""
        try:
            resolved = await self.resolve_agent(agent_id, revision=revision)
        except LookupError:
            return None
        return resolved[0] if isinstance(resolved, tuple) else None

    async def handed_over(
        self, ref: Mapping[str, str], scope: dict[str, str] | None
    ) -> tuple[Any, Any]:
        """The packs and the run's own guards the host hands over again for this run (``()``
        and ``None`` without the ``guardrail_packs`` and ``guardrails`` callables), from one
        status read; :class:`RunNotFound` when the run is absent or foreign."""
        if self.guardrail_packs is None and self.guardrails is None:
            return (), None
        found = await self.lifecycle.status(ref, ownership=scope)
        if found is None:
            raise RunNotFound("no such run")
        packs = await _host_answer(self.guardrail_packs, found.state, ())
        guards = await _host_answer(self.guardrails, found.state, None)
        return packs, guards

    async def scope(self, request: Request) -> dict[str, str] | None:
        """The caller's ownership scope (see :func:`caller_scope`)."""
        return await caller_scope(self.authorize, request)

    async def detail(self, run_id: str, scope: dict[str, str] | None) -> dict[str, Any]:
        """A run's detail for the caller; :class:`RunNotFound` when absent or foreign."""
        found = await self.lifecycle.status({"run_id": run_id}, ownership=scope)
        if found is None:
            raise RunNotFound("no such run")
        agent = await self.agent_for(found.state.agent_id, found.state.definition_revision)
        detail = await run_detail(self.checkpoints, self.sessions, run_id, scope, agent)
        if detail is None:
            raise RunNotFound("no such run")
        return detail
