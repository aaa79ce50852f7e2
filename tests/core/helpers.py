"""Small builders shared by the runtime tests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio

from prism_core import (
    Agent,
    ProviderEvent,
    ToolDefinition,
    create_agent,
    create_mock_provider,
    provider_done,
    provider_text_delta,
    provider_tool_call,
    tool_call_content,
)

MODEL = {"provider": "mock", "model": "demo"}


def text_turn(text: str, **usage: int) -> list[ProviderEvent]:
    """One provider turn answering ``text``."""
    return [provider_text_delta(text), provider_done(usage or None)]


def tool_turn(*calls: tuple[str, str, dict[str, Any]]) -> list[ProviderEvent]:
    """One provider turn requesting ``(id, name, args)`` calls."""
    events: list[ProviderEvent] = [provider_tool_call(tool_call_content(*c)) for c in calls]
    events.append(provider_done())
    return events


def scripted_agent(turns: Sequence[Sequence[ProviderEvent]], **config: Any) -> Agent:
    """An agent whose mock provider plays ``turns`` in order (the last one repeats)."""
    provider = create_mock_provider(turns=turns)
    config.setdefault("model", MODEL)
    return create_agent(provider=provider, **config)


def echo_tool(name: str = "echo", log: list[Any] | None = None, **kw: Any) -> ToolDefinition:
    """A tool returning its arguments, recording each execution in ``log``."""

    def execute(args: dict[str, Any], context: Any) -> Any:
        if log is not None:
            log.append((name, args))
        return {"echo": args}

    return ToolDefinition(name, execute, **kw)


def types(events: Sequence[Any]) -> list[str]:
    """The ``type`` of each event."""
    return [e.type for e in events]


async def paused_consumer(stream: Any, finished: Callable[[], Awaitable[bool]]) -> list[Any]:
    """Consume ``stream`` as a consumer that reads the first event, then pauses until
    ``finished()`` says the run is over (a generous deadline, never a timing claim), then
    reads the rest: the run must not wait for it, and the stream's queue bounds apply."""
    first = await stream.__anext__()
    with anyio.fail_after(60):
        while True:
            if await finished():
                break
            await anyio.sleep(0.01)
    return [first, *[event async for event in stream]]
