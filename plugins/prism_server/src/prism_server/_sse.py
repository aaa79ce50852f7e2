"""A resume as server-sent events: one ``event:``/``data:`` frame per run event.

The first event is awaited before the response starts, so a refused resume (stale, conflict,
invalid decision) still answers with its HTTP status and JSON error. The stream is consumed
in the task that handles the request, because the resumed run's task group lives there; a
watcher beside it listens for the client's ``http.disconnect`` and, when the client goes,
aborts the resumed run (an ASGI server does not fail a ``send`` to a client that has gone:
without the watcher the run would go on to its end).
"""

from __future__ import annotations

from typing import Any

import anyio
from starlette.types import Receive, Scope, Send

from prism_core import codec

from ._views import dumps_compact, result_json

__all__ = ("EventStreamResponse", "frame")


def frame(event_type: str, data: Any) -> bytes:
    """One SSE frame: ``event: TYPE`` and a single ``data:`` line of compact JSON."""
    return f"event: {event_type}\ndata: {dumps_compact(data)}\n\n".encode()


class EventStreamResponse:
    """Streams an already started resume stream (its ``first`` event in hand) to the client,
    then a closing ``result`` frame; a client that goes away aborts the resumed run."""

    def __init__(self, stream: Any, first: Any) -> None:
        self._stream = stream
        self._first = first

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as group:

                async def watch() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    # The run ends ``aborted`` (and says so in its checkpoint) in this
                    # response's own task; cancelling that task would abandon it instead.
                    self._stream.abort("client disconnected")

                group.start_soon(watch)
                await self._send_all(send)
                group.cancel_scope.cancel()
        finally:
            # Leaving the stream early (the client went away) aborts the resumed run.
            with anyio.CancelScope(shield=True):
                await self._stream.aclose()

    async def _send_all(self, send: Send) -> None:
        stream = self._stream
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream; charset=utf-8"),
                    (b"cache-control", b"no-store"),
                    (b"x-accel-buffering", b"no"),
                ],
            }
        )
        event = self._first
        while event is not None:
            data = codec.unstructure(event)
            await send(
                {
                    "type": "http.response.body",
                    "body": frame(data["type"], data),
                    "more_body": True,
                }
            )
            event = await anext(stream, None)
        result = stream.result
        tail = frame("result", result_json(result)) if result is not None else b""
        await send({"type": "http.response.body", "body": tail, "more_body": False})
