"""``create_app``: the JSON API over a host's stores and agents, and the console's routes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from prism_core import StorePair, list_agent_runs
from prism_web import DEFAULT_MAX_BODY_BYTES, check_max_body_bytes, store_pair

from ._auth import Authorize, server_authorize, token_from_environment
from ._console import console_routes
from ._context import ServerContext
from ._errors import BadRequest
from ._resume import refusals, resume_handler
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
    """``/api/runs``, ``/api/runs/{run_id}`` and ``/api/runs/{run_id}/resume``."""

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
        Route("/api/runs/{run_id}/resume", resume_handler(ctx, "api"), methods=["POST"]),
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
    pair = store_pair(stores, checkpoints=checkpoints, sessions=sessions)
    ctx = ServerContext(
        stores=pair,
        resolve_agent=resolve_agent,
        authorize=authorize or server_authorize(token_from_environment()),
        restore_hooks=restore_hooks,
        title=title,
        max_body_bytes=max_body_bytes,
        default_auth=authorize is None,
        guardrail_packs=guardrail_packs,
        guardrails=guardrails,
    )
    app = Starlette(routes=[*api_routes(ctx), *console_routes(ctx)])
    app.state.prism = ctx
    return app
