"""A hostile MCP server (the official SDK's low-level ``Server``, over stdio) cannot reach the
host: tools with remote references, bad names or broken schemas are left out and named, no
schema is ever fetched (a loopback listener records every connection and must record none),
a catastrophic ``pattern`` is refused without holding the event loop, a huge result is
refused, and media hidden in ``structuredContent`` never reaches the model."""

from __future__ import annotations

import json
import logging
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from prism_mcp import MCPServerStdio, mcp_tools

from .support import agent_on, by_name, calls, context, of_type, says, stream

pytestmark = pytest.mark.anyio

HOSTILE = Path(__file__).resolve().parent / "servers" / "hostile_server.py"
LEFT_OUT = {"remote_ref", "", "has space", "x" * 129, "broken_schema", "output_ref"}


class Recorder:
    """A loopback TCP listener that records every connection made to it."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(16)
        self.socket.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}/schema.json"
        self.connections: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                peer, _ = self.socket.accept()
            except TimeoutError:
                continue
            with peer:
                peer.settimeout(1)
                try:
                    self.connections.append(peer.recv(1024))
                except OSError:
                    self.connections.append(b"")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.socket.close()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    listener = Recorder()
    try:
        yield listener
    finally:
        listener.close()


@pytest.fixture
def hostile(tmp_path: Path, recorder: Recorder) -> MCPServerStdio:
    return MCPServerStdio(
        sys.executable, [str(HOSTILE), str(tmp_path / "effects.jsonl"), recorder.url], name="evil"
    )


def _effects(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "effects.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_untrustworthy_tools_are_left_out_named_and_never_fetched(
    hostile: MCPServerStdio, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="prism_mcp"):
        async with mcp_tools(hostile) as tools:
            names = {tool.name for tool in tools}
            rejected = dict(tools.rejected)
            # Calling what was accepted fetches nothing either.
            await by_name(tools)["sneaky_media"].execute({}, context("sneaky_media"))
    assert names == {"catastrophic", "huge", "sneaky_media", "slow_effect"}
    assert set(rejected) == LEFT_OUT
    assert "$ref outside the schema" in rejected["remote_ref"]
    assert recorder.url in rejected["remote_ref"]
    assert "outputSchema" in rejected["output_ref"]
    assert "not 1-128 characters" in rejected[""]
    assert "not 1-128 characters" in rejected["x" * 129]
    assert "not a valid JSON schema" in rejected["broken_schema"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    for name in ("remote_ref", "broken_schema", "output_ref", "has space"):
        assert any(f"the tool {name!r} is left out" in w for w in warnings), name
    assert recorder.connections == []


async def test_a_catastrophic_pattern_is_refused_and_the_loop_keeps_ticking(
    hostile: MCPServerStdio, tmp_path: Path
) -> None:
    """The model's argument meets the server's backtracking ``pattern``: the call is refused
    with ``ERR_PRISM_TOOL_ARGUMENTS`` and never sent, the run goes on, and a task running
    beside the run ticks all along."""
    turns = [calls(("c1", "catastrophic", {"name": "a" * 40 + "!"})), says("Refused.")]
    ticks = 0
    target: list[int] = []
    ticked = anyio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            if target and ticks >= target[0]:
                ticked.set()
            await anyio.sleep(0.001)

    async with mcp_tools(hostile) as tools:
        with anyio.fail_after(120):
            async with anyio.create_task_group() as group:
                group.start_soon(ticker)
                events = await stream(agent_on(tools, turns).create_session(), "go")
                target.append(ticks + 3)
                await ticked.wait()
                group.cancel_scope.cancel()
    (blocked,) = of_type(events, "tool_execution_blocked")
    assert blocked.reason == "invalid_arguments"
    assert events[-1].type == "agent_finished"
    assert events[-1].text == "Refused."
    assert blocked.error.code == "ERR_PRISM_TOOL_ARGUMENTS"
    assert ticks > 3
    assert [e for e in _effects(tmp_path) if e["tool"] == "catastrophic"] == []


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_huge_result_is_refused_and_never_passed_on(hostile: MCPServerStdio) -> None:
    """30 MiB against the default 1 MiB cap: the call's error result carries
    ``ERR_PRISM_MCP_RESULT_TOO_LARGE`` and none of the text; a small one passes."""
    async with mcp_tools(hostile) as tools:
        huge = by_name(tools)["huge"]
        refused = await huge.execute({"megabytes": 30}, context("huge"))
        small = await huge.execute({"megabytes": 0.001}, context("huge"))
    assert refused.error.code == "ERR_PRISM_MCP_RESULT_TOO_LARGE"
    assert refused.value is None
    assert "xxxx" not in refused.error.message
    assert small == "x" * int(0.001 * 1024 * 1024)


async def test_a_lower_cap_refuses_a_smaller_result(hostile: MCPServerStdio) -> None:
    async with mcp_tools(hostile, max_result_bytes=1000) as tools:
        refused = await by_name(tools)["huge"].execute({"megabytes": 0.01}, context("huge"))
    assert refused.error.code == "ERR_PRISM_MCP_RESULT_TOO_LARGE"


async def test_media_in_structured_content_never_reaches_the_model(
    hostile: MCPServerStdio, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="prism_mcp"):
        async with mcp_tools(hostile) as tools:
            value = await by_name(tools)["sneaky_media"].execute({}, context("sneaky_media"))
    assert value == {
        "caption": "a cat",
        "picture": "[image omitted]",
        "attachments": ["[binary omitted]"],
        "thumbnail": "[data URI omitted]",
    }
    assert "aGk=" not in json.dumps(value)
    (warning,) = [r.getMessage() for r in caplog.records if "not passed on" in r.getMessage()]
    assert "image" in warning
