"""Which requests name this machine: loopback clients and loopback ``Host`` names.

A face with no token trusts loopback clients, and a browser on this machine is one: a page
whose own DNS name is rebound to 127.0.0.1 reaches the face as same-origin, but its requests
still carry that name in ``Host``, which :func:`require_loopback_host` refuses (421).
"""

from __future__ import annotations

import ipaddress

from starlette.requests import Request

from ._errors import Misdirected

__all__ = ("client_is_loopback", "host_name", "is_loopback", "require_loopback_host")


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


def client_is_loopback(request: Request) -> bool:
    """Whether the request's peer is on this machine."""
    return is_loopback(request.client.host if request.client is not None else None)


def require_loopback_host(request: Request, *, setting: str = "a token") -> None:
    """:class:`~prism_web.Misdirected` unless ``Host`` names this machine (``localhost``,
    ``127.0.0.0/8``, ``::1``); a request without one is refused too. ``setting`` names what
    would serve other names (``"PRISM_SERVER_TOKEN"``)."""
    host = request.headers.get("host")
    if host is None or not is_loopback(host_name(host)):
        raise Misdirected(
            f"without {setting} this endpoint answers only requests addressed to localhost "
            "or a loopback address"
        )
