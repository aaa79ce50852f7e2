"""A run's events as server-sent events, observed from the stores while a worker runs it.

Each frame carries the event's ``id:`` (see :func:`prism_core.observe_agent_run`), so a client
that lost the connection reconnects with ``Last-Event-ID`` (or ``?after=ID``) and gets what it
missed from the stored transcript, once. The stream ends at the run's next stop with a closing
``result`` frame. A client that goes away only stops the watching: the run goes on in its
worker to its next stop, and nothing is aborted (a watcher beside the stream listens for the
client's ``http.disconnect``, since an ASGI server does not fail a ``send`` to a client that
has gone).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
from starlette.types import Receive, Scope, Send

from prism_core import ObservedEvent, codec

from ._views import dumps_compact

__all__ = ("ObservedStreamResponse", "Outcome", "frame")


def frame(event_type: str, data: Any, event_id: str | None = None) -> bytes:
    """One SSE frame: ``id:`` (when given), ``event: TYPE`` and one ``data:`` line of
    compact JSON."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event_type}\ndata: {dumps_compact(data)}\n\n".encode()


class Outcome:
    """What an observation saw of the run's stop: the answer a resume gives (status, the
    last answer's text, the version, the stop reason or error)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.session_id: str | None = None
        self.text = ""
        self.status: str | None = None
        self.version: int | None = None
        self.stop_reason: str | None = None
        self.error: dict[str, Any] | None = None

    def see(self, observed: ObservedEvent) -> None:
        """Take what ``observed`` says about the run's answer or its stop."""
        event: Any = observed.event
        self.session_id = event.session_id
        kind = event.type
        if kind == "message_finished":
            self.text = event.message.text
        elif kind == "agent_finished":
            self.status, self.stop_reason = "succeeded", event.stop_reason
        elif kind == "agent_suspended":
            self.status, self.version = "suspended", event.version
        elif kind == "agent_denied":
            self.status, self.version = "denied", event.version
        elif kind == "error":
            self.status = event.status
            self.error = {"code": event.error.code, "message": event.error.message}
        if "v" in observed.id:
            self.version = int(observed.id.rsplit("v", 1)[1])

    def to_json(self) -> dict[str, Any]:
        """The answer, in the shape the resume route has always given."""
        return {
            "run_id": self.run_id,
            "session_id": self.session_id,
            "status": self.status,
            "text": self.text,
            "version": self.version,
            "stop_reason": self.stop_reason,
            "error": self.error,
        }


class ObservedStreamResponse:
    """Streams observed events to the client with their ids, then a closing ``result``
    frame; a client that goes away stops the observation only."""

    def __init__(self, observed: AsyncIterator[ObservedEvent], run_id: str) -> None:
        self._observed = observed
        self._outcome = Outcome(run_id)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                # The client went: stop watching. The run is its worker's, not ours.
                group.cancel_scope.cancel()

            group.start_soon(watch)
            try:
                await self._send_all(send)
            finally:
                await self._observed.aclose()  # type: ignore[attr-defined]
            group.cancel_scope.cancel()

    async def _send_all(self, send: Send) -> None:
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
        async for observed in self._observed:
            self._outcome.see(observed)
            data = codec.unstructure(observed.event)
            await send(
                {
                    "type": "http.response.body",
                    "body": frame(data["type"], data, observed.id),
                    "more_body": True,
                }
            )
        tail = frame("result", self._outcome.to_json())
        await send({"type": "http.response.body", "body": tail, "more_body": False})
