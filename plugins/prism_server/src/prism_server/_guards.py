"""Checks that keep a web page on another site from driving the API through a browser.

A cross-site HTML form can only post ``application/x-www-form-urlencoded``, ``multipart`` or
``text/plain`` bodies; a JSON content type makes the browser ask first (a CORS preflight the
server never grants), so requiring it closes the resume endpoint to forged form posts. Without
a token the server trusts loopback clients, and a browser on this machine is one: a page whose
own DNS name is rebound to 127.0.0.1 would reach the server as same-origin, but its requests
still carry that name in ``Host``, which the loopback check refuses.
"""

from __future__ import annotations

import ipaddress

from starlette.requests import Request

from ._errors import Misdirected, UnsupportedMediaType

__all__ = ("host_name", "is_loopback", "require_json", "require_loopback_host")

JSON_MEDIA_TYPE = "application/json"


def require_json(request: Request) -> None:
    """:class:`UnsupportedMediaType` unless the body is declared ``application/json``."""
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != JSON_MEDIA_TYPE:
        raise UnsupportedMediaType(
            f"the body must be sent as Content-Type: {JSON_MEDIA_TYPE}"
            + (f", got {media_type[:60]!r}" if media_type else "")
        )


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


def host_name(host: str) -> str:
    """The name in a ``Host`` header value, without its port, brackets or trailing dot."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    name, _, _port = host.partition(":")
    return name.rstrip(".")


def require_loopback_host(request: Request) -> None:
    """:class:`Misdirected` unless ``Host`` names this machine (``localhost``, ``127.0.0.0/8``,
    ``::1``); a request without one is refused too."""
    host = request.headers.get("host")
    if host is None or not is_loopback(host_name(host)):
        raise Misdirected(
            "without PRISM_SERVER_TOKEN this server answers only requests addressed to "
            "localhost or a loopback address"
        )
