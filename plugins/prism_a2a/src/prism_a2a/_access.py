"""Who is calling and as whom their runs are kept: the gate in front of the JSON-RPC route.

Every JSON-RPC request (every request but a read) passes the gate first: its body must be
declared ``application/json`` (a cross-site form can only post ``text/plain``, form or
multipart bodies, so a web page in a browser cannot drive the endpoint), and
``authorize(request)`` names the caller's ownership scope. Every run, checkpoint and context
claim of that caller is kept under it: a task of another owner reads as absent. The agent card
is public and passes no gate.

Without ``authorize``, every caller on this machine is one owner, ``DEFAULT_OWNERSHIP``, and
callers elsewhere (or requests addressed to a name that is not a loopback one) are refused:
runs started over A2A are then kept apart from the host's other runs on the same stores.
"""

from __future__ import annotations

import inspect
import ipaddress
from collections.abc import Callable, Mapping
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.routes import DefaultServerCallContextBuilder
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ._errors import A2AEndpointError, AccessDenied, NotAuthenticated, UnsupportedMediaType
from ._runs import Scope as OwnerScope

__all__ = (
    "DEFAULT_OWNERSHIP",
    "Authorize",
    "Gate",
    "ScopedContextBuilder",
    "call_scope",
    "loopback_only",
)

#: The ownership of every run started over A2A when the host gives no ``authorize``.
DEFAULT_OWNERSHIP: Mapping[str, str] = {"channel": "a2a"}

Authorize = Callable[[Request], Any]

_SCOPE_KEY = "prism_a2a.scope"
_READS = frozenset(("GET", "HEAD", "OPTIONS"))


def _is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(header: str) -> str:
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.partition(":")[0].rstrip(".")


def loopback_only(request: Request) -> dict[str, str]:
    """The default ``authorize``: ``DEFAULT_OWNERSHIP`` for a caller on this machine that
    addressed a loopback name; :class:`AccessDenied` for anyone else."""
    client = request.client.host if request.client is not None else None
    host = request.headers.get("host")
    if not _is_loopback(client) or host is None or not _is_loopback(_host_name(host)):
        raise AccessDenied(
            "without authorize= this endpoint serves only callers on this machine that "
            "address it as localhost or a loopback address"
        )
    return dict(DEFAULT_OWNERSHIP)


async def _caller_scope(authorize: Authorize, request: Request) -> OwnerScope:
    scope = authorize(request)
    if inspect.isawaitable(scope):
        scope = await scope
    if scope is None:
        raise NotAuthenticated("authentication required")
    if not isinstance(scope, Mapping) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in scope.items()
    ):
        raise TypeError("authorize must return a dict[str, str] or None")
    return dict(scope) or None


def _media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";", 1)[0].strip().lower()


class Gate:
    """ASGI middleware: the media type and the caller's scope for every request that is not a
    read (the JSON-RPC route is the app's only ``POST``; the card is read with ``GET``), so it
    holds wherever the app is mounted."""

    def __init__(self, app: ASGIApp, *, authorize: Authorize) -> None:
        self.app = app
        self.authorize = authorize

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse the request with ``{"code", "message"}`` or pass it on with its scope."""
        if scope["type"] != "http" or scope["method"] in _READS:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        try:
            media_type = _media_type(request)
            if media_type != "application/json":
                raise UnsupportedMediaType(
                    "JSON-RPC requests must be sent as Content-Type: application/json"
                    + (f", got {media_type[:60]!r}" if media_type else "")
                )
            owner = await _caller_scope(self.authorize, request)
        except A2AEndpointError as exc:
            answer = JSONResponse({"code": exc.code, "message": str(exc)}, status_code=exc.status)
            await answer(scope, receive, send)
            return
        scope[_SCOPE_KEY] = (owner,)
        await self.app(scope, receive, send)


class ScopedContextBuilder(DefaultServerCallContextBuilder):
    """The a2a-sdk's call context, carrying the scope the gate found for the request."""

    def build(self, request: Request) -> ServerCallContext:
        """The SDK's context with the caller's scope in its state."""
        context = super().build(request)
        gated = request.scope.get(_SCOPE_KEY)
        if not isinstance(gated, tuple):
            raise RuntimeError("a JSON-RPC request reached the handler without passing the gate")
        context.state[_SCOPE_KEY] = gated
        return context


def call_scope(context: ServerCallContext) -> OwnerScope:
    """The caller's scope of a call context the gate let through (fails closed otherwise)."""
    gated = context.state.get(_SCOPE_KEY)
    if not isinstance(gated, tuple):
        raise RuntimeError("a call context without the caller's scope")
    scope: OwnerScope = gated[0]
    return scope
