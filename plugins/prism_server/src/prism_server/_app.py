"""``create_app``: the JSON API over a host's stores and agents, and the console's routes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from prism_core import (
    NotifierConfigError,
    PrismError,
    StorePair,
    entered_resolver,
    list_agent_runs,
)
from prism_core.workers import is_resolver_factory
from prism_web import DEFAULT_MAX_BODY_BYTES, FaceWorkers, check_max_body_bytes, store_pair

from ._auth import Authorize, server_authorize, token_from_environment
from ._console import console_routes
from ._context import ServerContext
from ._errors import BadRequest
from ._resume import decisions_handler, events_handler, refusals, resume_handler
from ._views import summary_json

__all__ = ("DEFAULT_MAX_BODY_BYTES", "ServerContext", "create_app")

_RUN_STATUSES = ("running", "suspended", "succeeded", "failed", "aborted", "denied")


def _list_query(request: Request) -> dict[str, Any]:
    query = request.query_params
    status = query.get("status") or None
    if status is not None and status not in _RUN_STATUSES:
        raise BadRequest(f"status must be one of {', '.join(_RUN_STATUSES)}")
    recoverable_text = query.get("recoverable")
    recoverable: bool | None = None
    if recoverable_text:
        if recoverable_text not in ("true", "false", "1", "0"):
            raise BadRequest("recoverable must be true or false")
        recoverable = recoverable_text in ("true", "1")
    limit_text = query.get("limit") or "100"
    if not limit_text.isdigit() or not 1 <= int(limit_text) <= 1000:
        raise BadRequest("limit must be a whole number from 1 to 1000")
    return {
        "status": status,
        "recoverable": recoverable,
        "limit": int(limit_text),
        "cursor": query.get("cursor") or None,
    }


def api_routes(ctx: ServerContext) -> list[Route]:
    """``/api/runs``, ``/api/runs/{run_id}``, its ``decisions``, ``resume`` and ``events``."""

    @refusals
    async def list_runs(request: Request) -> Response:
        scope = (await ctx.caller(request, "api")).scope
        page = await list_agent_runs(ctx.checkpoints, ownership=scope, **_list_query(request))
        return JSONResponse(
            {
                "runs": [summary_json(run) for run in page.runs],
                "cursor": page.cursor,
                "unreadable": [{"key": u.key, "reason": u.reason} for u in page.unreadable],
            }
        )

    @refusals
    async def show_run(request: Request) -> Response:
        scope = (await ctx.caller(request, "api")).scope
        return JSONResponse(await ctx.detail(request.path_params["run_id"], scope))

    return [
        Route("/api/runs", list_runs, methods=["GET"]),
        Route("/api/runs/{run_id}", show_run, methods=["GET"]),
        Route("/api/runs/{run_id}/decisions", decisions_handler(ctx, "api"), methods=["POST"]),
        Route("/api/runs/{run_id}/resume", resume_handler(ctx, "api"), methods=["POST"]),
        Route("/api/runs/{run_id}/events", events_handler(ctx), methods=["GET"]),
    ]


def create_app(
    stores: StorePair | None = None,
    *,
    checkpoints: Any = None,
    sessions: Any = None,
    resolve_agent: Callable[[str], Any],
    authorize: Authorize | None = None,
    restore_hooks: Sequence[Any] = (),
    title: str = "Prism",
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    guardrail_packs: Callable[[Any], Any] | None = None,
    guardrails: Callable[[Any], Any] | None = None,
    workers: int = 1,
    lease_ms: int = 30000,
    notifiers: Sequence[Any] = (),
) -> Starlette:
    """The approval API and console over ``stores`` (a :class:`~prism_core.StorePair`; the
    ``checkpoints=`` and ``sessions=`` keywords are still taken instead).

    ``resolve_agent(agent_id)`` (sync or async) returns ``(agent, definition_revision)`` as for
    :func:`~prism_core.create_agent_run_lifecycle`; a resume runs the agent hosted on the stores
    for the caller (:meth:`~prism_core.Agent.hosted`). ``authorize(request)`` (sync or async)
    returns the caller: a :class:`~prism_core.Principal`, an ownership mapping (``{}`` for the
    unscoped tenant), ``None`` for 401, or raises ``AccessDenied`` for 403; every decision is
    audited with the caller's actor and channel (``"api"``, or ``"console"`` for the console's
    buttons). The default accepts the bearer token in ``PRISM_SERVER_TOKEN`` (or the console's
    cookie) and, without one, this machine only. A body larger than ``max_body_bytes`` (1 MiB)
    is refused (413).
    ``guardrail_packs(state)`` (sync or async), when given, returns the packs a resume of the
    run with stored ``state`` must be handed again: packs whose rules hold callables (``deny``
    predicates) are recorded in a checkpoint by identity only, and a resume that cannot
    reinstate them is refused (409). ``guardrails(state)`` (sync or async), when given,
    returns the run's own guards (the shape of the ``guardrails=`` run option) a resume of
    that run must be handed again; without it, a resume of a run that recorded guards of its
    own is refused (409, ``ERR_PRISM_RUN_GUARDRAILS``).

    Decisions are recorded and run by workers: the app runs ``workers`` of its own while it
    is served (its lifespan; ``0``: none, runs wait for another worker on the same stores),
    each claim under a ``lease_ms`` lease. ``resolve_agent`` may also be an async context
    manager factory yielding the resolver (``prism_core.entered_resolver``): the lifespan
    enters it once and leaves it on shutdown.

    ``notifiers`` (e.g. :class:`~prism_core.WebhookNotifier`): the runs the server decides
    notify (suspended, decided, expired, in doubt, finished), and the app's workers (with
    ``workers=0``, a deliverer of the app's own) deliver the stores' notifications to them
    while the app is served.
    """
    if not callable(resolve_agent):
        raise TypeError("resolve_agent must be callable(agent_id)")
    if authorize is not None and not callable(authorize):
        raise TypeError("authorize must be callable(request)")
    if guardrail_packs is not None and not callable(guardrail_packs):
        raise TypeError("guardrail_packs must be callable(state)")
    if guardrails is not None and not callable(guardrails):
        raise TypeError("guardrails must be callable(state)")
    check_max_body_bytes(max_body_bytes)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise TypeError("workers must be a whole number of in-process workers (0: none)")
    if isinstance(notifiers, str | bytes) or not all(
        callable(getattr(notifier, "deliver", None)) for notifier in notifiers
    ):
        raise NotifierConfigError("notifiers must each have an async deliver(notification)")
    pair = store_pair(stores, checkpoints=checkpoints, sessions=sessions)
    ctx = ServerContext(
        stores=pair,
        # A factory is entered by the lifespan, which puts its resolver here.
        resolve_agent=_not_entered if is_resolver_factory(resolve_agent) else resolve_agent,
        authorize=authorize or server_authorize(token_from_environment()),
        restore_hooks=restore_hooks,
        title=title,
        max_body_bytes=max_body_bytes,
        default_auth=authorize is None,
        guardrail_packs=guardrail_packs,
        guardrails=guardrails,
        notifiers=notifiers,
    )
    ctx.workers = FaceWorkers(
        pair,
        ctx.worker_resolver(),
        workers=workers,
        lease_ms=lease_ms,
        notifiers=notifiers,
        restore_hooks=ctx.restore_hooks,
        guardrail_packs=guardrail_packs,
        guardrails=guardrails,
    )
    # A factory resolver is entered by the lifespan, which starts the workers with it; any
    # other starts them with the first request too (an app mounted in another never sees its
    # own lifespan).
    ctx.start_workers_lazily = not is_resolver_factory(resolve_agent)
    app = Starlette(
        routes=[*api_routes(ctx), *console_routes(ctx)],
        lifespan=_lifespan(ctx, resolve_agent),
    )
    app.state.prism = ctx
    return app


def _not_entered(agent_id: str) -> Any:
    raise PrismError(
        "resolve_agent is a factory the app enters when it starts: serve the app with its "
        "lifespan (uvicorn does) before it resolves agents",
        code="ERR_PRISM_RESOLVER",
    )


def _lifespan(ctx: ServerContext, resolve_agent: Any) -> Callable[[Any], Any]:
    """While the app is served with its lifespan: the host's resolver entered when it is a
    factory (its workers then start at once, with it), the workers stopped on shutdown. An
    app mounted in another (whose lifespan never reaches it) starts its workers with its
    first request instead."""

    @asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        async with entered_resolver(resolve_agent) as resolver:
            ctx.resolve_host_agent = resolver
            ctx.workers.ensure_started()
            try:
                yield
            finally:
                await ctx.workers.aclose()

    return lifespan
