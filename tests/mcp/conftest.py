"""Fixtures of the MCP tests: the npm reference server, and the SDK-built ledger server over
stdio or over Streamable HTTP on loopback (a subprocess per test, killed by its pid)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from prism_mcp import MCPServerHTTP, MCPServerStdio

from .npm_servers import InstallError, install

LEDGER_SERVER = Path(__file__).resolve().parent / "servers" / "ledger_server.py"
#: Seconds a server subprocess may take to report its port.
START_TIMEOUT = 30


@pytest.fixture(scope="session")
def everything_bin() -> Path:
    """``mcp-server-everything``, installed with ``npm ci`` from tests/mcp/node if needed."""
    try:
        return install()
    except InstallError as exc:
        pytest.fail(str(exc))


@pytest.fixture
def everything(everything_bin: Path) -> Callable[..., MCPServerStdio]:
    """``everything(name=None)``: the reference server over stdio."""

    def make(name: str | None = None) -> MCPServerStdio:
        return MCPServerStdio(str(everything_bin), ["stdio"], name=name)

    return make


def ledger_entries(path: Path) -> list[dict[str, Any]]:
    """The calls the ledger server received, oldest first."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@attrs.define
class HttpLedger:
    """One ledger server process on loopback."""

    url: str
    pid: int
    ledger: Path
    process: subprocess.Popen[str]

    def server(self, **options: Any) -> MCPServerHTTP:
        """An ``MCPServerHTTP`` for this server."""
        return MCPServerHTTP(self.url, **options)

    def entries(self) -> list[dict[str, Any]]:
        """The calls it received."""
        return ledger_entries(self.ledger)

    def kill(self) -> None:
        """SIGKILL the server (by its pid) and reap it."""
        if self.process.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
            self.process.wait(timeout=30)


def start_http_ledger(ledger: Path, *, variant: int = 1) -> HttpLedger:
    """Start the ledger server over Streamable HTTP on a free loopback port."""
    command = [sys.executable, str(LEDGER_SERVER), "http", str(ledger), "--variant", str(variant)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], START_TIMEOUT)
    line = process.stdout.readline() if ready else ""
    if not line:
        process.kill()
        process.wait(timeout=30)
        pytest.fail(f"the ledger server did not report its port within {START_TIMEOUT} s")
    info = json.loads(line)
    return HttpLedger(f"http://127.0.0.1:{info['port']}/mcp", info["pid"], ledger, process)


@pytest.fixture
def http_ledger(tmp_path: Path) -> Iterator[HttpLedger]:
    """A ledger server over Streamable HTTP, killed by its pid after the test."""
    server = start_http_ledger(tmp_path / "http-ledger.jsonl")
    try:
        yield server
    finally:
        server.kill()
        if server.process.stdout is not None:
            server.process.stdout.close()


@pytest.fixture
def stdio_ledger(tmp_path: Path) -> Callable[..., MCPServerStdio]:
    """``stdio_ledger(name=None, variant=1)``: the ledger server over stdio, writing to
    ``tmp_path / "stdio-ledger.jsonl"`` (the client stops the process when its block ends)."""

    def make(name: str | None = None, variant: int = 1) -> MCPServerStdio:
        args = [str(LEDGER_SERVER), "stdio", str(tmp_path / "stdio-ledger.jsonl")]
        return MCPServerStdio(sys.executable, [*args, "--variant", str(variant)], name=name)

    return make
