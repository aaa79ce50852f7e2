"""Split brain: a worker frozen inside a side-effecting tool wakes after another took over.

Worker A starts a durable every-turn run (lease 1 s) whose ``pay`` tool is marked dispatched
and enters; the test freezes A with SIGSTOP before the tool applies its effect. Worker B waits
for A's lease to lapse, continues the run (the claim raises the fencing token to 1), and the
tool's ``reconcile`` fences the host's ledger at that token before it looks: nothing was paid,
so the call runs again in B and pays under token 1. Then the test wakes A with SIGCONT: its
payment carries token 0 and the ledger refuses it. Exactly one payment is applied, on SQLite
and on PostgreSQL, and the late one is recorded as refused.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import POSTGRES_URL, service_unavailable

from .split_brain_worker import Ledger
from .test_crash_demo import reachable

pytestmark = pytest.mark.long

WORKER = Path(__file__).with_name("split_brain_worker.py")


def _spawn(args: dict[str, Any]) -> subprocess.Popen[str]:
    root = Path(__file__).resolve().parents[2]
    return subprocess.Popen(
        [sys.executable, str(WORKER), json.dumps(args)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(root)},
    )


def _last_line(process: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    out, _ = process.communicate(timeout=timeout)
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert lines, f"worker printed nothing (exit {process.returncode})"
    return lines[-1]


def _wait_for(path: Path, process: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, "the worker ended before its tool started"
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)


def split_brain(store: str, ledger_url: str, work: Path) -> tuple[Ledger, dict[str, Any]]:
    """Run the scenario; the ledger and what each worker printed."""
    prefix = f"sb{uuid.uuid4().hex[:10]}_"
    ledger = Ledger(ledger_url, prefix)
    ledger.create()
    markers = work / "markers"
    markers.mkdir()
    common = {
        "store": store,
        "ledger": ledger_url,
        "ledger_prefix": prefix,
        "markers": str(markers),
        "session": "invoice-7",
        "work": 1.0,
    }
    first = _spawn({**common, "mode": "start"})
    frozen = False
    try:
        _wait_for(markers / f"entered-{first.pid}", first)
        os.kill(first.pid, signal.SIGSTOP)
        frozen = True
        second = _spawn({**common, "mode": "continue"})
        taken_over = _last_line(second, timeout=120)
        assert (markers / f"entered-{second.pid}").read_text() == "1"
        os.kill(first.pid, signal.SIGCONT)
        frozen = False
        late = _last_line(first, timeout=60)
    finally:
        if frozen:
            os.kill(first.pid, signal.SIGCONT)
        if first.poll() is None:
            first.kill()
            first.wait()
    assert (markers / f"entered-{first.pid}").read_text() == "0"
    return ledger, {"taken_over": taken_over, "late": late, "pids": (first.pid, second.pid)}


def _check(ledger: Ledger, seen: dict[str, Any]) -> None:
    first, second = seen["pids"]
    effects = ledger.rows("effects")
    refused = ledger.rows("refused")
    assert len(effects) == 1, effects
    ((key, token, pid),) = effects
    assert (token, pid) == (1, second)
    assert [(k, t, p) for k, t, p in refused] == [(key, 0, first)]
    assert seen["taken_over"] == {"status": "succeeded", "fencing_token": 1}
    # The frozen worker wrote nothing after the takeover: its run ended on the conflict.
    assert seen["late"]["code"] == "ERR_PRISM_CHECKPOINT_CONFLICT"


def test_a_late_fenced_effect_is_refused_on_sqlite(tmp_path: Path) -> None:
    """SQLite stores and a SQLite ledger: one payment, and the late one refused."""
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    ledger_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    ledger, seen = split_brain(store, ledger_url, tmp_path)
    _check(ledger, seen)


@pytest.mark.services
def test_a_late_fenced_effect_is_refused_on_postgresql(tmp_path: Path) -> None:
    """PostgreSQL stores (own table prefix) and a PostgreSQL ledger: the same."""
    reason = reachable("127.0.0.1", 5432)
    if reason:
        service_unavailable("postgresql", reason)
    prefix = f"prism_sb{uuid.uuid4().hex[:8]}_"
    store = f"{POSTGRES_URL}?table_prefix={prefix}"
    ledger: Ledger | None = None
    try:
        ledger, seen = split_brain(store, POSTGRES_URL, tmp_path)
        _check(ledger, seen)
    finally:
        if ledger is not None:
            ledger.drop()
        _drop_prefix(prefix)


def _drop_prefix(prefix: str) -> None:
    import psycopg

    with psycopg.connect(POSTGRES_URL) as db:
        tables = db.execute(
            "SELECT tablename FROM pg_tables WHERE starts_with(tablename, %s)", (prefix,)
        ).fetchall()
        for (table,) in tables:
            db.execute(f'DROP TABLE IF EXISTS "{table}" CASCADE')
