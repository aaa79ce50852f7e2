"""An agent whose tools come from an MCP server, behind ``--app`` as an async context manager
factory: ``prism worker`` and ``prism serve`` enter it once for their life, so the MCP
connection lives as long as the process that runs the tools (API.md: "Decide here, run there").

As subprocesses on a SQLite store: an approval recorded by ``prism runs approve --wait`` is run
by ``prism worker`` through the MCP server exactly once; ``prism serve`` with its own worker
runs another through its JSON API; both stop on SIGTERM with exit 0 and no error about cancel
scopes left in another task.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx

from prism_core import (
    RunStateOptions,
    discover_store_plugins,
    entered_resolver,
    open_stores,
)

from .conftest import LEDGER_SERVER, ledger_entries

HOST = '''
"""A desk whose ledger tool comes from an MCP server (the app enters the server once)."""

import sys
from contextlib import asynccontextmanager
from pathlib import Path

from prism_core import create_agent, provider_done, provider_text_delta, provider_tool_call
from prism_core import tool_call_content
from prism_mcp import MCPServerStdio, mcp_tools

REVISION = "desk-1"
LEDGER = Path(__file__).with_name("ledger.jsonl")


class Model:
    id = "mock"

    async def generate(self, request):
        if not any(message.role == "assistant" for message in request.messages):
            entry = request.messages[-1].text
            yield provider_tool_call(tool_call_content("c1", "append_entry", {"entry": entry}))
        else:
            yield provider_text_delta("booked")
        yield provider_done()


def build(tools, store=None):
    return create_agent(
        id="desk",
        model={"provider": "mock", "model": "demo"},
        provider=Model(),
        tools=list(tools),
        store=store,
    )


@asynccontextmanager
async def app():
    server = MCPServerStdio(sys.executable, [SERVER, "stdio", str(LEDGER)])
    async with mcp_tools(server) as tools:
        yield lambda agent_id: (build(tools) if agent_id == "desk" else None, REVISION)
'''


def _host(folder: Path) -> Any:
    import importlib

    name = f"mcp_desk_{uuid.uuid4().hex[:8]}"
    source = HOST.replace("[SERVER,", f"[{str(LEDGER_SERVER)!r},")
    (folder / f"{name}.py").write_text(source)
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(folder))


async def _suspend(url: str, host: Any, entry: str) -> tuple[str, int]:
    async with (
        open_stores(url, plugins=discover_store_plugins(url)) as stores,
        entered_resolver(host.app) as resolve,
    ):
        agent, revision = resolve("desk")
        session = agent.evolve(store=stores.sessions).create_session()
        state = RunStateOptions(stores.checkpoints, revision, interrupt_before_tool=True)
        result = await session.run(entry, run_state=state)
    assert result.status == "suspended"
    assert result.run_state is not None
    return result.run_id, result.run_state.version


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_prism_worker_and_prism_serve_enter_the_mcp_app_once(tmp_path: Path) -> None:
    host = _host(tmp_path)
    url = f"sqlite:///{tmp_path / 'desk.db'}"
    first, version = anyio.run(_suspend, url, host, "A-3")
    # Seeding listed the tools once; nothing was called yet.
    assert ledger_entries(Path(host.LEDGER)) == []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    app = f"{host.__name__}:app"
    prism = [sys.executable, "-m", "prism_cli"]
    with (tmp_path / "worker.log").open("w") as log:
        worker = subprocess.Popen(
            [*prism, "worker", "--store", url, "--app", app],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            approved = subprocess.run(
                [
                    *(*prism, "runs", "approve", first),
                    *("--store", url, "--app", app, "--all", "--wait", "150"),
                ],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=200,
            )
        finally:
            worker.send_signal(signal.SIGTERM)
            stopped = worker.wait(timeout=60)
    worker_log = (tmp_path / "worker.log").read_text()
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout.splitlines()[-1].startswith(f"run {first}: succeeded")
    assert stopped == 0, worker_log
    for output in (worker_log, approved.stderr):
        assert "cancel scope" not in output
    calls = ledger_entries(Path(host.LEDGER))
    assert [(c["tool"], c["entry"]) for c in calls] == [("append_entry", "A-3")]

    second, version = anyio.run(_suspend, url, host, "B-4")
    port = _free_port()
    with (tmp_path / "serve.log").open("w") as log:
        served = subprocess.Popen(
            [
                *(*prism, "serve", "--store", url, "--app", app),
                *("--port", str(port), "--workers", "1"),
            ],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 120
            while True:
                try:
                    httpx.get(f"{base}/api/runs", timeout=5)
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
                    assert served.poll() is None, (tmp_path / "serve.log").read_text()
                    time.sleep(0.1)
            answer = httpx.post(
                f"{base}/api/runs/{second}/resume",
                json={"expected_version": version, "decision": "approve"},
                timeout=150,
            )
        finally:
            served.send_signal(signal.SIGTERM)
            code = served.wait(timeout=60)
    serve_log = (tmp_path / "serve.log").read_text()
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "succeeded", json.dumps(answer.json())
    # uvicorn shuts down gracefully, then raises the signal it caught again.
    assert code in (0, -signal.SIGTERM), serve_log
    assert "Application shutdown complete" in serve_log
    assert "cancel scope" not in serve_log
    calls = ledger_entries(Path(host.LEDGER))
    assert [(c["tool"], c["entry"]) for c in calls] == [
        ("append_entry", "A-3"),
        ("append_entry", "B-4"),
    ]
