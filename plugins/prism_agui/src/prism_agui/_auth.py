"""Who is calling: the host's ``authorize(request)`` or the default bearer-token check."""

from __future__ import annotations

import hmac
import inspect
import ipaddress
import os
from collections.abc import Callable, Mapping
from typing import Any

from starlette.requests import Request

from ._errors import Misdirected, NotAuthenticated

__all__ = ("TOKEN_ENV", "Authorize", "caller_scope", "default_authorize", "token_from_environment")

TOKEN_ENV = "PRISM_AGUI_TOKEN"

Authorize = Callable[[Request], Any]


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` names this machine only (``127.0.0.0/8``, ``::1``, ``localhost``)."""
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.partition(":")[0].rstrip(".")


def default_authorize(token: str | None) -> Authorize:
    """One unscoped caller behind ``token`` (``Authorization: Bearer TOKEN``).

    Without a token only loopback clients are served, and only requests whose ``Host`` is a
    loopback name or address (421 otherwise): a web page whose own name is rebound to
    127.0.0.1 still sends that name in ``Host``.
    """

    def authorize(request: Request) -> dict[str, str] | None:
        if token is None:
            client = request.client.host if request.client is not None else None
            if not is_loopback(client):
                return None
            host = request.headers.get("host")
            if host is None or not is_loopback(_host_name(host)):
                raise Misdirected(
                    f"without {TOKEN_ENV} this endpoint answers only requests addressed to "
                    "localhost or a loopback address"
                )
            return {}
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.encode(), token.encode()):
            return {}
        return None

    return authorize


def token_from_environment() -> str | None:
    """``PRISM_AGUI_TOKEN``, or ``None`` when unset or empty."""
    return os.environ.get(TOKEN_ENV) or None


async def caller_scope(authorize: Authorize, request: Request) -> dict[str, str] | None:
    """The caller's ownership scope (``None`` for the unscoped caller); 401 when unknown."""
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
