"""Deciding through the server, and watching the run a worker then runs.

- ``POST /api/runs/{id}/decisions`` records a decision (:meth:`AgentRunLifecycle.decide`:
  validated exactly as a resume, audited, one compare-and-swap write) and answers 202 with the
  run's detail; no tool and no model turn runs in the request.
- ``POST /api/runs/{id}/resume`` (and the console's ``POST /runs/{id}/resume``) records the
  decision, then waits for the run's next stop, which a worker reaches (the server's own,
  ``prism serve --workers N``, or any other on the same stores), and answers as a resume
  always has; with ``Accept: text/event-stream`` it streams the run's events meanwhile.
- ``GET /api/runs/{id}/events`` streams the run's events up to its next stop, each with an
  ``id:``; ``Last-Event-ID`` (or ``?after=ID``) continues after that event.

The caller is settled first (421, 403, 401), then the body is read (415, 413, 400: see
:mod:`prism_web`); the audit names the caller's actor and channel, never what the body claims.
A client that goes away only stops watching: the run is the worker's.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from prism_core import PrismError, observation_point, observe_agent_run
from prism_web import read_json_object

from ._errors import BadRequest, error_response
from ._sse import ObservedStreamResponse, Outcome

if TYPE_CHECKING:
    from ._context import ServerContext

__all__ = ("Handler", "decisions_handler", "events_handler", "refusals", "resume_handler")

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


class _Recorded(NamedTuple):
    run_id: str
    scope: dict[str, str] | None
    #: The observation point taken just before the write: what follows is the worker's.
    point: str


async def _record(ctx: ServerContext, request: Request, channel: str) -> _Recorded:
    """Record the request's decision for its caller on ``channel``."""
    caller = await ctx.caller(request, channel)
    resume = await read_json_object(request, ctx.max_body_bytes)
    # The audit names the authorized caller and its door, never what the body claims.
    resume["actor"] = caller.actor
    resume["channel"] = caller.channel
    scope = caller.scope
    run_id = request.path_params["run_id"]
    ref = {"run_id": run_id}
    packs, guards = await ctx.handed_over(ref, scope)
    point = await observation_point(ctx.checkpoints, ctx.sessions, run_id, ownership=scope)
    await ctx.lifecycle_for(caller).decide(
        ref, resume, ownership=scope, guardrail_packs=packs, guardrails=guards
    )
    ctx.decided()
    return _Recorded(run_id, scope, point)


def decisions_handler(ctx: ServerContext, channel: str) -> Handler:
    """``POST /api/runs/{id}/decisions``: record, answer 202 with the run's detail."""

    @refusals
    async def decide_run(request: Request) -> Response:
        recorded = await _record(ctx, request, channel)
        return JSONResponse(await ctx.detail(recorded.run_id, recorded.scope), status_code=202)

    return decide_run


def resume_handler(ctx: ServerContext, channel: str) -> Handler:
    """The resume route of ``channel``: record, then the run's next stop as JSON, or its
    events until then as server-sent events with ``Accept: text/event-stream``."""

    @refusals
    async def resume_run(request: Request) -> Response:
        recorded = await _record(ctx, request, channel)
        observed = observe_agent_run(
            ctx.checkpoints,
            ctx.sessions,
            recorded.run_id,
            ownership=recorded.scope,
            after=recorded.point,
        )
        if "text/event-stream" in request.headers.get("accept", ""):
            return ObservedStreamResponse(observed, recorded.run_id)  # type: ignore[return-value]
        outcome = Outcome(recorded.run_id)
        async for event in observed:
            outcome.see(event)
        return JSONResponse(outcome.to_json())

    return resume_run


def events_handler(ctx: ServerContext) -> Handler:
    """``GET /api/runs/{id}/events``: the run's events up to its next stop, resumable."""

    @refusals
    async def run_events(request: Request) -> Response:
        caller = await ctx.caller(request, "api")
        run_id = request.path_params["run_id"]
        after = request.headers.get("last-event-id") or request.query_params.get("after")
        observed = observe_agent_run(
            ctx.checkpoints, ctx.sessions, run_id, ownership=caller.scope, after=after
        )
        try:
            # The first step reads the run: an absent run or a bad id answers in JSON.
            first = await anext(observed, None)
        except ValueError as exc:
            raise BadRequest(f"Last-Event-ID: {exc}") from None
        return ObservedStreamResponse(_prefixed(first, observed), run_id)  # type: ignore[return-value]

    return run_events


async def _prefixed(first: Any, rest: Any) -> Any:
    async with contextlib.aclosing(rest):
        if first is None:
            return
        yield first
        async for item in rest:
            yield item
