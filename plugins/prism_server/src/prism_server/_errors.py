"""How refusals become HTTP answers: a status per error family, the body ``{"code", "message"}``.

The refusals made before the kernel sees a request (400 401 403 413 415 421) are the web
layer's (:mod:`prism_web`), under the names this package has always exported; the server adds
its own 404 and maps the kernel's errors.
"""

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
from prism_web import (
    BadRequest,
    Misdirected,
    NotAuthenticated,
    PayloadTooLarge,
    UnsupportedMediaType,
    WebError,
    error_body,
)
from prism_web import Forbidden as AccessDenied

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

#: The kernel's refusal to host an agent for another owner than its ``run_state`` names.
_HOSTED_OWNER = "ERR_PRISM_HOSTED_OWNER"


class ServerError(WebError):
    """A request the server refuses before the core sees it, beyond the web layer's table."""

    code = "ERR_PRISM_SERVER"
    status = 400


class RunNotFound(ServerError):
    """No run with that id in the caller's scope (absent and foreign runs look the same)."""

    code = "ERR_PRISM_SERVER_NOT_FOUND"
    status = 404


def status_for(exc: PrismError) -> int:
    """The HTTP status of a refusal."""
    if isinstance(exc, WebError):
        return exc.status
    if isinstance(exc, InvalidCheckpointError):
        return 400
    if isinstance(exc, AgentDecisionError):
        return 422
    if isinstance(exc, AgentRunStateError):
        if exc.code == _HOSTED_OWNER:
            return 403
        return 404 if isinstance(exc, AgentRunNotFoundError) else 409
    if isinstance(exc, CheckpointConflictError | CheckpointRestoreError):
        return 409
    return 500


def error_response(exc: PrismError) -> JSONResponse:
    """``{"code", "message"}`` with the status of :func:`status_for` (and the bearer challenge
    on a 401)."""
    status = status_for(exc)
    body = error_body(exc)
    if status == 404:
        body = {"code": RunNotFound.code, "message": "no such run"}
    elif status == 500:
        body["message"] = "the server could not complete the request"
    headers = {"www-authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, headers=headers)
