"""Decide here, run there, across processes: a decision recorded in another process reaches
an idle worker through the store's wake-up, on SQLite, PostgreSQL and Redis.

The worker (this process) polls every 10 minutes, far beyond the test's deadline, so only
the wake-up can bring it the decision; the decision is recorded by a subprocess once the
worker has made its first sweep and is waiting. The approved tool runs once, in the
worker's process (its PID is in the tool's log).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import attrs
import pytest

from prism_cli._demo_stores import drop_demo_stores, open_demo_stores
from prism_core import RunStateOptions, load_agent_run_state, run_worker
from prism_core.stores import StorePair
from tests.conftest import POSTGRES_URL, REDIS_URL, service_unavailable
from tests.store_plugins import STORE_PLUGINS

from .wake_app import REVISION, build_agent

APP = Path(__file__).with_name("wake_app.py")
#: The worker's poll: ten minutes, so a test that waited for it would time out first.
SLOW_POLL_MS = 600_000
DEADLINE_S = 60.0


@pytest.fixture
def anyio_backend() -> str:
    """The PostgreSQL and Redis stores are asyncio-only."""
    return "asyncio"


class Sweeps(logging.Handler):
    """Counts the worker's sweeps (its debug line after each)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0
        self.first = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("swept:"):
            self.count += 1
            self.first.set()


@attrs.frozen
class Stores:
    """A store pair and where it was opened (URL and prefix), for the deciding process."""

    pair: StorePair
    url: str
    prefix: str


@pytest.fixture
async def sweeps() -> AsyncIterator[Sweeps]:
    """The worker's sweeps, counted while the test runs."""
    logger = logging.getLogger("prism_core.workers")
    handler, level = Sweeps(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@pytest.fixture(params=["sqlite", "postgresql", "redis"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    """A store pair under a prefix of this test's own; PostgreSQL tables and Redis keys are
    dropped afterwards."""
    url = {
        "sqlite": f"sqlite:///{tmp_path / 'wake.db'}",
        "postgresql": POSTGRES_URL,
        "redis": REDIS_URL,
    }[request.param]
    prefix = f"wake{uuid.uuid4().hex[:10]}"
    pair = open_demo_stores(url, prefix, STORE_PLUGINS)
    try:
        try:
            await pair.checkpoints.list("probe")
        except Exception as exc:
            service_unavailable(request.param, f"{type(exc).__name__}: {exc}")
        yield Stores(pair, url, prefix)
    finally:
        await pair.aclose()
        await anyio.to_thread.run_sync(drop_demo_stores, url, prefix, STORE_PLUGINS)


@pytest.mark.anyio
async def test_a_decision_in_another_process_wakes_an_idle_worker(
    stores: Stores, sweeps: Sweeps, tmp_path: Path
) -> None:
    """Suspended run; a worker sweeps once and waits; a subprocess approves the call; the
    worker runs it to its end well before its poll would have come, in its own process."""
    checkpoints, sessions = stores.pair
    log = tmp_path / "refunds.jsonl"
    agent = build_agent(sessions, log)
    result = await agent.create_session().run(
        "refund A-1", run_state=RunStateOptions(checkpoints, REVISION)
    )
    assert result.status == "suspended"
    assert result.run_state is not None
    run_id, version = result.run_id, result.run_state.version

    def resolve(agent_id: str) -> tuple[object, str]:
        return build_agent(sessions, log), REVISION

    stop = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(
            lambda: run_worker(
                checkpoints=checkpoints,
                sessions=sessions,
                resolve_agent=resolve,
                poll_ms=SLOW_POLL_MS,
                stop=stop,
            )
        )
        try:
            with anyio.fail_after(DEADLINE_S):
                await sweeps.first.wait()
            job = {
                "store": stores.url,
                "prefix": stores.prefix,
                "log": str(log),
                "run_id": run_id,
                "version": version,
            }
            with anyio.fail_after(120):
                decided = await anyio.run_process(
                    [sys.executable, str(APP), json.dumps(job)],
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                )
            answer = json.loads(decided.stdout.decode().strip().splitlines()[-1])
            assert answer["status"] == "running"
            with anyio.fail_after(DEADLINE_S):
                while True:
                    status = await load_agent_run_state(checkpoints, {"run_id": run_id})
                    assert status is not None
                    if status.state.status == "succeeded":
                        break
                    await anyio.sleep(0.02)
            # One sweep before the decision, one after the wake-up: none from the poll.
            assert sweeps.count >= 2
        finally:
            stop.set()
    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert lines == [{"pid": os.getpid(), "order": "A-1"}]
    assert answer["pid"] != os.getpid()
