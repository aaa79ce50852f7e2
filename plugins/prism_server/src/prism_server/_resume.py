"""A resume through the server: the JSON API's ``POST /api/runs/{id}/resume`` and the console's
``POST /runs/{id}/resume`` are one handler on two channels (``"api"`` and ``"console"``).

The caller is settled first (421, 403, 401), then the body is read (415, 413, 400: see
:mod:`prism_web`); the audit names the caller's actor and channel, never what the body claims,
and the resume runs with the host's agent hosted for the caller's ownership.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from prism_core import PrismError
from prism_web import read_json_object

from ._errors import error_response
from ._sse import EventStreamResponse
from ._views import result_json

if TYPE_CHECKING:
    from ._context import ServerContext

__all__ = ("Handler", "refusals", "resume_handler")

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


def resume_handler(ctx: ServerContext, channel: str) -> Handler:
    """The resume route of ``channel``: JSON, or server-sent events with ``Accept:
    text/event-stream``."""

    @refusals
    async def resume_run(request: Request) -> Response:
        caller = await ctx.caller(request, channel)
        resume = await read_json_object(request, ctx.max_body_bytes)
        # The audit names the authorized caller and its door, never what the body claims.
        resume["actor"] = caller.actor
        resume["channel"] = caller.channel
        scope = caller.scope
        ref = {"run_id": request.path_params["run_id"]}
        packs, guards = await ctx.handed_over(ref, scope)
        lifecycle = ctx.lifecycle_for(caller)
        if "text/event-stream" in request.headers.get("accept", ""):
            stream = lifecycle.resume_stream(
                ref, resume, ownership=scope, guardrail_packs=packs, guardrails=guards
            )
            try:
                first = await anext(stream, None)
            except BaseException:
                await stream.aclose()
                raise
            return EventStreamResponse(stream, first)  # type: ignore[return-value]
        result = await lifecycle.resume(
            ref, resume, ownership=scope, guardrail_packs=packs, guardrails=guards
        )
        return JSONResponse(result_json(result))

    return resume_run
