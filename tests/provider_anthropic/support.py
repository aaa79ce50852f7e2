"""Shared pieces of the Anthropic provider tests: transcripts, replies and agents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prism_core import Agent, ToolDefinition, create_agent
from prism_provider_anthropic import create_anthropic_provider
from tests.fake_http import Reply, sse_frames

TRANSCRIPTS = Path(__file__).parent / "transcripts"
#: A fake key: tests assert it reaches the server and never an error message.
API_KEY = "sk-ant-api03-test-KEY-0123456789abcdef"
MODEL = "anthropic:claude-sonnet-4-6"


def transcript(name: str) -> tuple[bytes, ...]:
    """The frames of a recorded Messages-API stream in ``transcripts/<name>.sse``."""
    return sse_frames((TRANSCRIPTS / f"{name}.sse").read_text(encoding="utf-8"))


def stream_reply(name: str, **kw: Any) -> Reply:
    """A 200 ``text/event-stream`` reply replaying a transcript."""
    return Reply(chunks=transcript(name), **kw)


def error_reply(status: int, kind: str, message: str, *headers: tuple[str, str]) -> Reply:
    """A JSON error response shaped like the API's."""
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_1"}
    return Reply(
        status=status,
        chunks=(json.dumps(body).encode(),),
        headers=(("content-type", "application/json"), *headers),
    )


def weather_tool(log: list[Any]) -> ToolDefinition:
    """A side-effect-free tool that records each call."""

    def execute(args: dict[str, Any], context: Any) -> Any:
        log.append(args)
        return {"city": args.get("city"), "sky": "sunny" if args.get("city") == "Paris" else "rain"}

    return ToolDefinition(
        "get_weather",
        execute,
        description="Current weather for a city.",
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    )


def agent_for(base_url: str, *, timeout: Any = None, **config: Any) -> Agent:
    """An agent whose provider talks to ``base_url`` with the test key (a client per turn, as
    the plugin's own provider does, so nothing stays open after a test)."""
    provider = create_anthropic_provider(
        api_key=API_KEY, base_url=base_url, timeout=timeout, reuse_connections=False
    )
    return create_agent(model=MODEL, provider=provider, **config)


def sent_key(headers: dict[str, str]) -> str | None:
    """The API key a request carried (``x-api-key``, or a bearer ``authorization``)."""
    if "x-api-key" in headers:
        return headers["x-api-key"]
    auth = headers.get("authorization", "")
    return auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
