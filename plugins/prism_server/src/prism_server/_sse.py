"""A resume as server-sent events: one ``event:``/``data:`` frame per run event.

The first event is awaited before the response starts, so a refused resume (stale, conflict,
invalid decision) still answers with its HTTP status and JSON error. The stream is consumed
in the task that handles the request, because the resumed run's task group lives there.
"""

from __future__ import annotations

from typing import Any

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
        stream = self._stream
        try:
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
        finally:
            await stream.aclose()
