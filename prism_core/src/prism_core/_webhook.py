"""``WebhookNotifier``: a notification as a signed JSON POST.

The body is the notification's canonical JSON (:meth:`~._notification.Notification.to_json`,
sorted keys, UTF-8), the same bytes on every attempt; ``X-Prism-Delivery`` carries its id and
``X-Prism-Signature`` is ``sha256=`` and the hex HMAC-SHA256 of those bytes under the shared
secret. A 2xx answer delivers it; anything else, a refused connection or a timeout raises, and
the deliverer retries later with the same id.

The POST goes through a :class:`WebhookTransport`. The default one uses the standard library
(``http.client`` in a worker thread, bounded by ``timeout_ms``, no redirect followed, at most
64 KiB of the answer read and dropped), so the kernel keeps its short dependency list; a
host that already runs an HTTP client passes its own transport (a few lines over
``httpx.AsyncClient``, say).

It must not read or write a store: it sends what it is handed.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Collection, Mapping
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

import anyio
import anyio.to_thread

from ._error_base import PrismError
from ._notification import Notification, NotifierConfigError, check_events
from .codec import dumps

__all__ = (
    "NotifierConfigError",
    "WebhookDeliveryError",
    "WebhookNotifier",
    "WebhookTransport",
    "sign_body",
)

#: Most bytes of a receiver's answer read (and dropped) before the connection is closed.
MAX_ANSWER_BYTES = 65536
#: Longest ``timeout_ms``.
MAX_TIMEOUT_MS = 600_000


class WebhookDeliveryError(PrismError):
    """The receiver did not take the notification (a status other than 2xx, a refused
    connection, a timeout); the deliverer tries again later."""

    code = "ERR_PRISM_WEBHOOK_DELIVERY"


def sign_body(body: bytes, secret: str | bytes) -> str:
    """The ``X-Prism-Signature`` of ``body``: ``"sha256="`` and the hex HMAC-SHA256 of the
    body's bytes under ``secret`` (UTF-8 when it is text)."""
    key = secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


@runtime_checkable
class WebhookTransport(Protocol):
    """Sends one POST and answers the HTTP status; raises when there is no answer."""

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], *, seconds: float
    ) -> int:
        """POST ``body`` with ``headers`` to ``url`` within ``seconds``; the HTTP status."""
        ...


class StdlibTransport:
    """The default transport: ``http.client`` in a worker thread (see the module)."""

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], *, seconds: float
    ) -> int:
        """POST ``body`` to ``url``; the status (``OSError`` or ``TimeoutError`` without one)."""
        with anyio.fail_after(seconds + 1):
            return await anyio.to_thread.run_sync(
                _post, url, body, dict(headers), seconds, abandon_on_cancel=True
            )


def _post(url: str, body: bytes, headers: dict[str, str], timeout: float) -> int:
    # Deferred: http.client (and the email parser it loads) costs ~19 ms of start-up; only a
    # process that sends a webhook pays it.
    import http.client
    import ssl

    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        context = ssl.create_default_context()
        connection = http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
    else:
        connection = http.client.HTTPConnection(host, port, timeout=timeout)
    target = parts.path or "/"
    if parts.query:
        target = f"{target}?{parts.query}"
    try:
        connection.request("POST", target, body=body, headers=headers)
        answer = connection.getresponse()
        answer.read(MAX_ANSWER_BYTES)
        return answer.status
    finally:
        connection.close()


def _check_url(url: Any) -> str:
    if not isinstance(url, str):
        raise NotifierConfigError("url must be an http:// or https:// URL")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a malformed port raises here
    except ValueError as exc:
        raise NotifierConfigError(f"url is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise NotifierConfigError("url must be an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise NotifierConfigError("url must not carry credentials; sign with the secret")
    if parts.fragment:
        raise NotifierConfigError("url must not have a fragment")
    return url


class WebhookNotifier:
    """POSTs each notification as signed JSON to ``url`` (see the module).

    ``secret`` (text or bytes, not empty) signs every body; ``events`` keeps only those
    events (``None``: all of ``"suspended"``, ``"decided"``, ``"expired"``, ``"in_doubt"``,
    ``"finished"``); ``timeout_ms`` bounds one attempt; ``transport`` sends the POST (the
    standard library's by default). A malformed option raises :class:`NotifierConfigError`.
    """

    def __init__(
        self,
        url: str,
        *,
        secret: str | bytes,
        events: Collection[str] | None = None,
        timeout_ms: int = 5000,
        transport: WebhookTransport | None = None,
    ) -> None:
        self.url = _check_url(url)
        if not isinstance(secret, str | bytes) or not secret:
            raise NotifierConfigError("secret must be a non-empty string or bytes")
        self._secret = secret
        try:
            self.events = check_events(events)
        except ValueError as exc:
            raise NotifierConfigError(str(exc)) from None
        if (
            isinstance(timeout_ms, bool)
            or not isinstance(timeout_ms, int)
            or not 1 <= timeout_ms <= MAX_TIMEOUT_MS
        ):
            raise NotifierConfigError(f"timeout_ms must be an integer in 1..{MAX_TIMEOUT_MS}")
        self.timeout_ms = timeout_ms
        if transport is not None and not callable(getattr(transport, "post", None)):
            raise NotifierConfigError("transport must have an async post(url, body, headers)")
        self.transport: WebhookTransport = transport or StdlibTransport()
        #: Stays the same for the same URL, so a retry knows this receiver has a notification.
        self.name = "webhook:" + hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]

    def __repr__(self) -> str:
        # The URL's path may hold a token of the receiver's: only where it goes is shown.
        parts = urlsplit(self.url)
        return f"WebhookNotifier({parts.scheme}://{parts.netloc}/…)"

    def request(self, notification: Notification) -> tuple[bytes, dict[str, str]]:
        """The body and headers one attempt sends for ``notification``."""
        body = dumps(notification.to_json())
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "prism-webhook/1",
            "X-Prism-Delivery": notification.id,
            "X-Prism-Event": notification.event,
            "X-Prism-Signature": sign_body(body, self._secret),
        }
        return body, headers

    async def deliver(self, notification: Notification) -> None:
        """POST ``notification``; :class:`WebhookDeliveryError` unless the answer is 2xx."""
        body, headers = self.request(notification)
        seconds = self.timeout_ms / 1000
        try:
            status = await self.transport.post(self.url, body, headers, seconds=seconds)
        except Exception as exc:  # the transport's failure, whatever it is, is retried
            raise WebhookDeliveryError(
                f"notification {notification.id}: no answer from the webhook "
                f"({type(exc).__name__}: {exc})"
            ) from exc
        if not 200 <= status < 300:
            raise WebhookDeliveryError(
                f"notification {notification.id}: the webhook answered {status}"
            )
