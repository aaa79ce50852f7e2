"""Who is calling and as whom their runs are kept: the gate in front of the JSON-RPC route.

Every JSON-RPC request (every request but a read) passes the gate first, in the web layer's
order (:mod:`prism_web`): the caller (``authorize(request)`` as a
:class:`~prism_core.Principal` on the ``"a2a"`` channel: 421, 403, 401), then the body,
declared ``application/json`` (415: a cross-site form cannot post it), read as it streams up to
``max_body_bytes`` (413, the rest never read) and parsed to one JSON object with no key
repeated at any depth (400); the SDK then reads the same bytes. A refusal is the HTTP status
with a JSON-RPC error object whose ``data.code`` is the web layer's code. Every run,
checkpoint and context claim of the caller is kept under its ownership: a task of another
owner reads as absent. The agent card is public and passes no gate.

Without ``authorize``, the caller presents the token in ``PRISM_A2A_TOKEN`` as a bearer token;
without that token, only this machine is served; either way every such caller is one owner,
``DEFAULT_OWNERSHIP``, so runs started over A2A are kept apart from the host's other runs on
the same stores.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.routes import DefaultServerCallContextBuilder
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from prism_core import Principal
from prism_web import (
    WebError,
    authorized,
    default_authorize,
    parse_json_object,
    read_bounded,
    require_json,
    token_from_environment,
)

from ._runs import PrismRuns
from ._runs import Scope as OwnerScope

__all__ = (
    "CHANNEL",
    "DEFAULT_OWNERSHIP",
    "TOKEN_ENV",
    "Authorize",
    "Gate",
    "ScopedContextBuilder",
    "a2a_authorize",
    "call_principal",
    "call_scope",
    "default_token",
    "loopback_only",
)

#: The ownership of every run started over A2A when the host gives no ``authorize``.
DEFAULT_OWNERSHIP: Mapping[str, str] = {"channel": "a2a"}
#: The token the default ``authorize`` takes as ``Authorization: Bearer``.
TOKEN_ENV = "PRISM_A2A_TOKEN"
#: The channel every decision and run made through the endpoint is recorded on.
CHANNEL = "a2a"

Authorize = Callable[[Request], Any]

_PRINCIPAL_KEY = "prism_a2a.principal"
_READS = frozenset(("GET", "HEAD", "OPTIONS"))
#: The JSON-RPC error code each refusal is sent with: a body that is not one JSON object is a
#: parse error, every other refusal an invalid request.
_PARSE_ERROR, _INVALID_REQUEST = -32700, -32600


def a2a_authorize(token: str | None) -> Authorize:
    """The default ``authorize``: every caller is ``DEFAULT_OWNERSHIP``; with ``token``, the
    caller presents it as a bearer token (401 otherwise); without one, only this machine is
    served (421 for another ``Host``, 403 for a client elsewhere)."""
    return default_authorize(token, setting=TOKEN_ENV, ownership=DEFAULT_OWNERSHIP)


_LOOPBACK = a2a_authorize(None)


def loopback_only(request: Request) -> Any:
    """The token-less default ``authorize``: ``DEFAULT_OWNERSHIP`` for a caller on this
    machine that addresses a loopback name (421 for another ``Host``, 403 for a client
    elsewhere)."""
    return _LOOPBACK(request)


def _refusal(exc: WebError) -> JSONResponse:
    code = _PARSE_ERROR if exc.status == 400 else _INVALID_REQUEST
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": code, "message": f"{exc.code}: {exc}", "data": {"code": exc.code}},
    }
    headers = {"www-authenticate": "Bearer"} if exc.status == 401 else None
    return JSONResponse(body, status_code=exc.status, headers=headers)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the SDK the body the gate read, then the client's own."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


class Gate:
    """ASGI middleware: the caller and the body of every request that is not a read (the
    JSON-RPC route is the app's only ``POST``; the card is read with ``GET``), so it holds
    wherever the app is mounted."""

    def __init__(
        self, app: ASGIApp, *, authorize: Authorize, runs: PrismRuns, max_body_bytes: int
    ) -> None:
        self.app = app
        self.authorize = authorize
        self.runs = runs
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse the request (see the module) or pass it on with its caller and body."""
        if scope["type"] != "http" or scope["method"] in _READS:
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            caller = await authorized(self.authorize, request, channel=CHANNEL)
            self.runs.check_caller(caller)
            require_json(request)
            body = await read_bounded(request, self.max_body_bytes)
            parse_json_object(body)
        except WebError as exc:
            await _refusal(exc)(scope, receive, send)
            return
        scope[_PRINCIPAL_KEY] = caller
        await self.app(scope, _replay(body, receive), send)


class ScopedContextBuilder(DefaultServerCallContextBuilder):
    """The a2a-sdk's call context, carrying the caller the gate found for the request."""

    def build(self, request: Request) -> ServerCallContext:
        """The SDK's context with the caller in its state."""
        context = super().build(request)
        caller = request.scope.get(_PRINCIPAL_KEY)
        if not isinstance(caller, Principal):
            raise RuntimeError("a JSON-RPC request reached the handler without passing the gate")
        context.state[_PRINCIPAL_KEY] = caller
        return context


def call_principal(context: ServerCallContext) -> Principal:
    """The caller of a call context the gate let through (fails closed otherwise)."""
    caller = context.state.get(_PRINCIPAL_KEY)
    if not isinstance(caller, Principal):
        raise RuntimeError("a call context without its caller")
    return caller


def call_scope(context: ServerCallContext) -> OwnerScope:
    """The caller's ownership scope (``None``: the unscoped tenant)."""
    return call_principal(context).scope


def default_token() -> str | None:
    """``PRISM_A2A_TOKEN``, or ``None`` when unset or empty."""
    return token_from_environment(TOKEN_ENV)
