"""What a server may ask of the host while a call runs: elicitation answered by the host's
``elicitation_handler`` (sync or async; ``None`` declines; without a handler no capability is
declared), and progress notifications turned into the run's ``tool_execution_progress``
events. Over stdio (2026-07-28, negotiated) and Streamable HTTP."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from prism_mcp import MCPServerStdio, MCPToolError, mcp_tools

from .conftest import HttpLedger
from .support import agent_on, by_name, calls, context, of_type, says, stream

pytestmark = pytest.mark.anyio

Ledger = Callable[..., MCPServerStdio]


async def test_progress_becomes_tool_progress_events(stdio_ledger: Ledger) -> None:
    turns = [calls(("c1", "count_to_three", {})), says("Counted.")]
    async with mcp_tools(stdio_ledger()) as tools:
        with anyio.fail_after(60):
            events = await stream(agent_on(tools, turns).create_session(), "count")
    progress = [event.progress for event in of_type(events, "tool_execution_progress")]
    assert progress == [
        {"progress": 1, "total": 3, "message": "step 1"},
        {"progress": 2, "total": 3, "message": "step 2"},
        {"progress": 3, "total": 3, "message": "step 3"},
    ]
    assert {event.tool_call_id for event in of_type(events, "tool_execution_progress")} == {"c1"}
    assert events[-1].type == "agent_finished"


async def test_an_async_handler_answers_elicitation(stdio_ledger: Ledger) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    async def handler(message: str, schema: dict[str, Any]) -> dict[str, Any]:
        seen.append((message, schema))
        return {"approver": "dana", "amount": 40}

    async with mcp_tools(stdio_ledger(), elicitation_handler=handler) as tools:
        answer = await by_name(tools)["ask_refund"].execute({}, context("ask_refund"))
    assert answer == "refund of 40 approved by dana"
    ((message, schema),) = seen
    assert message == "Who approves this refund, and how much?"
    assert set(schema["properties"]) == {"approver", "amount"}


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_sync_handler_declines_over_http(http_ledger: HttpLedger) -> None:
    def decline(message: str, schema: dict[str, Any]) -> None:
        return None

    async with mcp_tools(http_ledger.server(), elicitation_handler=decline) as tools:
        answer = await by_name(tools)["ask_refund"].execute({}, context("ask_refund"))
    assert answer == "refund decline"


async def test_without_a_handler_no_elicitation_is_possible(stdio_ledger: Ledger) -> None:
    """No capability is declared: the server's elicitation fails, and the call reports it."""
    async with mcp_tools(stdio_ledger()) as tools:
        with pytest.raises(MCPToolError) as failed:
            await by_name(tools)["ask_refund"].execute({}, context("ask_refund"))
    assert failed.value.code == "ERR_PRISM_MCP"
    assert "not supported" in str(failed.value).lower()
