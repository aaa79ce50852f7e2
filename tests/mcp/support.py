"""Builders shared by the MCP tests: scripted models, agents on MCP tools, event capture."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio

from prism_core import (
    Agent,
    AgentEvent,
    AgentSession,
    ProviderEvent,
    ToolDefinition,
    ToolExecutionContext,
    create_agent,
    provider_done,
    provider_text_delta,
    provider_tool_call,
    tool_call_content,
)
from tests.core.durable_support import by_history


def calls(*items: tuple[str, str, dict[str, Any]]) -> list[ProviderEvent]:
    """One model turn asking for the tool calls ``(call id, tool, arguments)``."""
    return [
        *(provider_tool_call(tool_call_content(i, name, args)) for i, name, args in items),
        provider_done(),
    ]


def says(text: str) -> list[ProviderEvent]:
    """One model turn answering ``text``."""
    return [provider_text_delta(text), provider_done()]


def agent_on(
    tools: Sequence[ToolDefinition], turns: Sequence[Sequence[ProviderEvent]], **config: Any
) -> Agent:
    """An agent whose model plays ``turns`` (picked by history, so a resume carries on)."""
    config.setdefault("id", "mcp-host")
    config.setdefault("model", {"provider": "mock", "model": "demo"})
    return create_agent(provider=by_history(turns), tools=list(tools), **config)


async def stream(session: AgentSession, text: str, **options: Any) -> list[AgentEvent]:
    """Every event of one run."""
    return [event async for event in session.stream(text, **options)]


def of_type(events: Sequence[AgentEvent], kind: str) -> list[Any]:
    """The events of one ``type``."""
    return [event for event in events if event.type == kind]


def context(tool: str, call_id: str = "c1", run_id: str = "run-1") -> ToolExecutionContext:
    """What the kernel hands a tool, for calling one directly."""
    return ToolExecutionContext(
        session_id="session-1", run_id=run_id, tool_call_id=call_id, tool_name=tool
    )


def by_name(tools: Sequence[ToolDefinition]) -> dict[str, ToolDefinition]:
    """The tools keyed on their names."""
    return {tool.name: tool for tool in tools}


async def received(entries: Callable[[], list[dict[str, Any]]], tool: str) -> dict[str, Any]:
    """The first ledger line of ``tool``, once the server has received the call (30 s)."""
    with anyio.fail_after(30):
        while True:
            for entry in entries():
                if entry["tool"] == tool:
                    return entry
            await anyio.sleep(0.02)
