"""Who is calling: the host's ``authorize(request)`` or the default bearer-token check."""

from __future__ import annotations

import hmac
import inspect
import os
from collections.abc import Callable, Mapping
from typing import Any

from starlette.requests import Request

from ._errors import NotAuthenticated
from ._guards import is_loopback, require_loopback_host

__all__ = (
    "TOKEN_COOKIE",
    "TOKEN_ENV",
    "Authorize",
    "caller_actor",
    "caller_scope",
    "default_authorize",
    "is_loopback",
)

TOKEN_ENV = "PRISM_SERVER_TOKEN"
#: The console keeps the default token in this cookie after its sign-in form.
TOKEN_COOKIE = "prism_token"

Authorize = Callable[[Request], Any]


def default_authorize(token: str | None) -> Authorize:
    """One unscoped tenant behind ``token`` (a bearer header or the console's cookie).

    Without a token only loopback clients are served, and only requests whose ``Host`` is a
    loopback name or address (421 otherwise): ``prism serve`` refuses to bind elsewhere
    without one.
    """

    def authorize(request: Request) -> dict[str, str] | None:
        if token is None:
            client = request.client.host if request.client is not None else None
            if not is_loopback(client):
                return None
            require_loopback_host(request)
            return {}
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer":
            given = request.cookies.get(TOKEN_COOKIE, "")
        if given and hmac.compare_digest(given.encode(), token.encode()):
            return {}
        return None

    return authorize


def token_from_environment() -> str | None:
    """``PRISM_SERVER_TOKEN``, or ``None`` when unset or empty."""
    return os.environ.get(TOKEN_ENV) or None


def caller_actor(scope: Mapping[str, str] | None) -> str:
    """Who a resume's audit names: the caller's ownership mapping's ``actor`` key, else its
    ``sub``, else ``"api"`` (the unscoped tenant of the default token)."""
    if scope:
        for key in ("actor", "sub"):
            value = scope.get(key)
            if value:
                return value
    return "api"


async def caller_scope(authorize: Authorize, request: Request) -> dict[str, str] | None:
    """The caller's ownership scope (``None`` for the unscoped tenant); 401 when unknown."""
    scope = authorize(request)
    if inspect.isawaitable(scope):
        scope = await scope
    if scope is None:
        raise NotAuthenticated("authentication required")
    if not isinstance(scope, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in scope.items()
    ):
        raise TypeError("authorize must return a dict[str, str] or None")
    return dict(scope) or None
