"""Shared pieces of the OpenAI provider tests: transcripts, a provider on the fake server, tools."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from prism_core import ToolDefinition
from prism_provider_openai import OpenAIProvider, create_openai_provider
from tests.fake_http import FakeHTTPServer, Reply, sse

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


def chunk(delta: dict[str, Any] | None, finish: str | None = None) -> dict[str, Any]:
    """One ``chat.completion.chunk`` as OpenAI streams it."""
    return {
        "id": "chatcmpl-CZs0dR7bT2kP9wQ4mN6vX1cY3zLa",
        "object": "chat.completion.chunk",
        "created": 1764554400,
        "model": "gpt-4.1-mini-2025-04-14",
        "system_fingerprint": "fp_6f2eabb9a5",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        "usage": None,
    }


def text_reply(*parts: str) -> Reply:
    """A streamed answer made of the text ``parts``."""
    first = chunk({"role": "assistant", "content": "", "refusal": None})
    return Reply(chunks=sse([first, *(chunk({"content": p}) for p in parts), chunk({}, "stop")]))


def tool_reply(call_id: str, name: str, *argument_parts: str) -> Reply:
    """A streamed single tool call whose arguments arrive in ``argument_parts``."""
    opening = {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": ""},
    }
    events = [chunk({"role": "assistant", "content": None, "tool_calls": [opening]})]
    events += [
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]})
        for part in argument_parts
    ]
    events.append(chunk({}, "tool_calls"))
    return Reply(chunks=sse(events))
