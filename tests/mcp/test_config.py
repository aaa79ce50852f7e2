"""Server descriptions, default names and ``mcp_tools`` options: refusals are typed and come
before anything starts; a block that cannot open leaves no server process behind."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from prism_core import PrismError
from prism_mcp import (
    MCPConfigError,
    MCPDuplicateToolError,
    MCPServerHTTP,
    MCPServerStdio,
    MCPToolError,
    mcp_tools,
)

from .conftest import LEDGER_SERVER

Ledger = Callable[..., MCPServerStdio]
#: What the command line of a reference server process holds.
EVERYTHING = "mcp-server-everything"


def _children(marker: str) -> list[int]:
    """Pids of this process's children whose command line holds ``marker`` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == os.getpid() and marker in cmdline:
            found.append(int(entry))
    return found


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("/usr/local/bin/mcp-server-everything", "mcp-server-everything"),
        ("python3.12", "python3"),
        ("npx", "npx"),
        ("servers/files.py", "files"),
        ("./my files!.sh", "my_files"),
    ],
)
def test_a_stdio_server_is_named_after_its_command(command: str, name: str) -> None:
    """The basename without its extension, characters a name cannot hold replaced by ``_``."""
    assert MCPServerStdio(command).name == name
    assert MCPServerStdio(command, name="chosen").name == "chosen"


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("http://127.0.0.1:8931/mcp", "127_0_0_1_8931"),
        ("https://mcp.example.com/mcp", "mcp_example_com"),
        ("http://localhost/mcp", "localhost"),
    ],
)
def test_an_http_server_is_named_after_its_host_and_port(url: str, name: str) -> None:
    """The host, with the port when the URL names one."""
    assert MCPServerHTTP(url).name == name


@pytest.mark.parametrize(
    "build",
    [
        lambda: MCPServerStdio(""),
        lambda: MCPServerStdio("server", "--flag"),
        lambda: MCPServerStdio("server", [1]),
        lambda: MCPServerStdio("server", env={"TOKEN": 1}),
        lambda: MCPServerStdio("server", cwd=3),
        lambda: MCPServerStdio("server", name="two words"),
        lambda: MCPServerStdio("server", name=""),
        lambda: MCPServerHTTP("ftp://example.com/mcp"),
        lambda: MCPServerHTTP("http:///mcp"),
        lambda: MCPServerHTTP("http://example.com:99999/mcp"),
        lambda: MCPServerHTTP("http://example.com/mcp", headers={"X-Token": None}),
        lambda: MCPServerHTTP("http://example.com/mcp", name="a.b"),
    ],
)
def test_bad_server_descriptions_are_refused(build: Callable[[], Any]) -> None:
    """A typed ``MCPConfigError`` (also a ``ValueError``) when the description is built."""
    with pytest.raises(MCPConfigError) as refused:
        build()
    assert refused.value.code == "ERR_PRISM_MCP_CONFIG"
    assert isinstance(refused.value, PrismError | ValueError)


def test_reprs_show_no_secret() -> None:
    """Environment and header values are credentials: a repr names only their keys."""
    stdio = MCPServerStdio("server", env={"API_TOKEN": "s3cret-env"})
    http = MCPServerHTTP("https://mcp.example.com/mcp", headers={"Authorization": "Bearer s3cret"})
    assert "API_TOKEN" in repr(stdio)
    assert "Authorization" in repr(http)
    assert "s3cret" not in repr(stdio) + repr(http)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "options",
    [
        {"prefix": "yes"},
        {"call_timeout": 0},
        {"call_timeout": float("nan")},
        {"call_timeout": True},
        {"connect_timeout": -1},
    ],
)
async def test_bad_options_are_refused_before_any_server_starts(
    options: dict[str, Any], stdio_ledger: Ledger
) -> None:
    with pytest.raises(MCPConfigError):
        async with mcp_tools(stdio_ledger(), **options):
            pytest.fail("the block opened")
    assert _children(str(LEDGER_SERVER)) == []


@pytest.mark.anyio
async def test_only_server_descriptions_are_taken() -> None:
    with pytest.raises(MCPConfigError, match="MCPServerStdio and MCPServerHTTP"):
        async with mcp_tools("npx server"):  # type: ignore[arg-type]
            pytest.fail("the block opened")


@pytest.mark.anyio
async def test_a_server_that_cannot_start_is_an_mcp_tool_error(everything: Ledger) -> None:
    """A missing command: ``MCPToolError``; the server already connected is stopped."""
    with pytest.raises(MCPToolError, match="could not be connected") as refused:
        async with mcp_tools(everything(), MCPServerStdio("/nonexistent/mcp-server")):
            pytest.fail("the block opened")
    assert refused.value.code == "ERR_PRISM_MCP"
    assert _children(EVERYTHING) == []


@pytest.mark.anyio
async def test_a_server_that_never_answers_is_bounded_by_connect_timeout() -> None:
    silent = MCPServerStdio(sys.executable, ["-c", "import time; time.sleep(600)"], name="silent")
    with pytest.raises(MCPToolError, match="within 1 s"):
        async with mcp_tools(silent, connect_timeout=1):
            pytest.fail("the block opened")
    assert _children("time.sleep(600)") == []


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_http_server_nobody_listens_on_is_an_mcp_tool_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(MCPToolError, match="could not be connected"):
        async with mcp_tools(MCPServerHTTP(f"http://127.0.0.1:{port}/mcp")):
            pytest.fail("the block opened")


@pytest.mark.anyio
async def test_a_duplicate_refusal_stops_every_server(everything: Ledger) -> None:
    with pytest.raises(MCPDuplicateToolError, match="'echo'"):
        async with mcp_tools(everything(name="a"), everything(name="b")):
            pytest.fail("the block opened")
    assert _children(EVERYTHING) == []


@pytest.mark.anyio
async def test_the_hosts_exception_leaves_the_block_as_itself(everything: Ledger) -> None:
    """Not wrapped in an exception group; the servers are stopped."""
    seen: list[int] = []

    async def use_and_fail() -> None:
        async with mcp_tools(everything()) as tools:
            assert tools
            seen.extend(_children(EVERYTHING))
            raise KeyError("host")

    with pytest.raises(KeyError, match="host"):
        await use_and_fail()
    assert len(seen) == 1
    assert _children(EVERYTHING) == []
