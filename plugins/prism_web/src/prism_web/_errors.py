"""The refusals every HTTP face makes before the kernel sees a request, decided once.

One table (:data:`REFUSALS`): the status, the class, the stable ``code`` and when it is raised.
The body is ``{"code", "message"}``; a face whose protocol has an error envelope of its own
(A2A's JSON-RPC) renders the same status and code in it. This module must not read a request:
the checks live in ``_hosts``, ``_authorize`` and ``_body``.
"""

from __future__ import annotations

from starlette.responses import JSONResponse

from prism_core import PrismError

__all__ = (
    "REFUSALS",
    "BadRequest",
    "Forbidden",
    "Misdirected",
    "NotAuthenticated",
    "PayloadTooLarge",
    "UnsupportedMediaType",
    "WebError",
    "error_body",
    "error_response",
)


class WebError(PrismError):
    """A request an HTTP face refuses before the kernel sees it; ``status`` is its HTTP
    status."""

    code = "ERR_PRISM_WEB"
    status = 400


class BadRequest(WebError):
    """A body that is not one JSON object: malformed JSON, a key repeated in any object at any
    depth, nesting deeper than the bound, or a value of the wrong shape."""

    code = "ERR_PRISM_WEB_BAD_REQUEST"
    status = 400


class NotAuthenticated(WebError):
    """``authorize`` named no caller (it answered ``None``)."""

    code = "ERR_PRISM_WEB_UNAUTHENTICATED"
    status = 401


class Forbidden(WebError):
    """A known caller this face refuses: raised by a host's ``authorize``, by the default
    ``authorize`` for a client that is not on this machine when no token is set, or by a face
    for a caller it does not serve (an agent whose own ``run_state`` names another owner)."""

    code = "ERR_PRISM_WEB_FORBIDDEN"
    status = 403


class PayloadTooLarge(WebError):
    """A body larger than the face's ``max_body_bytes`` (declared or streamed)."""

    code = "ERR_PRISM_WEB_BODY_TOO_LARGE"
    status = 413


class UnsupportedMediaType(WebError):
    """A body not declared ``Content-Type: application/json`` (a cross-site form post can only
    send form, multipart or plain-text bodies without a preflight no face grants)."""

    code = "ERR_PRISM_WEB_UNSUPPORTED_MEDIA_TYPE"
    status = 415


class Misdirected(WebError):
    """A request to a token-less face whose ``Host`` is not a loopback name (a page whose own
    DNS name was rebound to 127.0.0.1 still sends that name)."""

    code = "ERR_PRISM_WEB_MISDIRECTED"
    status = 421


#: The order a face checks a request in, and what each check refuses: the first refusal wins,
#: so every face answers one bad request with one status.
REFUSALS: tuple[tuple[int, type[WebError], str], ...] = (
    (421, Misdirected, "no token is set and Host is not a loopback name"),
    (403, Forbidden, "authorize refused the caller, or the face does not serve it"),
    (401, NotAuthenticated, "authorize named no caller"),
    (415, UnsupportedMediaType, "the body is not declared application/json"),
    (413, PayloadTooLarge, "the body is larger than max_body_bytes"),
    (400, BadRequest, "malformed JSON, a repeated key at any depth, nesting too deep"),
)


def error_body(exc: PrismError) -> dict[str, str]:
    """``{"code", "message"}`` of a refusal."""
    return {"code": exc.code, "message": str(exc)}


def error_response(exc: WebError) -> JSONResponse:
    """The refusal as an HTTP answer: its status, the body ``{"code", "message"}``, and the
    bearer challenge on a 401."""
    headers = {"www-authenticate": "Bearer"} if exc.status == 401 else None
    return JSONResponse(error_body(exc), status_code=exc.status, headers=headers)
