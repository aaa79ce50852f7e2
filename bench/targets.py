"""Every speed target of the durable store path, PASS/FAIL, with the raw figures beside.

Each target is a ratio of Prism's figure over a floor measured in the same run, sample by
sample interleaved with it; the floor is always the plain driver doing the same durable work
with different bytes every time (never Prism's own code path):

- warm continue at 40 and 400 turns ≤ 2x its floor (stdlib ``sqlite3``: one read of the same
  branch rows and ``json.loads`` of each, plus one durable write);
- cold continue ≤ 3x its floor: a fresh process per sample, modules imported, timed from
  ``prism_core.open_stores`` (the stores not yet opened) through the load of the run's
  record (which opens the connection) to the model call, against a fresh
  process that connects with ``sqlite3``, reads and decodes the branch and makes one
  durable write;
- 32 sessions running every-turn runs at once on one store pair keep ≥ 50% of the turns/s of
  the same 32 sessions with no persistence (SQLite; PostgreSQL reported beside);
- one session alone, cost per turn (the every-turn run minus the same run with no
  persistence, per turn) ≤ 2x one raw durable write for an idempotent tool and ≤ 3x for a
  side-effecting one; checkpoint bytes flat from the first to the last turn (within 512 B);
  the memory store's cost per turn is shown for comparison with earlier runs;
- a run with notifications (``notify=True``, its end written to the outbox in its last
  commit) against the same run without, interleaved run by run (``bench/durable.py``): wall
  time per turn ≤ 1.05x, and not one commit more (SQLite, PostgreSQL);
- decide → dispatch (``bench/dispatch.py``): a decision recorded in this process starts its
  tool in an idle worker in another process with p50 ≤ 10 ms and p99 ≤ 50 ms on SQLite,
  PostgreSQL and Redis (absolute targets: the figure is the percentile itself).

A full run (the default; ``make bench``) makes three runs and reports each target's median
ratio over them, with each run's value; ``--quick`` (or ``PRISM_BENCH_QUICK=1``) makes one
short run for iterating. Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from _continue import QUESTION, _crash, _Floor, continue_once
from _support import (
    AGENT_ID,
    DEFAULT_POSTGRES_URL,
    DEFAULT_REDIS_URL,
    NAMESPACE,
    REVISION,
    Investigation,
    WorkerDied,
    drop_sql_tables_at,
    format_table,
    probe_postgres,
    probe_tool,
    unique_prefix,
    until_wal_steady,
)

from prism_core import (
    RunStateOptions,
    create_agent,
    create_memory_session_store,
    resume_agent_run,
)
from prism_core.codec import dumps

SCRIPT = Path(__file__).resolve()

WARM_TARGET = 2.0
COLD_TARGET = 3.0
CONCURRENT_TARGET = 0.5
IDEMPOTENT_TARGET = 2.0
EFFECT_TARGET = 3.0
BYTES_GROWTH_TARGET = 512
NOTIFY_TARGET = 1.05
DISPATCH_P50_MS = 10.0
DISPATCH_P99_MS = 50.0


@dataclass
class Figure:
    """One target's samples in one run: Prism's figure, the floor's, and their ratio."""

    ours: float
    raw: float
    ratio: float


@dataclass
class Target:
    """One target across runs."""

    name: str
    limit: float
    unit: str
    #: ``True``: the ratio must be at least ``limit`` (a throughput share); else at most.
    at_least: bool = False
    runs: list[Figure] = field(default_factory=list)
    note: str = ""

    def ok(self) -> bool:
        ratio = statistics.median(f.ratio for f in self.runs)
        return ratio >= self.limit if self.at_least else ratio <= self.limit


# -- continue ---------------------------------------------------------------------------------


async def cold_child(job: dict[str, Any]) -> float:
    """In a fresh interpreter, modules imported: ``open_stores``, the load of the run's
    record (the version a continue names; it opens the connection) and the continue up to
    the model call, timed; the agent is built between them, untimed."""
    import prism_store_sql
    from prism_core import open_stores

    run, turns = job["run"], job["turns"]
    start = time.perf_counter()
    pair = open_stores(job["url"], plugins=[prism_store_sql.plugin])
    record = await pair.checkpoints.load(NAMESPACE, run["run_id"])
    opened = time.perf_counter() - start
    try:
        provider = Investigation(turns, die_at=turns)
        agent = create_agent(
            id=AGENT_ID,
            model={"provider": "mock", "model": "demo"},
            store=pair.sessions,
            tools=[probe_tool()],
            provider=provider,
        )
        ref = {"run_id": run["run_id"], "session_id": run["session_id"]}
        decision = {"expected_version": record.version, "decision": "continue"}
        start = time.perf_counter()
        try:
            await resume_agent_run(
                agent, ref, decision, checkpoints=pair.checkpoints, definition_revision=REVISION
            )
        except WorkerDied:
            pass
        except BaseExceptionGroup as group:
            if group.subgroup(WorkerDied) is None:
                raise
        if not provider.calls:
            raise RuntimeError("the continue never reached the provider")
        return opened + provider.calls[0] - start
    finally:
        await pair.aclose()


def floor_child(job: dict[str, Any]) -> float:
    """In a fresh interpreter: connect with ``sqlite3``, read and decode the branch rows,
    one durable write (different bytes every time)."""
    start = time.perf_counter()
    connection = sqlite3.connect(job["path"], isolation_level=None)
    connection.execute("PRAGMA busy_timeout=5000")
    connection.execute("PRAGMA synchronous=FULL")
    rows = connection.execute(
        "SELECT payload FROM raw_branch WHERE session_id = ? ORDER BY seq", (job["session"],)
    ).fetchall()
    entries = [json.loads(row[0]) for row in rows]
    counter = time.time_ns()
    connection.execute("BEGIN")
    connection.execute(
        "INSERT INTO raw_bench (k, version, v) VALUES (?, ?, ?) "
        "ON CONFLICT (k) DO UPDATE SET version = excluded.version, v = excluded.v",
        ("claim", counter, f'{{"_n":{counter},{job["claim"][1:]}'),
    )
    connection.execute("COMMIT")
    elapsed = time.perf_counter() - start
    connection.close()
    assert len(entries) == job["entries"]
    return elapsed


def _child(mode: str, job: dict[str, Any]) -> float:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), f"--{mode}-child", json.dumps(job)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the {mode} child process failed:\n{done.stderr[-2000:]}")
    return float(done.stdout.strip().splitlines()[-1])


async def measure_continue(
    turns: int, warm_samples: int, cold_samples: int
) -> tuple[Figure, Figure | None, int]:
    """Warm (and, when ``cold_samples``, cold) continue against its floor at ``turns``."""
    from prism_store_sql import open_sql_stores

    with tempfile.TemporaryDirectory(prefix="prism-targets-") as name:
        tmp = Path(name)
        prefix = unique_prefix()
        db = tmp / "prism.db"
        url = f"sqlite:///{db}"
        checkpoints, sessions = open_sql_stores(url, table_prefix=prefix)
        warm: list[float] = []
        floor_warm: list[float] = []
        try:
            run = await _crash(checkpoints, sessions, turns)
            await continue_once(checkpoints, sessions, run, turns)  # warm-up
            record = await checkpoints.load(NAMESPACE, run["run_id"])
            floor = _Floor(tmp, str(db), prefix, run, record.value["leaf_id"])
            floor.claim = dumps(record.value).decode()
            entries = floor.entries
            try:
                floor.once()
                for _ in range(warm_samples):
                    warm.append(await continue_once(checkpoints, sessions, run, turns))
                    floor_warm.append(floor.once()[0])
            finally:
                floor.close()
            claim = floor.claim
        finally:
            await sessions.aclose()
            await checkpoints.aclose()
        warm_figure = _figure(warm, floor_warm)
        if not cold_samples:
            return warm_figure, None, entries
        job = {"url": f"{url}?table_prefix={prefix}", "run": run, "turns": turns}
        floor_job = {
            "path": str(tmp / "floor.db"),
            "session": run["session_id"],
            "claim": claim,
            "entries": entries,
        }
        cold: list[float] = []
        floor_cold: list[float] = []
        for _ in range(cold_samples):
            cold.append(_child("cold", job))
            floor_cold.append(_child("floor", floor_job))
        return warm_figure, _figure(cold, floor_cold), entries


def _figure(ours: Sequence[float], raw: Sequence[float]) -> Figure:
    a, b = statistics.median(ours) * 1000, statistics.median(raw) * 1000
    return Figure(a, b, a / b)


# -- many sessions on one store ---------------------------------------------------------------


async def _sessions_at_once(count: int, turns: int, checkpoints: Any, sessions: Any) -> float:
    """Turns per second of ``count`` sessions running at once (no persistence when
    ``checkpoints`` is ``None``)."""

    async def one() -> None:
        provider = Investigation(turns)
        agent = create_agent(
            id=AGENT_ID,
            model={"provider": "mock", "model": "demo"},
            store=sessions if checkpoints is not None else create_memory_session_store(),
            tools=[probe_tool()],
            provider=provider,
        )
        session = agent.create_session()
        if checkpoints is None:
            result = await session.run(QUESTION)
        else:
            options = RunStateOptions(checkpoints, REVISION, checkpoint_policy="every-turn")
            result = await session.run(QUESTION, run_state=options)
        if result.status != "succeeded":
            raise RuntimeError(f"a run ended {result.status}")

    gc.collect()
    start = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(count)))
    return count * turns / (time.perf_counter() - start)


async def measure_concurrent(url: str, prefix: str, args: argparse.Namespace) -> Figure:
    """``args.sessions`` sessions at once on one store pair at ``url`` against the same with
    no persistence, interleaved (the order flips every repeat); turns/s medians, their share."""
    from prism_store_sql import open_sql_stores

    count, turns = args.sessions, args.concurrent_turns
    checkpoints, sessions = open_sql_stores(url, table_prefix=prefix)
    ours: list[float] = []
    none: list[float] = []
    try:
        await _sessions_at_once(2, 3, checkpoints, sessions)  # warm-up: schema, statements
        await _sessions_at_once(2, 3, None, None)
        if url.startswith("sqlite:"):
            # The SQLite file's WAL in its steady state (see durable.py's warm-up).
            await until_wal_steady(
                checkpoints.database.path,
                lambda: _sessions_at_once(count, turns, checkpoints, sessions),
            )
        for rep in range(args.repeats):
            order = ["none", "ours"] if rep % 2 == 0 else ["ours", "none"]
            for kind in order:
                if kind == "none":
                    none.append(await _sessions_at_once(count, turns, None, None))
                else:
                    ours.append(await _sessions_at_once(count, turns, checkpoints, sessions))
    finally:
        await sessions.aclose()
        await checkpoints.aclose()
    a, b = statistics.median(ours), statistics.median(none)
    return Figure(a, b, a / b)


# -- one session's turn -----------------------------------------------------------------------


def _durable_args(args: argparse.Namespace) -> argparse.Namespace:
    return argparse.Namespace(
        turns=40,
        repeats=args.turn_repeats,
        resumes=1,
        postgres_url=args.postgres_url,
        redis_url=DEFAULT_REDIS_URL,
    )


# -- the run ----------------------------------------------------------------------------------


async def one_run(args: argparse.Namespace, targets: dict[str, Target], pg: str | None) -> None:
    import durable

    dargs = _durable_args(args)
    for store in ("sqlite", "postgres", "memory"):
        if store == "postgres" and pg is not None:
            continue
        result = await durable.measure_store(store, dargs, unique_prefix())
        raw = statistics.median(result.raw_writes) * 1000 if result.raw_writes else 0.0
        read_cost = statistics.median(result.pair_costs) * 1000
        effect_cost = statistics.median(result.effect_costs) * 1000
        if store == "memory":
            targets["memory"].runs.append(Figure(read_cost, 0.0, read_cost))
            continue
        label = "SQLite" if store == "sqlite" else "PostgreSQL"
        targets[f"idem {store}"].runs.append(Figure(read_cost, raw, read_cost / raw))
        targets[f"effect {store}"].runs.append(Figure(effect_cost, raw, effect_cost / raw))
        if result.raw_turn_writes:
            rows = statistics.median(result.raw_turn_writes) * 1000
            targets[f"idem rows {store}"].runs.append(Figure(read_cost, rows, read_cost / rows))
            targets[f"effect rows {store}"].runs.append(
                Figure(effect_cost, rows, effect_cost / rows)
            )
        per_turn = statistics.median(result.notify_runs) * 1000 / dargs.turns
        plain = statistics.median(result.every_runs) * 1000 / dargs.turns
        targets[f"notify {store}"].runs.append(
            Figure(per_turn, plain, statistics.median(result.notify_ratios))
        )
        extra = float(result.notify_commits - result.every_commits)
        targets[f"notify commits {store}"].runs.append(
            Figure(float(result.notify_commits), float(result.every_commits), extra)
        )
        growth = float(abs(result.bytes_turn_n - result.bytes_turn1))
        targets[f"bytes {store}"].runs.append(
            Figure(float(result.bytes_turn_n), float(result.bytes_turn1), growth)
        )
        targets[f"bytes {store}"].note = f"{label}: last turn vs first, bytes"
    for turns in args.continue_turns:
        warm, cold, _ = await measure_continue(
            turns, args.warm_samples, args.cold_samples if turns == args.continue_turns[0] else 0
        )
        targets[f"warm {turns}"].runs.append(warm)
        if cold is not None:
            targets[f"cold {turns}"].runs.append(cold)
    with tempfile.TemporaryDirectory(prefix="prism-targets-") as name:
        url = f"sqlite:///{Path(name) / 'many.db'}"
        targets["many sqlite"].runs.append(await measure_concurrent(url, unique_prefix(), args))
    if pg is None:
        prefix = unique_prefix()
        try:
            targets["many postgres"].runs.append(
                await measure_concurrent(args.postgres_url, prefix, args)
            )
        finally:
            await drop_sql_tables_at(args.postgres_url, prefix)
    await measure_dispatch(args, targets)


async def measure_dispatch(args: argparse.Namespace, targets: dict[str, Target]) -> None:
    """Decide → dispatch on every reachable backend (see ``bench/dispatch.py``)."""
    import dispatch

    dargs = argparse.Namespace(
        decisions=args.dispatch_decisions,
        backends=list(dispatch.BACKENDS),
        postgres_url=args.postgres_url,
        redis_url=DEFAULT_REDIS_URL,
    )
    names, _ = await dispatch.available(dargs)
    for name, side in (await dispatch.measure(names, dargs)).items():
        ms = [s * 1000 for s in side.latencies]
        for share, key in ((0.5, "p50"), (0.99, "p99")):
            value = dispatch.percentile(ms, share)
            targets[f"dispatch {key} {name}"].runs.append(Figure(value, 0.0, value))


def make_targets(args: argparse.Namespace) -> dict[str, Target]:
    t: dict[str, Target] = {}
    for turns in args.continue_turns:
        t[f"warm {turns}"] = Target(
            f"warm continue, {turns} turns (SQLite) / floor", WARM_TARGET, "ms"
        )
    t[f"cold {args.continue_turns[0]}"] = Target(
        f"cold continue, {args.continue_turns[0]} turns, new process (SQLite) / floor",
        COLD_TARGET,
        "ms",
    )
    t["many sqlite"] = Target(
        f"{args.sessions} sessions at once, SQLite: turns/s / no persistence",
        CONCURRENT_TARGET,
        "turns/s",
        at_least=True,
    )
    t["many postgres"] = Target(
        f"{args.sessions} sessions at once, PostgreSQL: turns/s / no persistence",
        CONCURRENT_TARGET,
        "turns/s",
        at_least=True,
    )
    for store, label in (("sqlite", "SQLite"), ("postgres", "PostgreSQL")):
        t[f"idem {store}"] = Target(
            f"idempotent-tool turn, {label}: cost / raw write", IDEMPOTENT_TARGET, "ms"
        )
        t[f"effect {store}"] = Target(
            f"side-effecting turn, {label}: cost / raw write", EFFECT_TARGET, "ms"
        )
        if store == "sqlite":
            for kind, what in (("idem", "idempotent-tool"), ("effect", "side-effecting")):
                t[f"{kind} rows {store}"] = Target(
                    f"  {what} turn, {label}: cost / the turn's own rows (info)",
                    float("inf"),
                    "ms",
                )
        t[f"bytes {store}"] = Target(
            f"checkpoint bytes, {label}: |last turn - first turn|", BYTES_GROWTH_TARGET, "B"
        )
        t[f"notify {store}"] = Target(
            f"turn with notifications, {label}: wall time / without", NOTIFY_TARGET, "ms"
        )
        t[f"notify commits {store}"] = Target(
            f"  commits of that run, {label}: extra over the run without", 0.0, "commits"
        )
    t["memory"] = Target("memory store: cost per turn (ms, no target)", float("inf"), "ms")
    for name, label in (("sqlite", "SQLite"), ("postgresql", "PostgreSQL"), ("redis", "Redis")):
        for key, limit in (("p50", DISPATCH_P50_MS), ("p99", DISPATCH_P99_MS)):
            t[f"dispatch {key} {name}"] = Target(
                f"decide -> dispatch {key}, {label}, another process (ms)", limit, "ms"
            )
    return t


def report(targets: dict[str, Target]) -> tuple[str, list[str]]:
    rows: list[list[str]] = []
    failed: list[str] = []
    for target in targets.values():
        if not target.runs:
            rows.append([target.name, "-", "-", "-", "-", "skipped"])
            continue
        ours = statistics.median(f.ours for f in target.runs)
        raw = statistics.median(f.raw for f in target.runs)
        ratio = statistics.median(f.ratio for f in target.runs)
        each = " / ".join(f"{f.ratio:.2f}" for f in target.runs)
        if target.limit == float("inf"):
            verdict, limit = "info", "-"
        else:
            ok = target.ok()
            verdict = "PASS" if ok else "FAIL"
            if not ok:
                failed.append(target.name)
            limit = f"{'>=' if target.at_least else '<='} {target.limit:g}"
        fmt = "{:.0f}" if target.unit in ("turns/s", "B", "commits") else "{:.3f}"
        rows.append(
            [
                target.name,
                f"{fmt.format(ours)} {target.unit}",
                f"{fmt.format(raw)} {target.unit}" if raw else "-",
                f"{ratio:.2f} ({each})",
                limit,
                verdict,
            ]
        )
    table = format_table(["target", "ours", "raw / floor", "ratio (each run)", "target", ""], rows)
    return table, failed


async def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    print(
        f"prism store targets: {args.runs} run(s), python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    pg = await probe_postgres(args.postgres_url)
    if pg is not None:
        print(f"  postgres: skipped ({pg})")
    targets = make_targets(args)
    for index in range(args.runs):
        await one_run(args, targets, pg)
        print(
            f"  run {index + 1}/{args.runs} done at {time.perf_counter() - started:.0f} s "
            f"(load average {os.getloadavg()[0]:.2f})"
        )
    table, failed = report(targets)
    print()
    print(table)
    print()
    print(f"targets missed: {', '.join(failed)}" if failed else "every target met")
    print(f"total {time.perf_counter() - started:.1f} s")
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="one short run (for iterating)")
    parser.add_argument("--runs", type=int, default=None, help="runs (default 3, quick 1)")
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument("--cold-child", help=argparse.SUPPRESS)
    parser.add_argument("--floor-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cold_child:
        print(anyio.run(cold_child, json.loads(args.cold_child), backend="asyncio"))
        return 0
    if args.floor_child:
        print(floor_child(json.loads(args.floor_child)))
        return 0
    quick = args.quick or os.environ.get("PRISM_BENCH_QUICK", "") not in ("", "0")
    args.runs = args.runs or (1 if quick else 3)
    args.continue_turns = [40, 400]
    args.warm_samples = 7 if quick else 15
    args.cold_samples = 3 if quick else 7
    args.turn_repeats = 3 if quick else 6
    args.concurrent_turns = 10 if quick else 20
    args.repeats = 2 if quick else 3
    args.dispatch_decisions = 50 if quick else 200
    return anyio.run(run, args, backend="asyncio")


if __name__ == "__main__":
    sys.exit(main())
