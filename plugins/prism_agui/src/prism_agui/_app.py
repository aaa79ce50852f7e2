"""``create_agui_app``: one agent behind an AG-UI 1.0 endpoint, every run durable."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from prism_core import CheckpointStore

from ._agent import AgentFactory
from ._auth import Authorize, caller_scope, default_authorize, token_from_environment
from ._errors import AguiError, error_response
from ._input import read_run_input
from ._stream import AguiEventStream

__all__ = ("DEFAULT_MAX_BODY_BYTES", "create_agui_app")

#: Largest request body accepted. A ``RunAgentInput`` carries the frontend's whole
#: conversation, so the bound is wider than a resume body's.
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024


def create_agui_app(
    agent: Any,
    *,
    definition_revision: str,
    checkpoints: CheckpointStore,
    sessions: Any,
    authorize: Authorize | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> Starlette:
    """A Starlette app serving ``agent`` over AG-UI 1.0 at ``POST /``.

    Each ``RunAgentInput`` is answered with ``text/event-stream`` AG-UI events. ``threadId``
    is the Prism session id on ``sessions`` (created on first use); the input's last user
    message is the run's input; every run is durable, with every-turn checkpoints on
    ``checkpoints`` under ``definition_revision`` and the caller's ownership. The agent's own
    ``run_state`` (a mapping or ``RunStateOptions``) still decides when to suspend
    (``interrupt_before_tool``) and what rides a checkpoint. A suspension ends the AG-UI run
    with the interrupt outcome; an input whose ``resume`` answers the interrupts resumes it.

    ``authorize(request)`` (sync or async) returns the caller's ownership mapping (``{}`` for
    the unscoped caller), ``None`` for 401, or raises ``AccessDenied`` for 403. The default
    accepts ``Authorization: Bearer`` with the token in ``PRISM_AGUI_TOKEN`` and, without
    one, loopback clients only.
    """
    if authorize is not None and not callable(authorize):
        raise TypeError("authorize must be callable(request)")
    if (
        isinstance(max_body_bytes, bool)
        or not isinstance(max_body_bytes, int)
        or max_body_bytes < 1
    ):
        raise ValueError("max_body_bytes must be a positive integer")
    factory = AgentFactory(
        agent, checkpoints=checkpoints, sessions=sessions, revision=definition_revision
    )
    check_caller = authorize or default_authorize(token_from_environment())

    async def run_agent(request: Request) -> Response:
        try:
            caller = await caller_scope(check_caller, request)
            factory.check_caller(caller)
            run_input = await read_run_input(request, max_body_bytes)
        except AguiError as exc:
            return error_response(exc)
        return AguiEventStream(factory, run_input, caller)  # type: ignore[return-value]

    app = Starlette(routes=[Route("/", run_agent, methods=["POST"])])
    app.state.prism_agui = factory
    return app
