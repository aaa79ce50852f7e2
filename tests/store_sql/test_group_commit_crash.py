"""Group commit under SIGKILL: many runs at once on one store pair, the worker killed mid-run.

Each worker process drives eight every-turn runs at once on one store pair (their turn
commits share group commits) with a side-effecting tool; the test SIGKILLs it at a random
moment, checks that every turn a run reported as committed (its provider was asked for the
next turn, which the runtime does only once the turn is durable) is in the store, and starts
the next worker, which continues the runs. After the kills a last worker finishes every run.
Checked: no committed turn is lost, no tool call applied its effect twice, every run ends
``succeeded`` with every call applied once.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from prism_cli._demo_stores import drop_demo_stores, open_demo_stores
from prism_core import AGENT_RUN_NAMESPACE
from tests.conftest import POSTGRES_URL, service_unavailable
from tests.store_plugins import STORE_PLUGINS

#: SIGKILL loops: ``make test-long`` runs them, ``make test`` does not.
pytestmark = pytest.mark.long

WORKER = Path(__file__).with_name("group_commit_worker.py")
SESSIONS = [f"s{i}" for i in range(8)]
TURNS = 16
KILLS = 4


def spawn(args: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), json.dumps(args)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def stored_turns(url: str, prefix: str) -> dict[str, tuple[str, int]]:
    """``{session: (status, completed turns)}`` of every run in the store."""

    async def read() -> dict[str, tuple[str, int]]:
        async with open_demo_stores(url, prefix, STORE_PLUGINS) as pair:
            page = await pair.checkpoints.list(AGENT_RUN_NAMESPACE, limit=100)
            return {
                r.value["session_id"]: (r.value["status"], r.value["counters"]["turns"])
                for r in page.records
            }

    return anyio.run(read)


def group_commit_crashes(url: str, work: Path, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    prefix = f"gcommit_{uuid.uuid4().hex[:8]}"
    effects = work / f"{prefix}-effects.jsonl"
    base = {
        "store": url,
        "prefix": prefix,
        "sessions": SESSIONS,
        "turns": TURNS,
        "effects": str(effects),
    }
    figures = {"kills": 0, "committed_lines": 0}
    try:
        for _ in range(KILLS):
            process = spawn(base)
            assert process.stdout is not None
            assert json.loads(process.stdout.readline()) == {"ready": True}
            # Killed after a random number of reported turns: mid-run, with commits of
            # several runs in flight.
            kill_after = rng.randint(4, 3 * len(SESSIONS))
            reported: dict[str, int] = {}
            seen = 0
            for line in process.stdout:
                if line.startswith("{") and line.endswith("}\n"):
                    record = json.loads(line)
                    if "session" in record:
                        figures["committed_lines"] += 1
                        session = record["session"]
                        reported[session] = max(reported.get(session, 0), record["turns"])
                        seen += 1
                        if seen >= kill_after:
                            process.send_signal(signal.SIGKILL)
                            figures["kills"] += 1
                            break
            process.wait(timeout=30)
            # What it reported before it died counts too.
            for line in process.stdout:
                if line.startswith("{") and line.endswith("}\n"):
                    record = json.loads(line)
                    if "session" in record:
                        figures["committed_lines"] += 1
                        session = record["session"]
                        reported[session] = max(reported.get(session, 0), record["turns"])
            process.stdout.close()
            stored = stored_turns(url, prefix)
            for session, turns in reported.items():
                status, kept = stored[session]
                assert kept >= turns or status == "succeeded", (
                    f"{session}: {turns} turns were reported committed, the store has {kept}"
                )
        process = spawn(base)
        assert process.stdout is not None
        out = [json.loads(x) for x in process.stdout if x.startswith("{")]
        process.stdout.close()
        assert process.wait(timeout=120) == 0
        assert out[-1] == {"done": dict.fromkeys(SESSIONS, "succeeded")}
        # A line cut short by a kill is no applied effect (the worker reads it the same way).
        calls = Counter(
            json.loads(x)["call"] for x in effects.read_text().splitlines() if x.endswith("}")
        )
        assert max(calls.values()) == 1, f"a tool call applied its effect twice: {calls}"
        assert set(calls) == {f"{s}t{t}" for s in SESSIONS for t in range(TURNS)}
    finally:
        drop_demo_stores(url, prefix, STORE_PLUGINS)
    return figures


def test_group_commit_survives_sigkill_on_sqlite(tmp_path: Path) -> None:
    figures = group_commit_crashes(f"sqlite:///{tmp_path / 'group.db'}", tmp_path, seed=5)
    assert figures["kills"] >= 1
    assert figures["committed_lines"] > 0


@pytest.mark.services
def test_group_commit_survives_sigkill_on_postgresql(tmp_path: Path) -> None:
    from tests.integration.test_crash_demo import reachable

    reason = reachable("127.0.0.1", 5432)
    if reason:
        service_unavailable("postgresql", reason)
    figures = group_commit_crashes(POSTGRES_URL, tmp_path, seed=7)
    assert figures["kills"] >= 1
    assert figures["committed_lines"] > 0
