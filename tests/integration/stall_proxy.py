"""A TCP proxy on loopback that can stall: it forwards to a server until told to hold every
byte, in both directions, as a black-holed network path would (connections stay open, nothing
arrives). It runs its own event loop in a thread, so a test's event loop never serves it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator

__all__ = ("StallProxy", "stall_proxy")


class StallProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target``; :meth:`stall` holds all traffic and
    :meth:`flow` lets it through again (both callable from any thread)."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._flowing = asyncio.Event()
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.base_events.Server | None = None
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready,), daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the stall proxy did not start")

    def stall(self) -> None:
        """Hold every byte from now on (in both directions, on every connection)."""
        self._loop.call_soon_threadsafe(self._flowing.clear)

    def flow(self) -> None:
        """Forward again, the held bytes first."""
        self._loop.call_soon_threadsafe(self._flowing.set)

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._flowing.set()
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._connect, "127.0.0.1", 0)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._loop.run_until_complete(self._shutdown())
            self._loop.close()

    async def _shutdown(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()
        for writer in list(self._writers):
            writer.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for writer in list(self._writers):
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def _hold(self) -> None:
        await self._flowing.wait()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                await self._hold()
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()
            self._writers.discard(writer)

    async def _connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        await self._hold()
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers.add(upstream_writer)
        self._loop.create_task(self._pipe(reader, upstream_writer))
        self._loop.create_task(self._pipe(upstream_reader, writer))

    def close(self) -> None:
        """Stop forwarding and the proxy's thread (traffic held is dropped)."""

        self._loop.call_soon_threadsafe(self._flowing.set)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@contextlib.contextmanager
def stall_proxy(host: str, port: int) -> Iterator[StallProxy]:
    """A :class:`StallProxy` to ``host:port``, closed on the way out."""
    proxy = StallProxy(host, port)
    try:
        yield proxy
    finally:
        proxy.close()
