"""A webhook receiver on loopback: the standard library's ``http.server`` in a thread.

It records every POST (headers and body) and answers each with the next scripted status
(200 once the script is used up), verifying nothing itself: the tests check the signature the
way a receiver would, with :func:`signature_of`. Used as a context manager, it listens on a
free port of 127.0.0.1 and shuts down on the way out.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections import deque
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = ("Delivery", "Receiver", "signature_of")

#: Largest body the receiver reads.
MAX_BODY = 1 << 20


def signature_of(body: bytes, secret: str) -> str:
    """What ``X-Prism-Signature`` must be for ``body``: ``sha256=`` and the hex HMAC."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class Delivery:
    """One POST the receiver got."""

    def __init__(self, path: str, headers: dict[str, str], body: bytes, status: int) -> None:
        self.path = path
        self.headers = headers
        self.body = body
        self.status = status

    def json(self) -> Any:
        """The body as JSON."""
        return json.loads(self.body)


class Receiver:
    """A loopback webhook receiver (see the module)."""

    def __init__(self, statuses: Iterable[int] = ()) -> None:
        self.statuses: deque[int] = deque(statuses)
        self.deliveries: list[Delivery] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(min(length, MAX_BODY))
                with receiver._lock:
                    status = receiver.statuses.popleft() if receiver.statuses else 200
                    receiver.deliveries.append(
                        Delivery(self.path, dict(self.headers.items()), body, status)
                    )
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: Any) -> None:
                return  # quiet

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """Where to POST."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/hooks/prism"

    def accepted(self) -> list[Delivery]:
        """The deliveries answered with a 2xx."""
        with self._lock:
            return [d for d in self.deliveries if 200 <= d.status < 300]

    def wait_for(self, count: int, *, seconds: float = 60.0) -> list[Delivery]:
        """Block until ``count`` deliveries were accepted (``AssertionError`` after
        ``seconds``), then return them all."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            got = self.accepted()
            if len(got) >= count:
                return got
            time.sleep(0.05)
        raise AssertionError(f"got {len(self.accepted())} deliveries, waited for {count}")

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=30)
