"""Who is calling: a host's ``authorize(request)`` turned into a :class:`~prism_core.Principal`,
and the one default every face uses without one.

``authorize(request)`` (sync or async) answers a ``Principal``, an ownership mapping (its
``actor``, else ``sub``, key names the actor and stays part of the ownership), or ``None``
(401); it raises :class:`~prism_web.Forbidden` for a caller it knows and refuses (403). A
principal with no actor is recorded under the face's channel name (``"api"``, ``"console"``,
``"agui"``, ``"a2a"``): an anonymous caller is one actor, never two.
"""

from __future__ import annotations

import hmac
import inspect
import os
from collections.abc import Callable, Mapping
from typing import Any

from starlette.requests import Request

from prism_core import Principal, coerce_principal

from ._errors import Forbidden, NotAuthenticated
from ._hosts import client_is_loopback, require_loopback_host

__all__ = ("Authorize", "authorized", "default_authorize", "token_from_environment")

#: ``authorize(request)``: sync or async, answering a ``Principal``, an ownership mapping or
#: ``None``.
Authorize = Callable[[Request], Any]


def token_from_environment(name: str) -> str | None:
    """The token in environment variable ``name``, or ``None`` when unset or empty."""
    return os.environ.get(name) or None


def default_authorize(
    token: str | None,
    *,
    setting: str,
    cookie: str | None = None,
    ownership: Mapping[str, str] | None = None,
) -> Authorize:
    """One caller behind ``token``, with ``ownership`` (``None``: the unscoped tenant).

    With a token, the caller presents it as ``Authorization: Bearer TOKEN`` (or, when
    ``cookie`` names one, in that cookie: the console's sign-in form sets it); anything else
    is unknown (401). Without a token, only this machine is served: a request whose ``Host``
    is not a loopback name is misdirected (421), a client elsewhere is refused (403).
    ``setting`` names what sets the token (``"PRISM_SERVER_TOKEN"``), for the refusals.
    """
    owner = dict(ownership) if ownership else None

    def authorize(request: Request) -> Principal | None:
        if token is None:
            require_loopback_host(request, setting=setting)
            if not client_is_loopback(request):
                raise Forbidden(f"without {setting} this endpoint serves callers on this machine")
            return Principal(owner)
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" and cookie is not None:
            given = request.cookies.get(cookie, "")
        elif scheme.lower() != "bearer":
            given = ""
        if given and hmac.compare_digest(given.encode(), token.encode()):
            return Principal(owner)
        return None

    return authorize


async def authorized(authorize: Authorize, request: Request, *, channel: str) -> Principal:
    """The caller of ``request`` on ``channel``: :class:`NotAuthenticated` when ``authorize``
    answers ``None``; its :class:`Forbidden` passes through. A malformed answer is the host's
    bug, an :class:`~prism_core.InvalidPrincipalError`."""
    answer = authorize(request)
    if inspect.isawaitable(answer):
        answer = await answer
    if answer is None:
        raise NotAuthenticated("authentication required")
    return coerce_principal(answer, channel=channel, default_actor=channel)
