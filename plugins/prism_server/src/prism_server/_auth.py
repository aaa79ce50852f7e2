"""Who is calling: the host's ``authorize(request)`` or the default bearer-token check, as a
:class:`~prism_core.Principal` (see :mod:`prism_web`)."""

from __future__ import annotations

from prism_web import Authorize, default_authorize, is_loopback
from prism_web import token_from_environment as _token

__all__ = (
    "TOKEN_COOKIE",
    "TOKEN_ENV",
    "Authorize",
    "is_loopback",
    "server_authorize",
    "token_from_environment",
)

TOKEN_ENV = "PRISM_SERVER_TOKEN"
#: The console keeps the default token in this cookie after its sign-in form.
TOKEN_COOKIE = "prism_token"


def token_from_environment() -> str | None:
    """``PRISM_SERVER_TOKEN``, or ``None`` when unset or empty."""
    return _token(TOKEN_ENV)


def server_authorize(token: str | None) -> Authorize:
    """The default ``authorize``: one unscoped caller behind ``token`` (a bearer header or the
    console's cookie); without a token, this machine only (421 for another ``Host``, 403 for a
    client elsewhere): ``prism serve`` refuses to bind elsewhere without one."""
    return default_authorize(token, setting=TOKEN_ENV, cookie=TOKEN_COOKIE)
