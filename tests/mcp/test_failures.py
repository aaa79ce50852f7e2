"""Servers that die, hang or are abandoned: every call ends with ``MCPToolError`` (or the run's
own abort), never a hang. ``anyio.fail_after`` bounds each wait so a hang fails the test."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from prism_core import ToolDefinition
from prism_mcp import MCPServerStdio, MCPToolError, mcp_tools

from .conftest import HttpLedger, ledger_entries
from .support import agent_on, by_name, calls, context, of_type, received, says, stream

pytestmark = pytest.mark.anyio

Ledger = Callable[..., MCPServerStdio]
#: Far longer than any test waits: a call must end for another reason than its timeout.
PATIENT = 600.0
SLOW = {"entry": "slow", "seconds": 300}


async def _started(path: Path) -> dict[str, Any]:
    """The ledger line of the slow call, once the server has received it."""
    return await received(lambda: ledger_entries(path), "slow_append")


async def _fails(tool: ToolDefinition, args: dict[str, Any], call: Any = None) -> MCPToolError:
    with anyio.fail_after(30), pytest.raises(MCPToolError) as failed:
        await tool.execute(args, call or context(tool.name))
    assert failed.value.code == "ERR_PRISM_MCP"
    return failed.value


async def test_a_stdio_server_killed_mid_call(stdio_ledger: Ledger, tmp_path: Path) -> None:
    """SIGKILL the server while it holds a call: the call raises ``MCPToolError`` saying it
    may or may not have been carried out, and so does every later call."""
    ledger = tmp_path / "stdio-ledger.jsonl"
    async with mcp_tools(stdio_ledger(), call_timeout=PATIENT) as tools:
        named = by_name(tools)
        failure: list[MCPToolError] = []

        async def call() -> None:
            failure.append(await _fails(named["slow_append"], SLOW))

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            os.kill((await _started(ledger))["pid"], signal.SIGKILL)
        assert "may or may not have carried it out" in str(failure[0])
        later = await _fails(named["append_entry"], {"entry": "after"})
    assert "'append_entry' was not called" in str(later)
    assert "the server closed the connection" in str(later)
    assert [e["tool"] for e in ledger_entries(ledger)] == ["slow_append"]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_http_server_killed_mid_call_in_a_run(http_ledger: HttpLedger) -> None:
    """Over Streamable HTTP, inside a run: the cut call is the call's error result and the
    run goes on; calls after it raise ``MCPToolError`` at once."""
    turns = [calls(("c1", "slow_append", SLOW)), says("The ledger went away.")]
    async with mcp_tools(http_ledger.server(), call_timeout=PATIENT) as tools:
        session = agent_on(tools, turns).create_session()
        async with anyio.create_task_group() as group:

            async def kill() -> None:
                await _started(http_ledger.ledger)
                http_ledger.kill()

            group.start_soon(kill)
            with anyio.fail_after(60):
                events = await stream(session, "append slowly")
        (error,) = of_type(events, "tool_execution_error")
        assert "'slow_append' was cut off" in error.error.message
        assert "may or may not have carried it out" in error.error.message
        assert events[-1].type == "agent_finished"
        assert events[-1].text == "The ledger went away."
        later = await _fails(by_name(tools)["count_entries"], {})
    assert "'count_entries' was not called" in str(later)


async def test_a_call_without_an_answer_times_out(stdio_ledger: Ledger) -> None:
    """``call_timeout`` bounds one call."""
    async with mcp_tools(stdio_ledger(), call_timeout=0.5) as tools:
        failed = await _fails(by_name(tools)["slow_append"], SLOW)
        assert "no answer within 0.5 s" in str(failed)
        assert await by_name(tools)["set_flag"].execute(
            {"flag": "f", "value": True}, context("set_flag")
        ) == ("f=True")


async def test_aborting_the_run_abandons_the_call(stdio_ledger: Ledger, tmp_path: Path) -> None:
    """``session.abort()`` while an MCP call is in flight ends the run as aborted."""
    turns = [calls(("c1", "slow_append", SLOW)), says("unreachable")]
    async with mcp_tools(stdio_ledger(), call_timeout=PATIENT) as tools:
        session = agent_on(tools, turns).create_session()
        async with anyio.create_task_group() as group:

            async def abort() -> None:
                await _started(tmp_path / "stdio-ledger.jsonl")
                session.abort("operator")

            group.start_soon(abort)
            with anyio.fail_after(60):
                events = await stream(session, "append slowly")
    assert events[-1].type == "error"
    assert events[-1].status == "aborted"
    assert of_type(events, "tool_execution_finished") == []


async def test_an_aborted_signal_stops_a_direct_call(stdio_ledger: Ledger, tmp_path: Path) -> None:
    """A host calling a tool itself can abandon the call through the context's signal."""
    async with mcp_tools(stdio_ledger(), call_timeout=PATIENT) as tools:
        call = context("slow_append")
        failure: list[MCPToolError] = []

        async def run() -> None:
            failure.append(await _fails(by_name(tools)["slow_append"], SLOW, call))

        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await _started(tmp_path / "stdio-ledger.jsonl")
            call.signal.abort("host")
    assert "the run was aborted" in str(failure[0])


async def test_only_text_blocks_pass_and_the_rest_is_named_in_a_warning(
    stdio_ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    """Text blocks joined by a newline; the image the model cannot see is logged."""
    async with mcp_tools(stdio_ledger()) as tools:
        with caplog.at_level(logging.WARNING, logger="prism_mcp"):
            value = await by_name(tools)["mixed"].execute({}, context("mixed"))
    assert value == "first\nsecond"
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "prism_mcp"]
    assert "image" in warning
