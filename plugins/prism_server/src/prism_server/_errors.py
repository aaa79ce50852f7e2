"""How refusals become HTTP answers: a status per error family, the body ``{"code", "message"}``."""

from __future__ import annotations

from starlette.responses import JSONResponse

from prism_core import (
    AgentDecisionError,
    AgentRunNotFoundError,
    AgentRunStateError,
    CheckpointConflictError,
    CheckpointRestoreError,
    InvalidCheckpointError,
    PrismError,
)

__all__ = (
    "AccessDenied",
    "BadRequest",
    "Misdirected",
    "NotAuthenticated",
    "PayloadTooLarge",
    "RunNotFound",
    "ServerError",
    "UnsupportedMediaType",
    "error_response",
    "status_for",
)


class ServerError(PrismError):
    """A request the server refuses before the core sees it."""

    code = "ERR_PRISM_SERVER"
    status = 400


class BadRequest(ServerError):
    """A malformed request: a body that is not a JSON object, a bad query parameter."""

    code = "ERR_PRISM_SERVER_BAD_REQUEST"
    status = 400


class NotAuthenticated(ServerError):
    """``authorize`` named no caller (``None``)."""

    code = "ERR_PRISM_SERVER_UNAUTHENTICATED"
    status = 401


class AccessDenied(ServerError):
    """Raised by an ``authorize`` callable for a known caller who may not use the server."""

    code = "ERR_PRISM_SERVER_FORBIDDEN"
    status = 403


class RunNotFound(ServerError):
    """No run with that id in the caller's scope (absent and foreign runs look the same)."""

    code = "ERR_PRISM_SERVER_NOT_FOUND"
    status = 404


class PayloadTooLarge(ServerError):
    """The request body is larger than the server's bound."""

    code = "ERR_PRISM_SERVER_BODY_TOO_LARGE"
    status = 413


class UnsupportedMediaType(ServerError):
    """A resume whose body is not declared ``Content-Type: application/json``."""

    code = "ERR_PRISM_SERVER_UNSUPPORTED_MEDIA_TYPE"
    status = 415


class Misdirected(ServerError):
    """A request to the token-less loopback server whose ``Host`` is not a loopback name."""

    code = "ERR_PRISM_SERVER_MISDIRECTED"
    status = 421


def status_for(exc: PrismError) -> int:
    """The HTTP status of a refusal."""
    if isinstance(exc, ServerError):
        return exc.status
    if isinstance(exc, InvalidCheckpointError):
        return 400
    if isinstance(exc, AgentDecisionError):
        return 422
    if isinstance(exc, AgentRunStateError):
        return 404 if isinstance(exc, AgentRunNotFoundError) else 409
    if isinstance(exc, CheckpointConflictError | CheckpointRestoreError):
        return 409
    return 500


def error_response(exc: PrismError) -> JSONResponse:
    """``{"code", "message"}`` with the status of :func:`status_for`."""
    status = status_for(exc)
    code = exc.code
    message = str(exc)
    if status == 404:
        code, message = RunNotFound.code, "no such run"
    elif status == 500:
        message = "the server could not complete the request"
    return JSONResponse({"code": code, "message": message}, status_code=status)
