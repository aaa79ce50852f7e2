"""Real Celery workers for the tests and the bench: started as processes, killed by pid.

A :class:`Rig` owns one isolated setup: a key prefix on the shared Redis (broker and result
backend), a table prefix on the shared PostgreSQL (the stores), an effect log file, and the
worker processes it started. :meth:`Rig.close` kills every worker it started (by pid) and
drops what it created on both servers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import anyio

from prism_cli._demo_stores import drop_demo_stores
from prism_core import AgentRunSummary, list_agent_runs, open_checkpoint_store
from tests.store_plugins import STORE_PLUGINS

from .agents import EffectLog
from .app import RECOVERY_QUEUE, build_app

ROOT = Path(__file__).resolve().parents[2]
POSTGRES_URL = os.environ.get(
    "PRISM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("PRISM_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


class Rig:
    """One isolated Celery setup on the shared Redis and PostgreSQL servers."""

    def __init__(
        self,
        work: Path,
        *,
        lease_ms: int = 2000,
        visibility_timeout: float = 10.0,
        turns: int = 3,
        think: float = 0.05,
    ) -> None:
        self.prefix = f"pcel_{uuid.uuid4().hex[:10]}"
        self.work = work
        self.store = f"{POSTGRES_URL}?table_prefix={self.prefix}_"
        self.effects = EffectLog(work / f"{self.prefix}-effects.jsonl")
        self.env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "PRISM_CELERY_TEST_PREFIX": self.prefix,
            "PRISM_CELERY_TEST_BROKER": REDIS_URL,
            "PRISM_CELERY_TEST_STORE": self.store,
            "PRISM_CELERY_TEST_VISIBILITY": str(visibility_timeout),
            "PRISM_CELERY_TEST_LEASE_MS": str(lease_ms),
            "PRISM_CELERY_TEST_TURNS": str(turns),
            "PRISM_CELERY_TEST_THINK": str(think),
            "PRISM_CELERY_TEST_EFFECTS": str(self.effects.path),
        }
        self.app, self.tasks = build_app(
            prefix=self.prefix,
            broker=REDIS_URL,
            store=self.store,
            visibility_timeout=visibility_timeout,
            lease_ms=lease_ms,
        )
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self._count = 0

    def log(self, name: str) -> Path:
        """The log file of worker ``name``."""
        return self.work / f"{self.prefix}-{name}.log"

    def start_worker(self, *, wait: bool = True) -> str:
        """Start one worker process (solo pool) and return its name; wait until it consumes."""
        self._count += 1
        name = f"w{self._count}"
        with self.log(name).open("wb") as out:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "tests.celery.app",
                    "worker",
                    "--pool=solo",
                    "--without-gossip",
                    "--without-mingle",
                    "--without-heartbeat",
                    "--loglevel=INFO",
                    "-Q",
                    f"celery,{RECOVERY_QUEUE}",
                    "-n",
                    f"{name}.{self.prefix}@%h",
                ],
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.workers[name] = process
        if wait:
            self.wait_ready(name)
        return name

    def ready(self, name: str) -> bool:
        """Whether worker ``name`` has logged that it consumes tasks."""
        return b" ready." in self.log(name).read_bytes()

    def wait_ready(self, name: str, timeout: float = 60.0) -> None:
        """Block until worker ``name`` logs that it is ready."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready(name):
                return
            if self.workers[name].poll() is not None:
                raise RuntimeError(f"worker {name} exited:\n{self.log(name).read_text()}")
            time.sleep(0.1)
        raise TimeoutError(f"worker {name} not ready after {timeout}s")

    def pid(self, name: str) -> int:
        """The process id of worker ``name``."""
        return self.workers[name].pid

    def kill(self, name: str) -> float:
        """SIGKILL worker ``name`` (by its pid); return when it was killed (epoch seconds)."""
        process = self.workers.pop(name)
        os.kill(process.pid, signal.SIGKILL)
        killed = time.time()
        process.wait(timeout=30)
        return killed

    def runs(self) -> list[AgentRunSummary]:
        """Every durable run in the rig's checkpoint store."""
        return anyio.run(_all_runs, self.store, None)

    def recoverable(self) -> list[AgentRunSummary]:
        """The running runs no live worker holds."""
        return anyio.run(_all_runs, self.store, True)

    def wait_for(self, check: Any, timeout: float, what: str) -> Any:
        """Poll ``check()`` until it returns something truthy; fail after ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = check()
            if value:
                return value
            time.sleep(0.2)
        raise TimeoutError(f"{what} after {timeout}s")

    def close(self) -> None:
        """Kill every worker still running (by pid) and drop the rig's keys and tables."""
        for name in list(self.workers):
            self.kill(name)
        self.app.close()
        drop_demo_stores(REDIS_URL, self.prefix, STORE_PLUGINS)
        drop_demo_stores(POSTGRES_URL, self.prefix, STORE_PLUGINS)


async def _all_runs(store_url: str, recoverable: bool | None) -> list[AgentRunSummary]:
    import prism_store_sql

    found: list[AgentRunSummary] = []
    async with open_checkpoint_store(store_url, plugins=[prism_store_sql.plugin]) as checkpoints:
        cursor = None
        while True:
            page = await list_agent_runs(checkpoints, recoverable=recoverable, cursor=cursor)
            found.extend(page.runs)
            cursor = page.cursor
            if cursor is None:
                return found
