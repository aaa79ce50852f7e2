"""The AG-UI tests' machinery: the host app under uvicorn in a subprocess, and the official
TypeScript client (``@ag-ui/client``) on Node, run by ``node/run_agent.mjs``.

A server is one ``python -m uvicorn tests.agui.agui_host:app`` process on a free loopback
port, stopped by its pid (``terminate``, or ``kill`` for a crash). A client run is one
``node run_agent.mjs`` process fed a plan on stdin; its JSON lines come back as
:class:`ClientRun`.
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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import attrs
import httpx

from prism_core import AGENT_RUN_NAMESPACE, CheckpointRecord
from prism_store_sql import open_sql_stores

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = Path(__file__).resolve().parent / "node"
CLIENT_SCRIPT = NODE_DIR / "run_agent.mjs"
#: Bounds on the processes the tests start: each is stopped, or fails the test, by then.
START_TIMEOUT_S = 60.0
CLIENT_TIMEOUT_S = 120.0


@attrs.frozen
class Host:
    """Where a server keeps its state: the SQLite file and the folder of effect logs."""

    db_path: Path
    effects_dir: Path

    @property
    def db_url(self) -> str:
        """The SQLite URL the server (and the test's own reads) open."""
        return f"sqlite:///{self.db_path}"

    def effects(self, thread_id: str) -> list[tuple[str, Any]]:
        """Every tool effect the servers made on ``thread_id``, in order: ``(tool, arguments)``."""
        path = self.effects_dir / f"{thread_id}.jsonl"
        if not path.exists():
            return []
        lines = path.read_text(encoding="utf-8").splitlines()
        return [(tool, arguments) for tool, arguments in map(json.loads, lines)]


class Server:
    """The host app under uvicorn, in a subprocess on ``127.0.0.1``."""

    def __init__(self, host: Host, *, env: dict[str, str] | None = None) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        environment = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": str(ROOT),
            "PRISM_AGUI_TEST_DB": host.db_url,
            "PRISM_AGUI_TEST_EFFECTS": str(host.effects_dir),
            **(env or {}),
        }
        command = [sys.executable, "-m", "uvicorn", "tests.agui.agui_host:app"]
        command += ["--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning"]
        self.log_path = host.db_path.with_name(f"server-{self.port}.log")
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=environment, stdout=self._log, stderr=subprocess.STDOUT
        )
        self._wait_until_listening()

    def _wait_until_listening(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the AG-UI test server did not start:\n{self.log()}")
            time.sleep(0.05)

    def _answers(self) -> bool:
        try:
            httpx.get(f"{self.url}/none", timeout=5)
        except httpx.TransportError:
            return False
        return True

    def log(self) -> str:
        """What the server wrote so far."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def kill(self) -> None:
        """SIGKILL the server: a crash, with no shutdown of any kind."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(30)
        self._log.close()

    def stop(self) -> None:
        """Stop the server (SIGTERM by pid, then SIGKILL if it lingers)."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(30)
        self._log.close()


@contextmanager
def serving(host: Host, **options: Any) -> Iterator[Server]:
    """A server for the duration of the block."""
    server = Server(host, **options)
    try:
        yield server
    finally:
        server.stop()


@attrs.frozen
class ClientRun:
    """What one ``run_agent.mjs`` process printed: its lines, grouped by step."""

    lines: tuple[dict[str, Any], ...]
    stderr: str

    def events(self, step: int) -> list[dict[str, Any]]:
        """The AG-UI events the client received in ``step``, in order."""
        return [line["event"] for line in self.lines if line["step"] == step and "event" in line]

    def types(self, step: int) -> list[str]:
        """The types of the events of ``step``."""
        return [event["type"] for event in self.events(step)]

    def end(self, step: int) -> dict[str, Any]:
        """How ``runAgent()`` ended in ``step`` (``end`` is ``resolved`` or ``rejected``)."""
        ends = [line for line in self.lines if line["step"] == step and "end" in line]
        assert len(ends) == 1, (step, self.lines, self.stderr)
        return ends[0]

    def finished(self, step: int) -> dict[str, Any]:
        """The ``RUN_FINISHED`` event of ``step``."""
        found = [e for e in self.events(step) if e["type"] == "RUN_FINISHED"]
        assert len(found) == 1, (step, self.types(step), self.stderr)
        return found[0]

    def interrupts(self, step: int) -> list[dict[str, Any]]:
        """The interrupts ``step`` ended on."""
        outcome = self.finished(step)["outcome"]
        assert outcome["type"] == "interrupt", outcome
        return list(outcome["interrupts"])

    def error(self, step: int) -> dict[str, Any]:
        """The ``RUN_ERROR`` event of ``step``."""
        found = [e for e in self.events(step) if e["type"] == "RUN_ERROR"]
        assert len(found) == 1, (step, self.types(step), self.stderr)
        return found[0]


def start_client(
    url: str,
    thread_id: str,
    steps: Sequence[dict[str, Any]],
    *,
    tenant: str | None = "t1",
    headers: dict[str, str] | None = None,
    pending_interrupts: Sequence[dict[str, Any]] | None = None,
) -> subprocess.Popen[str]:
    """Start ``run_agent.mjs`` on ``steps`` (see :func:`run_client`); collect it with
    :func:`client_output`."""
    if headers is None:
        headers = {} if tenant is None else {"x-tenant": tenant}
    plan: dict[str, Any] = {
        "url": url,
        "threadId": thread_id,
        "headers": headers,
        "steps": list(steps),
    }
    if pending_interrupts is not None:
        plan["pendingInterrupts"] = list(pending_interrupts)
    client = subprocess.Popen(
        ["node", str(CLIENT_SCRIPT)],
        cwd=NODE_DIR,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert client.stdin is not None
    client.stdin.write(json.dumps(plan))
    client.stdin.close()
    # communicate() must not touch the stdin closed above.
    client.stdin = None
    return client


def client_output(client: subprocess.Popen[str]) -> ClientRun:
    """Wait (bounded) for a started client and read what it printed."""
    try:
        stdout, stderr = client.communicate(timeout=CLIENT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.kill(client.pid, signal.SIGKILL)
        client.communicate()
        raise
    assert client.returncode == 0, stderr
    lines = tuple(json.loads(line) for line in stdout.splitlines() if line.strip())
    return ClientRun(lines, stderr)


def run_client(
    url: str,
    thread_id: str,
    steps: Sequence[dict[str, Any]],
    *,
    tenant: str | None = "t1",
    headers: dict[str, str] | None = None,
    pending_interrupts: Sequence[dict[str, Any]] | None = None,
) -> ClientRun:
    """Run ``steps`` with one ``HttpAgent`` on ``thread_id`` against ``url``, speaking as
    ``tenant`` (the ``x-tenant`` header), or with exactly ``headers`` when given;
    ``pending_interrupts`` are the client's open interrupts to begin with (a page that kept
    them)."""
    client = start_client(
        url,
        thread_id,
        steps,
        tenant=tenant,
        headers=headers,
        pending_interrupts=pending_interrupts,
    )
    return client_output(client)


def new_thread() -> str:
    """A thread id nobody used yet."""
    return f"thread-{uuid.uuid4().hex}"


def read_runs(host: Host, thread_id: str, owner: dict[str, str] | None) -> dict[str, Any]:
    """The runs on ``thread_id`` that ``owner`` can see, straight from the host's checkpoint
    store: run id → its stored state, with the record's ``version`` added."""

    async def read() -> dict[str, Any]:
        stores = open_sql_stores(host.db_url)
        try:
            page = await stores.checkpoints.list(AGENT_RUN_NAMESPACE, ownership=owner, limit=1000)
            records: list[CheckpointRecord] = list(page.records)
        finally:
            await stores.aclose()
        return {
            record.key: {**record.value, "version": record.version}
            for record in records
            if record.value["session_id"] == thread_id
        }

    return anyio.run(read)


def prism_run_id(run: ClientRun, step: int) -> str:
    """The Prism run id ``RUN_STARTED`` of ``step`` names in its metadata."""
    started = run.events(step)[0]
    assert started["type"] == "RUN_STARTED", started
    return str(started["metadata"]["prism_run_id"])


def wait_for(condition: Any, *, timeout_s: float = 30.0) -> None:
    """Poll ``condition()`` until it holds; fail (with what it saw) after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        time.sleep(0.05)
