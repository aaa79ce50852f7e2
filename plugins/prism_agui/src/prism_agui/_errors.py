"""The endpoint's own refusals: HTTP answers before a stream starts, and the in-stream ones.

A request that cannot be read or has no caller is answered with an HTTP status and the body
``{"code", "message"}``, as ``prism_server`` answers. Everything after that is a stream of
AG-UI events, and a refusal there is a ``RUN_ERROR`` carrying the error's ``code``.
"""

from __future__ import annotations

from starlette.responses import JSONResponse

from prism_core import PrismError

__all__ = (
    "AccessDenied",
    "AguiError",
    "BadRequest",
    "InputRefused",
    "InterruptPending",
    "Misdirected",
    "NotAuthenticated",
    "PayloadTooLarge",
    "RunActive",
    "ThreadUnavailable",
    "UnsupportedMediaType",
    "error_response",
)


class AguiError(PrismError):
    """A request the AG-UI endpoint refuses before the core sees it."""

    code = "ERR_PRISM_AGUI"
    status = 400


class BadRequest(AguiError):
    """The body is not JSON, or not an AG-UI ``RunAgentInput``."""

    code = "ERR_PRISM_AGUI_BAD_REQUEST"
    status = 400


class NotAuthenticated(AguiError):
    """``authorize`` named no caller (``None``)."""

    code = "ERR_PRISM_AGUI_UNAUTHENTICATED"
    status = 401


class AccessDenied(AguiError):
    """Raised by an ``authorize`` callable for a known caller who may not use the agent, or
    when the caller's scope is not the one the agent's own ``run_state`` names."""

    code = "ERR_PRISM_AGUI_FORBIDDEN"
    status = 403


class PayloadTooLarge(AguiError):
    """The request body is larger than the endpoint's bound."""

    code = "ERR_PRISM_AGUI_BODY_TOO_LARGE"
    status = 413


class UnsupportedMediaType(AguiError):
    """A body not declared ``Content-Type: application/json`` (a cross-site form post)."""

    code = "ERR_PRISM_AGUI_UNSUPPORTED_MEDIA_TYPE"
    status = 415


class Misdirected(AguiError):
    """A request to the token-less loopback endpoint whose ``Host`` is not a loopback name."""

    code = "ERR_PRISM_AGUI_MISDIRECTED"
    status = 421


class InputRefused(AguiError):
    """The input has no user message to run, or content the agent cannot take (not text)."""

    code = "ERR_PRISM_AGUI_INPUT"


class ThreadUnavailable(AguiError):
    """The thread belongs to another caller, or its session was not started through this
    endpoint (its history is not the caller's to continue)."""

    code = "ERR_PRISM_AGUI_THREAD"


class InterruptPending(AguiError):
    """The thread's run waits for decisions: the next input must answer them with ``resume``."""

    code = "ERR_PRISM_AGUI_INTERRUPT_PENDING"


class RunActive(AguiError):
    """The thread's last run is still running (here or in a worker that died: the host
    continues such a run, never an AG-UI client)."""

    code = "ERR_PRISM_AGUI_RUN_ACTIVE"


def error_response(exc: AguiError) -> JSONResponse:
    """``{"code", "message"}`` with the error's HTTP status."""
    return JSONResponse({"code": exc.code, "message": str(exc)}, status_code=exc.status)
