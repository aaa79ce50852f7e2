"""The web tests' machinery: ``tests.web.faces_app`` under uvicorn in a child process on a
loopback socket of its own (stopped by its pid), and reads of what it stored.

Every wait is bounded; nothing here needs the network beyond loopback.
"""

from __future__ import annotations

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

from prism_core import AgentRunStatus, load_agent_run_state
from prism_core.durable import RECEIPT_OUTCOMES
from prism_store_sql import open_sql_stores

from .agents import REVISION, billing

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
TEAM = {"tenant_id": "acme"}


class Server:
    """``tests.web.faces_app:app`` under uvicorn on ``127.0.0.1`` (``auth``: ``team`` or
    ``default``), over the SQLite file ``db``, its refunds recorded in ``effects``."""

    def __init__(self, db: Path, effects: Path, *, auth: str = "team") -> None:
        self.db = db
        self.effects = effects
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": str(ROOT),
            "PRISM_WEB_TEST_DB": f"sqlite:///{db}",
            "PRISM_WEB_TEST_EFFECTS": str(effects),
            "PRISM_WEB_TEST_BASE": self.base,
            "PRISM_WEB_TEST_AUTH": auth,
        }
        command = [sys.executable, "-m", "uvicorn", "tests.web.faces_app:app"]
        command += ["--fd", str(sock.fileno()), "--log-level", "warning"]
        self.log_path = db.with_name(f"server-{self.port}.log")
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            command,
            env=env,
            pass_fds=[sock.fileno()],
            cwd=ROOT,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        sock.close()
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        card = f"{self.base}/a2a/.well-known/agent-card.json"
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the web test server exited:\n{self.log()}")
            try:
                if httpx.get(card, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the web test server did not start:\n{self.log()}")
            time.sleep(0.05)

    def log(self) -> str:
        """What the server wrote so far."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> None:
        """SIGTERM by pid, then SIGKILL if it lingers."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(STOP_TIMEOUT_S)
        self._log.close()


def order() -> str:
    """An order id of the calling test's own (a module's tests share one server)."""
    return f"A-{uuid.uuid4().hex[:10]}"


def bearer(name: str) -> dict[str, str]:
    """The team ``authorize``'s credentials for ``name``."""
    return {"authorization": f"Bearer {name}"}


def stored(db: Path, run_id: str) -> AgentRunStatus:
    """The run as the acme team's checkpoint store holds it."""

    async def read() -> AgentRunStatus | None:
        async with open_sql_stores(f"sqlite:///{db}") as stores:
            return await load_agent_run_state(
                stores.checkpoints, {"run_id": run_id}, ownership=TEAM
            )

    found = anyio.run(read)
    assert found is not None, run_id
    return found


def audit(db: Path, run_id: str) -> list[tuple[Any, ...]]:
    """The run's decisions: ``(actor, channel, outcome)`` (the receipts of the calls that
    ran, by the process that ran them, are :func:`receipts`)."""
    return [
        (r.actor, r.channel, r.outcome)
        for r in stored(db, run_id).audit
        if r.outcome not in RECEIPT_OUTCOMES
    ]


def receipts(db: Path, run_id: str) -> list[tuple[Any, ...]]:
    """The run's receipts: ``(channel, outcome)`` of each allowed call that ran."""
    return [
        (r.channel, r.outcome) for r in stored(db, run_id).audit if r.outcome in RECEIPT_OUTCOMES
    ]


def start_as(db: Path, effects: Path, actor: str, text: str) -> tuple[str, int]:
    """A run of ``text`` started by ``actor`` of the acme team, in this process on the
    server's stores (the host's own code starting a run), suspended before its refund; its
    run id and version."""

    async def run() -> tuple[str, int]:
        async with open_sql_stores(f"sqlite:///{db}") as stores:
            hosted = billing(effects).hosted(stores, definition_revision=REVISION, ownership=TEAM)
            result = await hosted.create_session().run(text, actor=actor)
        assert result.status == "suspended", result
        assert result.run_state is not None
        return result.run_id, result.run_state.version

    return anyio.run(run)
