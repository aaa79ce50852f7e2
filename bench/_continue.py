"""Warm and cold ``continue`` on SQLite against their floor. Used by ``bench/durable.py``.

A worker runs the investigation for ``turns`` tool turns with every-turn checkpoints on a
SQLite file (both stores on one connection, as ``open_sql_stores`` opens them) and dies at the
provider call that follows its last turn. Each timed ``continue`` is
``resume_agent_run(agent, ref, {"expected_version": v, "decision": "continue"})`` from the
call to the moment the new provider's ``generate`` is called; that provider dies at once, so
the run is left claimed and running, exactly as a crash there leaves it, and the next sample
continues it again from the new version. The agent is built before the clock starts.

- warm: stores open, one continue already made in this process;
- cold: a new interpreter per sample: imports, ``open_sql_stores`` and ``create_agent`` are
  done before the clock starts; the first connection's opening is part of the continue;
- floor, timed interleaved with the warm samples: what any continue must do, with the plain
  driver and no framework: read the same branch entries' stored JSON with stdlib ``sqlite3``
  (one ``SELECT`` on an indexed table of the branch rows, in order) and ``json.loads`` each,
  then one durable write (WAL, ``synchronous=FULL``, a commit) of the claim's bytes, with
  different bytes every write.

Targets: warm ≤ 1.5 times the floor at each size; cold ≤ 10 ms at the first size.
"""

from __future__ import annotations

import gc
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _raw import RawSqlite
from _support import (
    AGENT_ID,
    NAMESPACE,
    REVISION,
    Investigation,
    WorkerDied,
    format_table,
    median_ms,
    probe_tool,
    run_until_the_worker_dies,
    unique_prefix,
)

from prism_core import RunStateOptions, create_agent, resume_agent_run
from prism_core.codec import dumps

__all__ = ("ContinueResult", "cold_child", "measure_continue", "report_continue")

WARM_RATIO_TARGET = 1.5
COLD_TARGET_MS = 10.0
QUESTION = "Checkout has failed intermittently since 12:40. Find the root cause."


@dataclass
class ContinueResult:
    """The warm, floor and cold samples (seconds) at one transcript size."""

    turns: int
    entries: int = 0
    warm: list[float] = field(default_factory=list)
    floor: list[float] = field(default_factory=list)
    floor_read: list[float] = field(default_factory=list)
    cold: list[float] = field(default_factory=list)


def _agent(sessions: Any, provider: Investigation) -> Any:
    return create_agent(
        id=AGENT_ID,
        model={"provider": "mock", "model": "demo"},
        store=sessions,
        tools=[probe_tool()],
        provider=provider,
    )


async def _crash(checkpoints: Any, sessions: Any, turns: int) -> dict[str, Any]:
    """A worker that dies at the provider call after ``turns`` tool turns; the ids of the run
    it leaves."""
    provider = Investigation(turns, die_at=turns)
    session = _agent(sessions, provider).create_session()
    options = RunStateOptions(checkpoints, REVISION, checkpoint_policy="every-turn")
    await run_until_the_worker_dies(session.run(QUESTION, run_state=options))
    (record,) = [
        r
        for r in (await checkpoints.list(NAMESPACE, limit=1000)).records
        if r.value["session_id"] == session.id
    ]
    return {"run_id": record.key, "session_id": session.id}


async def continue_once(checkpoints: Any, sessions: Any, run: dict[str, Any], turns: int) -> float:
    """One timed continue of ``run`` up to the provider call (seconds); the provider dies
    there, so the run can be continued again."""
    record = await checkpoints.load(NAMESPACE, run["run_id"])
    provider = Investigation(turns, die_at=turns)
    agent = _agent(sessions, provider)
    ref = {"run_id": run["run_id"], "session_id": run["session_id"]}
    decision = {"expected_version": record.version, "decision": "continue"}
    gc.collect()
    start = time.perf_counter()
    try:
        await resume_agent_run(
            agent, ref, decision, checkpoints=checkpoints, definition_revision=REVISION
        )
    except WorkerDied:
        pass
    except BaseExceptionGroup as group:
        if group.subgroup(WorkerDied) is None:
            raise
    if not provider.calls:
        raise RuntimeError("the continue never reached the provider")
    return provider.calls[0] - start


async def cold_child(job: dict[str, Any]) -> float:
    """In a fresh interpreter: open the stores, build the agent, time one continue."""
    from prism_store_sql import open_sql_stores

    checkpoints, sessions = open_sql_stores(job["url"], table_prefix=job["prefix"])
    try:
        return await continue_once(checkpoints, sessions, job["run"], job["turns"])
    finally:
        await sessions.aclose()
        await checkpoints.aclose()


def _run_cold(script: Path, job: dict[str, Any]) -> float:
    done = subprocess.run(
        [sys.executable, str(script), "--continue-child", json.dumps(job)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the cold continue process failed:\n{done.stderr[-2000:]}")
    return float(done.stdout.strip().splitlines()[-1])


class _Floor:
    """The plain-driver floor of a continue on a copy of the same branch rows."""

    def __init__(self, tmp: Path, db: str, prefix: str, run: dict[str, Any], leaf: str) -> None:
        self.raw = RawSqlite(str(tmp / "floor.db"))
        table = f"{prefix}session_entries"
        with sqlite3.connect(db) as source:
            rows = source.execute(
                f"WITH RECURSIVE b(id, parent_id, depth) AS (SELECT id, parent_id, 0 FROM {table} "
                f"WHERE id = ? UNION ALL SELECT e.id, e.parent_id, b.depth + 1 FROM {table} e "
                f"JOIN b ON e.id = b.parent_id) SELECT e.payload FROM {table} e JOIN b "
                "ON e.id = b.id ORDER BY b.depth DESC",
                (leaf,),
            ).fetchall()
        self.entries = len(rows)
        self.session = run["session_id"]
        self.raw.fill_branch(self.session, [row[0] for row in rows])
        self.claim = ""

    def once(self) -> tuple[float, float]:
        """One read of the branch and one durable write: (total, read) seconds. Like each
        continue sample, it starts right after a full garbage collection (the same state of
        the caches for both sides)."""
        gc.collect()
        start = time.perf_counter()
        entries = self.raw.read_branch(self.session)
        read = time.perf_counter()
        self.raw.write("claim", self.claim)
        end = time.perf_counter()
        assert len(entries) == self.entries
        return end - start, read - start

    def close(self) -> None:
        self.raw.close()


async def measure_continue(
    sizes: Sequence[int], warm_samples: int, cold_samples: int, script: Path
) -> list[ContinueResult]:
    """Warm, floor and cold samples at each size in ``sizes`` (cold only at the first)."""
    from prism_store_sql import open_sql_stores

    results = []
    for index, turns in enumerate(sizes):
        out = ContinueResult(turns)
        with tempfile.TemporaryDirectory(prefix="prism-continue-") as name:
            tmp = Path(name)
            prefix = unique_prefix()
            db = tmp / "prism.db"
            url = f"sqlite:///{db}"
            checkpoints, sessions = open_sql_stores(url, table_prefix=prefix)
            try:
                run = await _crash(checkpoints, sessions, turns)
                await continue_once(checkpoints, sessions, run, turns)  # warm-up
                record = await checkpoints.load(NAMESPACE, run["run_id"])
                floor = _Floor(tmp, str(db), prefix, run, record.value["leaf_id"])
                floor.claim = dumps(record.value).decode()
                out.entries = floor.entries
                try:
                    floor.once()
                    for _ in range(warm_samples):
                        out.warm.append(await continue_once(checkpoints, sessions, run, turns))
                        total, read = floor.once()
                        out.floor.append(total)
                        out.floor_read.append(read)
                finally:
                    floor.close()
            finally:
                await sessions.aclose()
                await checkpoints.aclose()
            if index == 0:
                job = {"url": url, "prefix": prefix, "run": run, "turns": turns}
                for _ in range(cold_samples):
                    out.cold.append(_run_cold(script, job))
        results.append(out)
    return results


def report_continue(results: Sequence[ContinueResult]) -> tuple[str, list[str]]:
    """The table of the continue figures and the list of missed targets."""
    failures: list[str] = []
    rows: list[list[str]] = []

    def verdict(ok: bool, what: str) -> str:
        if not ok:
            failures.append(what)
        return "PASS" if ok else "FAIL"

    for r in results:
        warm, floor = median_ms(r.warm), median_ms(r.floor)
        ratio = warm / floor
        spread = f"{min(r.warm) * 1000:.3f}..{max(r.warm) * 1000:.3f}"
        rows.append(
            [f"warm continue, {r.turns} turns ({r.entries} entries)", "-", f"{warm:.3f} ({spread})"]
        )
        rows.append(
            [
                "  floor: sqlite3 read + json decode + raw write",
                "-",
                f"{floor:.3f} (read + decode {median_ms(r.floor_read):.3f})",
            ]
        )
        what = f"warm continue / floor at {r.turns} turns"
        rows.append(
            [
                "  warm continue / floor",
                f"<= {WARM_RATIO_TARGET}",
                f"{ratio:.2f} {verdict(ratio <= WARM_RATIO_TARGET, what)}",
            ]
        )
        if r.cold:
            cold = median_ms(r.cold)
            spread = f"{min(r.cold) * 1000:.3f}..{max(r.cold) * 1000:.3f}"
            ok = cold <= COLD_TARGET_MS
            rows.append(
                [
                    f"cold continue, {r.turns} turns (new process, median ms)",
                    f"<= {COLD_TARGET_MS:g} ms",
                    f"{cold:.3f} ({spread}, {len(r.cold)} processes) "
                    f"{verdict(ok, f'cold continue at {r.turns} turns')}",
                ]
            )
    return format_table(["continue on SQLite (ms)", "target", "value"], rows), failures
