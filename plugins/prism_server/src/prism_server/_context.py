"""``ServerContext``: what every route of the API and the console needs.

It holds the stores, the caller check, the bounds and, per caller, the lifecycle that resumes
runs with the host's agents hosted on the server's stores for that caller
(:meth:`prism_core.Agent.hosted`); the routes in ``_app``, ``_resume`` and ``_console`` read it
and none of them is imported here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from starlette.requests import Request

from prism_core import (
    AgentRunLifecycle,
    Principal,
    StorePair,
    call_resolve_agent,
    create_agent_run_lifecycle,
)
from prism_web import Authorize, authorized

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
        stores: StorePair,
        resolve_agent: Callable[[str], Any],
        authorize: Authorize,
        restore_hooks: Sequence[Any],
        title: str,
        max_body_bytes: int,
        default_auth: bool,
        guardrail_packs: Callable[[Any], Any] | None = None,
        guardrails: Callable[[Any], Any] | None = None,
        notifiers: Sequence[Any] = (),
    ) -> None:
        self.stores = stores
        #: Where the stores' notifications go (the app's workers deliver them); with any,
        #: the runs the server decides notify.
        self.notifiers = tuple(notifiers)
        self.checkpoints = stores.checkpoints
        self.sessions = stores.sessions
        self.guardrail_packs = guardrail_packs
        self.guardrails = guardrails
        self.resolve_host_agent = resolve_agent
        self.restore_hooks = tuple(restore_hooks)
        self.authorize = authorize
        self.title = title
        self.max_body_bytes = max_body_bytes
        self.default_auth = default_auth
        # Status reads only: a resume goes through the caller's own lifecycle.
        self.lifecycle = self.lifecycle_for(Principal())
        #: The app's workers (set by ``create_app``), and whether a request starts them.
        self.workers: Any = None
        self.start_workers_lazily = False

    async def caller(self, request: Request, channel: str) -> Principal:
        """The caller of ``request`` on ``channel`` (``"api"`` or ``"console"``)."""
        return await authorized(self.authorize, request, channel=channel)

    def decided(self) -> None:
        """A decision was recorded here: make sure the app's workers run (an app served with
        its lifespan started them already; a mounted one starts them now)."""
        if self.start_workers_lazily and self.workers is not None:
            self.workers.ensure_started()

    def lifecycle_for(self, caller: Principal) -> AgentRunLifecycle:
        """The lifecycle that resumes runs for ``caller``: the host's agents hosted on the
        server's stores for the caller's ownership."""

        async def resolve(agent_id: str, *, revision: str | None = None) -> Any:
            resolved = await self._resolved(agent_id, revision)
            if not isinstance(resolved, tuple):
                return resolved  # the lifecycle refuses it with its own message
            agent, revision = resolved
            if agent is None or not isinstance(revision, str):
                return agent, revision
            options: dict[str, Any] = {"ownership": caller.scope}
            if self.notifiers:
                options["notify"] = True
            hosted = agent.hosted(self.stores, definition_revision=revision, **options)
            return hosted, revision

        return create_agent_run_lifecycle(
            checkpoints=self.checkpoints, resolve_agent=resolve, restore_hooks=self.restore_hooks
        )

    async def _resolved(self, agent_id: str, revision: str | None) -> Any:
        """The host's answer for ``agent_id`` as ``(agent, revision)`` when it has that shape
        (the host's ``resolve_agent`` gets ``revision`` when it takes one)."""
        resolved = await call_resolve_agent(self.resolve_host_agent, agent_id, revision=revision)
        if isinstance(resolved, Mapping):
            return resolved.get("agent"), resolved.get("definition_revision")
        if isinstance(resolved, tuple) and len(resolved) == 2:
            return resolved[0], resolved[1]
        return resolved

    def worker_resolver(self) -> Callable[..., Any]:
        """The resolver the app's workers use: the host's (entered, when it is a factory),
        called with the run's revision when it takes one."""

        async def resolve(agent_id: str, *, revision: str | None = None) -> Any:
            return await self._resolved(agent_id, revision)

        return resolve

    async def agent_for(self, agent_id: str, revision: str | None = None) -> Any:
        """The host's agent alone, as the host built it (``None`` when the host does not know
        it): the pages read its redactor."""
        try:
            resolved = await self._resolved(agent_id, revision)
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
