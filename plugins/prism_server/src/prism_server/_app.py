"""``create_app``: the JSON API over a host's stores and agents, and the console's routes."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from prism_core import (
    CheckpointStore,
    PrismError,
    list_agent_runs,
)

from ._auth import Authorize, caller_actor, default_authorize, token_from_environment
from ._body import read_json_object
from ._console import console_routes
from ._context import ServerContext
from ._errors import BadRequest, error_response
from ._guards import require_json
from ._sse import EventStreamResponse
from ._views import result_json, summary_json

__all__ = ("DEFAULT_MAX_BODY_BYTES", "ServerContext", "create_app")

#: Largest request body the transport accepts; the core bounds decisions again.
DEFAULT_MAX_BODY_BYTES = 262144
_RUN_STATUSES = ("running", "suspended", "succeeded", "failed", "aborted", "denied")

Handler = Callable[[Request], Awaitable[Response]]


def refusals(handler: Handler) -> Handler:
    """Turn a refusal raised by a route into its ``{"code", "message"}`` answer."""

    @functools.wraps(handler)
    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except PrismError as exc:
            return error_response(exc)

    return wrapped


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
        scope = await ctx.scope(request)
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
        scope = await ctx.scope(request)
        return JSONResponse(await ctx.detail(request.path_params["run_id"], scope))

    @refusals
    async def resume_run(request: Request) -> Response:
        scope = await ctx.scope(request)
        require_json(request)
        resume = await read_json_object(request, ctx.max_body_bytes)
        # The audit names the authorized caller, never what the body claims.
        resume["actor"] = caller_actor(scope)
        ref = {"run_id": request.path_params["run_id"]}
        packs, guards = await ctx.handed_over(ref, scope)
        if "text/event-stream" in request.headers.get("accept", ""):
            stream = ctx.lifecycle.resume_stream(
                ref, resume, ownership=scope, guardrail_packs=packs, guardrails=guards
            )
            try:
                first = await anext(stream, None)
            except BaseException:
                await stream.aclose()
                raise
            return EventStreamResponse(stream, first)  # type: ignore[return-value]
        result = await ctx.lifecycle.resume(
            ref, resume, ownership=scope, guardrail_packs=packs, guardrails=guards
        )
        return JSONResponse(result_json(result))

    return [
        Route("/api/runs", list_runs, methods=["GET"]),
        Route("/api/runs/{run_id}", show_run, methods=["GET"]),
        Route("/api/runs/{run_id}/resume", resume_run, methods=["POST"]),
    ]


def create_app(
    *,
    checkpoints: CheckpointStore,
    sessions: Any,
    resolve_agent: Callable[[str], Any],
    authorize: Authorize | None = None,
    restore_hooks: Sequence[Any] = (),
    title: str = "Prism",
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    guardrail_packs: Callable[[Any], Any] | None = None,
    guardrails: Callable[[Any], Any] | None = None,
) -> Starlette:
    """The approval API and console over ``checkpoints`` and ``sessions``.

    ``resolve_agent(agent_id)`` (sync or async) returns ``(agent, definition_revision)`` as for
    :func:`~prism_core.create_agent_run_lifecycle`; the agent runs on ``sessions``.
    ``authorize(request)`` (sync or async) returns the caller's ownership mapping (``{}`` for
    the unscoped tenant), ``None`` for 401, or raises ``AccessDenied`` for 403. The default
    accepts the bearer token in ``PRISM_SERVER_TOKEN`` and, without one, loopback clients only.
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
    if (
        isinstance(max_body_bytes, bool)
        or not isinstance(max_body_bytes, int)
        or max_body_bytes < 1
    ):
        raise ValueError("max_body_bytes must be a positive integer")
    ctx = ServerContext(
        checkpoints=checkpoints,
        sessions=sessions,
        resolve_agent=resolve_agent,
        authorize=authorize or default_authorize(token_from_environment()),
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
