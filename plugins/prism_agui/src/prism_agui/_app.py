"""``create_agui_app``: one agent behind an AG-UI 1.0 endpoint, every run durable."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from prism_core import StorePair
from prism_web import (
    DEFAULT_MAX_BODY_BYTES,
    WebError,
    authorized,
    check_max_body_bytes,
    error_response,
    store_pair,
)

from ._agent import AgentFactory
from ._auth import CHANNEL, Authorize, agui_authorize, token_from_environment
from ._input import read_run_input
from ._stream import AguiEventStream

__all__ = ("DEFAULT_MAX_BODY_BYTES", "create_agui_app")


def create_agui_app(
    agent: Any,
    stores: StorePair | None = None,
    *,
    definition_revision: str,
    checkpoints: Any = None,
    sessions: Any = None,
    authorize: Authorize | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    workers: int = 1,
    lease_ms: int = 30000,
    notifiers: Sequence[Any] = (),
) -> Starlette:
    """A Starlette app serving ``agent`` over AG-UI 1.0 at ``POST /``.

    Each ``RunAgentInput`` is answered with ``text/event-stream`` AG-UI events. ``stores`` is
    a :class:`~prism_core.StorePair` (the ``checkpoints=`` and ``sessions=`` keywords are still
    taken instead). ``threadId`` is the Prism session id (created on first use); the input's
    last user message is the run's input; every run is durable, the agent hosted for the
    caller (:meth:`~prism_core.Agent.hosted`: every-turn checkpoints under
    ``definition_revision`` and the caller's ownership). The agent's own ``run_state`` still
    decides when to suspend (``interrupt_before_tool``) and what rides a checkpoint. A
    suspension ends the AG-UI run with the interrupt outcome; an input whose ``resume``
    answers the interrupts resumes it.

    ``authorize(request)`` (sync or async) returns the caller: a
    :class:`~prism_core.Principal`, an ownership mapping (``{}`` for the unscoped caller),
    ``None`` for 401, or raises ``AccessDenied`` for 403. A run names the caller's actor as its
    starter and every decision is audited with the caller's actor and the ``"agui"`` channel.
    The default accepts ``Authorization: Bearer`` with the token in ``PRISM_AGUI_TOKEN`` and,
    without one, this machine only. A body larger than ``max_body_bytes`` (1 MiB) is refused
    (413).

    The requests only decide and watch: a new run runs in a task of the app's own, a decision
    arriving as ``resume`` is recorded and run by the app's ``workers`` (started with its
    first request; ``0``: none, any other worker on the same stores runs it), each claim
    under a ``lease_ms`` lease. A client that goes away stops watching; the run goes on.

    ``notifiers`` (e.g. :class:`~prism_core.WebhookNotifier`): the runs the app starts and
    decides notify (suspended, decided, expired, in doubt, finished), and the app's workers
    (or, with ``workers=0``, a deliverer of the app's own) deliver the stores' notifications
    to them.
    """
    if authorize is not None and not callable(authorize):
        raise TypeError("authorize must be callable(request)")
    check_max_body_bytes(max_body_bytes)
    pair = store_pair(stores, checkpoints=checkpoints, sessions=sessions)
    factory = AgentFactory(
        agent,
        stores=pair,
        revision=definition_revision,
        workers=workers,
        lease_ms=lease_ms,
        notifiers=notifiers,
    )
    check_caller = authorize or agui_authorize(token_from_environment())

    async def run_agent(request: Request) -> Response:
        try:
            caller = await authorized(check_caller, request, channel=CHANNEL)
            hosted = factory.for_caller(caller)
            run_input = await read_run_input(request, max_body_bytes)
        except WebError as exc:
            return error_response(exc)
        return AguiEventStream(factory, run_input, caller, hosted)  # type: ignore[return-value]

    app = Starlette(routes=[Route("/", run_agent, methods=["POST"])])
    app.state.prism_agui = factory
    return app
