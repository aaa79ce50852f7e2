"""Who is calling: the host's ``authorize(request)`` or the default bearer-token check, as a
:class:`~prism_core.Principal` on the ``"agui"`` channel (see :mod:`prism_web`)."""

from __future__ import annotations

from prism_web import Authorize, default_authorize
from prism_web import token_from_environment as _token

__all__ = ("CHANNEL", "TOKEN_ENV", "Authorize", "agui_authorize", "token_from_environment")

TOKEN_ENV = "PRISM_AGUI_TOKEN"
#: The channel every decision and run made through the endpoint is recorded on.
CHANNEL = "agui"


def token_from_environment() -> str | None:
    """``PRISM_AGUI_TOKEN``, or ``None`` when unset or empty."""
    return _token(TOKEN_ENV)


def agui_authorize(token: str | None) -> Authorize:
    """The default ``authorize``: one unscoped caller behind ``Authorization: Bearer TOKEN``;
    without a token, this machine only (421 for another ``Host``, 403 for a client
    elsewhere)."""
    return default_authorize(token, setting=TOKEN_ENV)
