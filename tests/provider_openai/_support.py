"""Shared pieces of the OpenAI provider tests: transcripts, a provider on the fake server, tools."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from prism_core import ToolDefinition
from prism_provider_openai import OpenAIProvider, create_openai_provider
from tests.fake_http import FakeHTTPServer, Reply

TRANSCRIPTS = Path(__file__).parent / "transcripts"

#: The key the tests send; it must never appear in an error a host sees.
API_KEY = "sk-proj-PrismTestKey-9f8e7d6c5b4a3210"

MODEL = "openai:gpt-4.1-mini"

#: The SDK stops reading at ``data: [DONE]`` (and on close) with its SSE and HTTP reader
#: generators still suspended, leaving them to the event loop's finaliser; trio finalises them
#: but warns. Only the SDK's HTTP stack is exempt: Prism's own generators are closed explicitly.
SDK_STREAM_FINALISER = pytest.mark.filterwarnings(
    r"ignore:Async generator '(openai|httpx2|httpcore2)\.:ResourceWarning"
)

ADD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
}


def frames(name: str, *, pause: float = 0.0) -> tuple[bytes | float, ...]:
    """The SSE frames of a recorded transcript, one chunk each (``pause`` seconds apart)."""
    raw = (TRANSCRIPTS / f"{name}.sse").read_bytes()
    out: list[bytes | float] = []
    for frame in raw.split(b"\n\n"):
        if frame.strip():
            if pause and out:
                out.append(pause)
            out.append(frame + b"\n\n")
    return tuple(out)


def replay(name: str, *, pause: float = 0.0, **reply: Any) -> Reply:
    """A 200 reply replaying the transcript ``name``."""
    return Reply(chunks=frames(name, pause=pause), **reply)


def error_reply(status: int, message: str, *, code: str | None = None, **headers: str) -> Reply:
    """A JSON error response shaped like OpenAI's."""
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None}}
    body["error"]["code"] = code
    return Reply(
        status=status,
        chunks=(json.dumps(body).encode(),),
        headers=(("content-type", "application/json"), *headers.items()),
    )


def provider_for(server: FakeHTTPServer, **options: Any) -> OpenAIProvider:
    """A provider talking to ``server`` with the test key."""
    return create_openai_provider(api_key=API_KEY, base_url=server.base_url + "/v1", **options)


def add_tool(log: list[tuple[str, dict[str, Any]]] | None = None) -> ToolDefinition:
    """``add(a, b)``, recording each call in ``log``."""

    def execute(args: dict[str, Any], context: Any) -> Any:
        if log is not None:
            log.append((context.tool_call_id, dict(args)))
        return {"sum": args["a"] + args["b"]}

    return ToolDefinition(
        "add", execute, description="Add two numbers.", parameters=ADD_SCHEMA, effect="read"
    )


def types(events: Sequence[Any]) -> list[str]:
    """The ``type`` of each event."""
    return [e.type for e in events]
