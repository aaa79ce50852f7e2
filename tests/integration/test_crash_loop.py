"""A crash loop: worker processes SIGKILLed at random points, continued until every run ends.

Each run charges six line items through one tool that is idempotent, reconcilable or plain;
the host logs each applied charge under ``context.idempotency_key``. The short loop (CI) kills
10 workers on SQLite; ``PRISM_CRASH_LOOP=50`` kills that many per backend on SQLite,
PostgreSQL and Redis. Checked: no charge is applied twice; idempotent and reconcilable runs
finish with no operator; plain runs finish after one resolution per in-doubt refusal, given
as the docs describe (``completed`` with the logged result, or ``not_started``).
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

import attrs
import pytest

from prism_cli._demo_stores import drop_demo_stores
from tests.conftest import POSTGRES_URL, REDIS_URL, service_unavailable
from tests.store_plugins import STORE_PLUGINS

from .test_crash_demo import reachable

#: A loop of SIGKILLs: ``make test-long`` runs it, ``make test`` does not.
pytestmark = pytest.mark.long

WORKER = Path(__file__).with_name("crash_loop_worker.py")
LONG = int(os.environ.get("PRISM_CRASH_LOOP", "0") or 0)
KINDS = ("idempotent", "reconcile", "plain")


@attrs.define
class Figures:
    """What one loop observed."""

    kills: int = 0
    runs: int = 0
    in_doubt: int = 0
    never_started: int = 0
    resolutions: int = 0
    operator_runs: set[str] = attrs.field(factory=set)


def spawn(args: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), json.dumps(args)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def lines(process: subprocess.Popen[str]) -> list[dict[str, Any]]:
    assert process.stdout is not None
    out = [json.loads(line) for line in process.stdout if line.startswith("{")]
    process.stdout.close()
    return out


def crash_loop(url: str, kills: int, work: Path, seed: int) -> Figures:
    """Kill ``kills`` workers at random points, continuing each run until it ends."""
    rng = random.Random(seed)
    prefix = f"crashloop_{uuid.uuid4().hex[:8]}"
    figures = Figures()
    try:
        while figures.kills < kills:
            kind = KINDS[figures.runs % len(KINDS)]
            session = f"run{figures.runs}"
            figures.runs += 1
            effects = work / f"{prefix}-{session}.jsonl"
            base = {
                "store": url,
                "prefix": prefix,
                "session": session,
                "kind": kind,
                "effects": str(effects),
                "think": 0.01,
                "work": 0.03,
            }
            to_kill = min(kills - figures.kills, rng.randint(1, 3))
            resolutions: list[dict[str, Any]] | None = None
            seen_doubt: set[str] = set()
            for _ in range(40):
                process = spawn({**base, "resolutions": resolutions})
                assert process.stdout is not None
                ready = process.stdout.readline()
                assert json.loads(ready) == {"ready": True}
                if to_kill:
                    try:
                        process.wait(timeout=rng.uniform(0.0, 0.45))
                    except subprocess.TimeoutExpired:
                        process.send_signal(signal.SIGKILL)
                        process.wait(timeout=30)
                        lines(process)
                        figures.kills += 1
                        to_kill -= 1
                        # A worker killed after its claim has settled the calls its
                        # resolutions named; naming them again would be refused as calls the
                        # run no longer owes. The next refusal names what is in doubt now.
                        resolutions = None
                        continue
                out = lines(process)
                process.wait(timeout=60)
                for line in out:
                    if "never_started" in line:
                        fresh = set(line["in_doubt"]) - seen_doubt
                        seen_doubt |= fresh
                        figures.in_doubt += len(fresh)
                        figures.never_started += len(set(line["never_started"]) & fresh)
                final = out[-1] if out else {}
                if final.get("status") == "succeeded":
                    break
                assert final.get("code") == "ERR_PRISM_TOOL_IN_DOUBT", (out, process.returncode)
                # Only plain runs ever need the operator.
                assert kind == "plain", out
                assert resolutions is None or not set(final["in_doubt"]) & {
                    r["tool_call_id"] for r in resolutions
                }, "a resolution did not settle its call"
                figures.operator_runs.add(session)
                applied = _applied(effects)
                resolutions = [
                    {"tool_call_id": call, "outcome": "completed", "result": applied[call]}
                    if call in applied
                    else {"tool_call_id": call, "outcome": "not_started"}
                    for call in final["in_doubt"]
                ]
                figures.resolutions += 1
            else:
                pytest.fail(f"run {session} never finished")
            charges = Counter(json.loads(x)["key"] for x in effects.read_text().splitlines())
            assert charges, "the run charged nothing"
            assert max(charges.values()) == 1, f"a charge was applied twice: {charges}"
            assert len(charges) == 6
    finally:
        drop_demo_stores(url, prefix, STORE_PLUGINS)
    return figures


def _applied(effects: Path) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if effects.exists():
        for line in effects.read_text().splitlines():
            record = json.loads(line)
            found.setdefault(record["call"], record["value"])
    return found


def report(name: str, figures: Figures) -> None:
    print(
        f"\ncrash loop on {name}: {figures.kills} kills over {figures.runs} runs; "
        f"{figures.in_doubt} calls in doubt, {figures.never_started} of them never started; "
        f"{figures.resolutions} operator resolutions in {len(figures.operator_runs)} plain runs"
    )


def test_crash_loop_on_sqlite(tmp_path: Path) -> None:
    figures = crash_loop(f"sqlite:///{tmp_path / 'loop.db'}", LONG or 10, tmp_path, seed=11)
    report("SQLite", figures)
    assert figures.kills == (LONG or 10)


@pytest.mark.services
@pytest.mark.parametrize("backend", ["postgresql", "redis"])
def test_crash_loop_on_servers(tmp_path: Path, backend: str) -> None:
    """A few kills in CI; ``PRISM_CRASH_LOOP`` kills on the long run."""
    url, port = (POSTGRES_URL, 5432) if backend == "postgresql" else (REDIS_URL, 6379)
    reason = reachable("127.0.0.1", port)
    if reason:
        service_unavailable(backend, reason)
    kills = LONG or 3
    figures = crash_loop(url, kills, tmp_path, seed=23)
    report(backend, figures)
    assert figures.kills == kills
