"""A scripted HTTP/1.1 server on loopback, for testing provider SDKs over the real wire.

The server runs its own asyncio loop in a background thread, so it serves the official SDKs
whichever event loop (asyncio or trio) the test runs on. Each incoming request takes the next
scripted :class:`Reply`: a status, headers and a body sent in chunks (``Transfer-Encoding:
chunked``), optionally pausing between chunks or stalling for good, as a slow or hung model
server would. Every request is recorded (method, path, headers, JSON body), and the server
notes when a client closed the connection before the reply was complete.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs

__all__ = ("FakeHTTPServer", "Reply", "RecordedRequest", "named_sse", "serve", "sse", "sse_frames")


@attrs.frozen
class Reply:
    """One scripted response.

    ``chunks`` are sent one by one; a float among them pauses that many seconds. With
    ``stall=True`` the server stops sending after the last chunk and keeps the connection open
    until the client gives up.
    """

    status: int = 200
    chunks: tuple[bytes | float, ...] = ()
    headers: tuple[tuple[str, str], ...] = (("content-type", "text/event-stream"),)
    stall: bool = False


@attrs.frozen
class RecordedRequest:
    """What a client sent."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body decoded as JSON."""
        return json.loads(self.body)


def sse(events: Iterable[Any], *, done: bool = True) -> tuple[bytes, ...]:
    """Server-sent ``data:`` frames for ``events`` (dicts become JSON), then ``[DONE]``."""
    frames = [
        b"data: " + (e if isinstance(e, bytes) else json.dumps(e).encode()) + b"\n\n"
        for e in events
    ]
    if done:
        frames.append(b"data: [DONE]\n\n")
    return tuple(frames)


def named_sse(events: Iterable[dict[str, Any]]) -> tuple[bytes, ...]:
    """Named frames ``event: <type>`` + ``data: {...}`` (the event name is each dict's
    ``type``), as the Anthropic Messages API streams them: no ``[DONE]`` sentinel."""
    return tuple(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def sse_frames(text: str) -> tuple[bytes, ...]:
    """A recorded SSE transcript split into its frames (one chunk each), blank-line separated."""
    frames = [f.strip("\n") for f in text.replace("\r\n", "\n").split("\n\n")]
    return tuple((f + "\n\n").encode() for f in frames if f.strip())


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 429: "Too Many Requests"}


class FakeHTTPServer:
    """A loopback server replaying scripted replies; see the module docstring."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.disconnects = 0
        self._replies: deque[Reply] = deque()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.closed_early = threading.Event()
        self.port = 0

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def script(self, *replies: Reply) -> None:
        """Queue ``replies`` for the next requests, in order."""
        self._replies.extend(replies)

    def start(self) -> None:
        """Bind a random loopback port and start serving."""
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, "127.0.0.1", 0), self._loop
        )
        self._server = future.result(timeout=5)
        self.port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        """Close every connection and stop the loop thread."""

        async def shutdown() -> None:
            assert self._server is not None
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self._one_request(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _one_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        self.requests.append(RecordedRequest(method, path, headers, body))
        reply = self._replies.popleft() if self._replies else Reply(status=500)
        status_line = f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Status')}\r\n"
        out = [status_line.encode()]
        for name, value in reply.headers:
            out.append(f"{name}: {value}\r\n".encode())
        out.append(b"transfer-encoding: chunked\r\n\r\n")
        writer.write(b"".join(out))
        await writer.drain()
        try:
            for chunk in reply.chunks:
                if isinstance(chunk, float):
                    await asyncio.sleep(chunk)
                    continue
                writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                await writer.drain()
            if reply.stall:
                # Hold the connection open until the client closes it.
                await reader.read()
                raise ConnectionResetError("client closed a stalled reply")
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        except ConnectionError:
            self.disconnects += 1
            self.closed_early.set()
            raise
        return True

    def wait_for_disconnect(self, timeout: float = 5.0) -> bool:
        """Block until a client closed a connection mid-reply (or ``timeout`` passes)."""
        return self.closed_early.wait(timeout)


@contextmanager
def serve(*replies: Reply) -> Iterator[FakeHTTPServer]:
    """A started :class:`FakeHTTPServer` with ``replies`` queued; stopped on exit."""
    server = FakeHTTPServer()
    server.script(*replies)
    server.start()
    try:
        yield server
    finally:
        server.stop()
