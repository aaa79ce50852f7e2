"""``mcp_tools`` against the MCP reference server ``@modelcontextprotocol/server-everything``
(npm registry, pinned in tests/mcp/node), over stdio."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from prism_mcp import (
    MCP_TOOL_ERROR,
    MCPDuplicateToolError,
    MCPServerStdio,
    MCPToolError,
    mcp_tools,
)

from .support import agent_on, by_name, calls, context, of_type, says, stream

pytestmark = pytest.mark.anyio

#: What server-everything 2026.8.31 lists to a client that offers no optional capability.
LISTED = {
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "gzip-file-as-resource",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
    "trigger-long-running-operation",
    "simulate-research-query",
}

Everything = Callable[..., MCPServerStdio]


async def _listed_by_sdk(server: MCPServerStdio) -> list[Any]:
    """The tools as a bare SDK client sees them (the reference the definitions must match)."""
    parameters = StdioServerParameters(command=server.command, args=list(server.args))
    async with stdio_client(parameters) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return list((await session.list_tools()).tools)


async def test_every_listed_tool_becomes_a_definition_as_listed(everything: Everything) -> None:
    """One definition per listed tool: the MCP name, description and inputSchema as listed."""
    server = everything()
    listed = await _listed_by_sdk(server)
    async with mcp_tools(server) as tools:
        assert [t.name for t in tools] == [t.name for t in listed]
        assert set(by_name(tools)) == LISTED
        for definition, tool in zip(tools, listed, strict=True):
            assert definition.description == tool.description
            assert definition.parameters == tool.input_schema
    echo = by_name(tools)["echo"]
    assert echo.description == "Echoes back the input string"
    assert echo.parameters is not None
    assert echo.parameters["properties"]["message"]["type"] == "string"
    assert echo.parameters["required"] == ["message"]


async def test_annotations_decide_read_only_idempotent_and_side_effect(
    everything: Everything,
) -> None:
    """``readOnlyHint`` → ``effect="read"``; ``idempotentHint`` → idempotent; neither → a side
    effect, which a durable run marks dispatched before it starts."""
    async with mcp_tools(everything()) as tools:
        named = by_name(tools)
    echo, gzip = named["echo"], named["gzip-file-as-resource"]
    toggle = named["toggle-simulated-logging"]
    assert (echo.effect, echo.idempotent, echo.needs_dispatch_mark) == ("read", True, False)
    assert (gzip.effect, gzip.idempotent, gzip.needs_dispatch_mark) == (None, True, False)
    assert (toggle.effect, toggle.idempotent, toggle.needs_dispatch_mark) == (None, False, True)


async def test_calls_answer_text_or_structured_content(everything: Everything) -> None:
    """Text blocks come back as their text; ``structuredContent`` as the object itself."""
    async with mcp_tools(everything()) as tools:
        named = by_name(tools)
        echoed = await named["echo"].execute({"message": "hi"}, context("echo"))
        summed = await named["get-sum"].execute({"a": 2, "b": 3}, context("get-sum"))
        weather = await named["get-structured-content"].execute(
            {"location": "Chicago"}, context("get-structured-content")
        )
    assert echoed == "Echo: hi"
    assert summed == "The sum of 2 and 3 is 5."
    assert weather == {"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82}


async def test_a_run_dispatches_reference_tools_and_goes_on_after_is_error(
    everything: Everything,
) -> None:
    """Inside a run the kernel dispatches the tools; an ``isError`` answer is the call's error
    result (code ``mcp_tool_error``, the server's text), and the run goes on to its answer."""
    turns = [
        calls(
            ("c1", "get-sum", {"a": 40, "b": 2}),
            ("c2", "gzip-file-as-resource", {"name": "x.gz", "data": "ftp://example.com/x"}),
        ),
        says("The sum is 42; the file could not be fetched."),
    ]
    async with mcp_tools(everything()) as tools:
        session = agent_on(tools, turns).create_session()
        events = await stream(session, "add and compress")
    finished = {e.tool_call_id: e.result for e in of_type(events, "tool_execution_finished")}
    assert finished["c1"].value == "The sum of 40 and 2 is 42."
    error = finished["c2"].error
    assert error is not None
    assert error.code == MCP_TOOL_ERROR
    assert "Unsupported URL protocol" in error.message
    assert events[-1].type == "agent_finished"
    assert events[-1].text == "The sum is 42; the file could not be fetched."


async def test_the_handshake_and_its_protocol_version_are_logged(
    everything: Everything, caplog: pytest.LogCaptureFixture
) -> None:
    """The client speaks the initialize handshake; this server settles on 2025-11-25."""
    with caplog.at_level(logging.INFO, logger="prism_mcp"):
        async with mcp_tools(everything()):
            pass
    connected = [r.getMessage() for r in caplog.records if "connected" in r.getMessage()]
    assert len(connected) == 1
    assert "mcp-servers/everything" in connected[0]
    assert "protocol 2025-11-25" in connected[0]


async def test_a_name_two_servers_share_is_refused_without_prefix(everything: Everything) -> None:
    """Two servers listing ``echo`` cannot both be unprefixed: a typed refusal."""
    with pytest.raises(MCPDuplicateToolError) as refused:
        async with mcp_tools(everything(name="left"), everything(name="right")):
            pytest.fail("the block opened")
    assert refused.value.code == "ERR_PRISM_MCP_DUPLICATE_TOOL"
    assert "'echo'" in str(refused.value)
    assert "prefix=True" in str(refused.value)


async def test_prefix_names_each_tool_after_its_server(everything: Everything) -> None:
    """``prefix=True``: ``f"{server.name}_{tool}"``, and each name reaches its own server."""
    async with mcp_tools(everything(name="left"), everything(name="right"), prefix=True) as tools:
        named = by_name(tools)
        assert set(named) == {f"{side}_{tool}" for side in ("left", "right") for tool in LISTED}
        left = await named["left_echo"].execute({"message": "l"}, context("left_echo"))
        right = await named["right_echo"].execute({"message": "r"}, context("right_echo"))
    assert (left, right) == ("Echo: l", "Echo: r")


async def test_prefix_refuses_two_servers_with_one_name(everything: Everything) -> None:
    """Both servers default to ``mcp-server-everything``: refused before either starts."""
    assert everything().name == "mcp-server-everything"
    with pytest.raises(MCPDuplicateToolError, match="mcp-server-everything"):
        async with mcp_tools(everything(), everything(), prefix=True):
            pytest.fail("the block opened")


async def test_a_call_after_the_block_closed_raises_and_a_run_goes_on(
    everything: Everything,
) -> None:
    """After the block: ``MCPToolError`` (``ERR_PRISM_MCP``) when called directly; inside a
    run, the call's error result, and the run still finishes."""
    async with mcp_tools(everything()) as tools:
        pass
    echo = by_name(tools)["echo"]
    with pytest.raises(MCPToolError) as closed:
        await echo.execute({"message": "late"}, context("echo"))
    assert closed.value.code == "ERR_PRISM_MCP"
    assert "closed" in str(closed.value)

    turns = [calls(("c1", "echo", {"message": "late"})), says("The server is gone.")]
    events = await stream(agent_on(tools, turns).create_session(), "echo")
    error = of_type(events, "tool_execution_error")[0].error
    assert "closed" in error.message
    assert events[-1].type == "agent_finished"
