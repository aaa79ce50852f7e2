"""Every speed target of the durable path, PASS/FAIL, with the raw figures beside.

Each target is a ratio of Prism's figure over a yardstick measured in the same run, sample by
sample (or run by run) interleaved with it, medians over the repeats. A "raw" yardstick is
always the plain driver doing the same durable work with different bytes every time, never
Prism's own code path. The rows, numbered as the targets (bench/README.md):

1. warm continue ≤ LangGraph's resume of the same crashed workload at 40 and 400 turns on
   SQLite and PostgreSQL (``bench/_targets_more.py``), and ≤ 2x its floor at 40, 400 and
   2,000 turns (stdlib ``sqlite3``: one read of the same branch rows and ``json.loads`` of
   each, plus one durable write);
2. cold continue (a new process per sample, the host under ``asyncio.run``, the stores
   opened from the URL as the docs show: ``open_stores(url,
   plugins=discover_store_plugins(url))``, timed from the opening through the model call)
   ≤ LangGraph's (``from_conn_string`` plus its resume) and ≤ 3x its floor (a new process
   that connects with ``sqlite3``, reads and decodes the branch and makes one durable write);
3. one session's cost per turn (the every-turn run minus the same run with no persistence,
   per turn) ≤ 2x the plain driver writing the turn's own rows (the checkpoint, the turn's
   two entries, the session head) in one commit for an idempotent tool, ≤ 3x for a
   side-effecting one, on SQLite, PostgreSQL and Redis; that cost at 2,000 turns within
   1.2x of its cost at 40; checkpoint bytes flat (within 512 B); the one-row raw write and
   the memory store's cost per turn shown for information;
4. with no persistence, a sync tool's turn ≤ 1.2x an async tool's; a run on a PostgreSQL
   session store without a durable run no dearer per turn than the same run made durable;
5. 32 sessions running every-turn runs at once on one store pair keep ≥ 60% of the turns/s
   of the same 32 sessions with no persistence (SQLite, PostgreSQL);
6. decide → dispatch (``bench/dispatch.py``): a decision recorded in this process starts its
   tool in an idle worker in another process with p50 ≤ 10 ms and p99 ≤ 50 ms on SQLite,
   PostgreSQL and Redis (absolute: the figure is the percentile itself);
7. ``prism runs list`` and ``prism runs show`` ≤ 0.3 s wall (a subprocess each, median;
   ``python -c pass`` beside it);
8. effect records: a side-effecting every-turn run over the same run whose saves reach the
   store without their ledger rows ≤ 1.05 and not one commit more; notifications
   (``notify=True``, the run's end written to the outbox in its last commit) against the
   same run without: wall time ≤ 1.05x and not one commit more (SQLite, PostgreSQL).

A full run (the default; ``make bench``) makes three runs and reports each target's median
ratio over them, with each run's value; ``--quick`` (or ``PRISM_BENCH_QUICK=1``) makes one
short run for iterating. An unreachable PostgreSQL or Redis leaves its rows ``skipped``;
without the ``bench`` extra (LangGraph) its rows are skipped too. Exit status 1 when a target
is missed.
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
    probe_postgres,
    probe_redis,
    probe_tool,
    unique_prefix,
    until_wal_steady,
)
from _targets_table import Figure, Target, make_targets, report

from prism_core import (
    RunStateOptions,
    create_agent,
    create_memory_session_store,
    resume_agent_run,
)
from prism_core.codec import dumps

SCRIPT = Path(__file__).resolve()


# -- continue ---------------------------------------------------------------------------------


async def cold_child(job: dict[str, Any]) -> float:
    """In a fresh interpreter, modules imported, the host under ``asyncio.run``: the stores
    opened from the URL as the docs show (``open_stores(url,
    plugins=discover_store_plugins(url))``), the load of the run's record (the version a
    continue names; it opens the connection) and the continue up to the model call, timed;
    the agent is built between them, untimed."""
    import prism_store_sql  # noqa: F401  (a module import, before the clock, as sqlite3's)
    from prism_core import discover_store_plugins, open_stores

    run, turns, url = job["run"], job["turns"], job["url"]
    start = time.perf_counter()
    pair = open_stores(url, plugins=discover_store_plugins(url))
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
        redis_url=args.redis_url,
    )


# -- the run ----------------------------------------------------------------------------------


async def one_run(
    args: argparse.Namespace, targets: dict[str, Target], skipped: dict[str, str]
) -> None:
    import durable
    from _targets_more import (
        measure_cli,
        measure_flat,
        measure_langgraph,
        measure_ledger,
        measure_session_only,
        measure_sync_tool,
    )

    dargs = _durable_args(args)
    for store in ("sqlite", "postgres", "redis", "memory"):
        if store in skipped:
            continue
        result = await durable.measure_store(store, dargs, unique_prefix())
        raw = statistics.median(result.raw_writes) * 1000 if result.raw_writes else 0.0
        read_cost = statistics.median(result.pair_costs) * 1000
        effect_cost = statistics.median(result.effect_costs) * 1000
        if store == "memory":
            targets["memory"].runs.append(Figure(read_cost, 0.0, read_cost))
            continue
        targets[f"idem {store}"].runs.append(Figure(read_cost, raw, read_cost / raw))
        targets[f"effect {store}"].runs.append(Figure(effect_cost, raw, effect_cost / raw))
        if result.raw_turn_writes:
            rows = statistics.median(result.raw_turn_writes) * 1000
            targets[f"idem rows {store}"].runs.append(Figure(read_cost, rows, read_cost / rows))
            targets[f"effect rows {store}"].runs.append(
                Figure(effect_cost, rows, effect_cost / rows)
            )
        if store == "redis":
            continue
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
    for turns in args.continue_turns:
        warm, cold, _ = await measure_continue(
            turns, args.warm_samples, args.cold_samples if turns == args.continue_turns[0] else 0
        )
        targets[f"warm {turns}"].runs.append(warm)
        if cold is not None:
            targets[f"cold {turns}"].runs.append(cold)
    for store in ("sqlite", "postgres"):
        if store in skipped or args.no_langgraph:
            continue
        prefix = unique_prefix()
        versus = await measure_langgraph(
            store, args, prefix, args.langgraph_turns, args.warm_samples, args.cold_samples
        )
        for turns, figure in versus.warm.items():
            targets[f"lg warm {store} {turns}"].runs.append(figure)
        if versus.cold is not None:
            targets[f"lg cold {store}"].runs.append(versus.cold)
    short, long = args.flat_turns
    for store in ("sqlite", "postgres", "redis"):
        if store in skipped:
            continue
        figure = await measure_flat(store, args, unique_prefix(), short, long, args.flat_repeats)
        targets[f"flat {store}"].runs.append(figure)
    targets["sync tool"].runs.append(await measure_sync_tool(40, args.turn_repeats * 2))
    if "postgres" not in skipped:
        prefix = unique_prefix()
        try:
            figure = await measure_session_only(
                args.postgres_url, prefix, 40, args.turn_repeats * 2
            )
            targets["session only postgres"].runs.append(figure)
        finally:
            await drop_sql_tables_at(args.postgres_url, prefix)
    for store in ("sqlite", "postgres"):
        if store in skipped:
            continue
        wall, commits = await measure_ledger(store, args, unique_prefix(), 40, args.turn_repeats)
        targets[f"ledger {store}"].runs.append(wall)
        targets[f"ledger commits {store}"].runs.append(commits)
    with tempfile.TemporaryDirectory(prefix="prism-targets-") as name:
        url = f"sqlite:///{Path(name) / 'many.db'}"
        targets["many sqlite"].runs.append(await measure_concurrent(url, unique_prefix(), args))
    if "postgres" not in skipped:
        prefix = unique_prefix()
        try:
            targets["many postgres"].runs.append(
                await measure_concurrent(args.postgres_url, prefix, args)
            )
        finally:
            await drop_sql_tables_at(args.postgres_url, prefix)
    for command, figure in (await measure_cli(args.cli_samples)).items():
        targets[f"cli {command}"].runs.append(figure)
    await measure_dispatch(args, targets)


async def measure_dispatch(args: argparse.Namespace, targets: dict[str, Target]) -> None:
    """Decide → dispatch on every reachable backend (see ``bench/dispatch.py``)."""
    import dispatch

    dargs = argparse.Namespace(
        decisions=args.dispatch_decisions,
        backends=list(dispatch.BACKENDS),
        postgres_url=args.postgres_url,
        redis_url=args.redis_url,
    )
    names, _ = await dispatch.available(dargs)
    for name, side in (await dispatch.measure(names, dargs)).items():
        ms = [s * 1000 for s in side.latencies]
        for share, key in ((0.5, "p50"), (0.99, "p99")):
            value = dispatch.percentile(ms, share)
            targets[f"dispatch {key} {name}"].runs.append(Figure(value, 0.0, value))


async def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    print(
        f"prism store targets: {args.runs} run(s), python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    skipped: dict[str, str] = {}
    for store, reason in (
        ("postgres", await probe_postgres(args.postgres_url)),
        ("redis", await probe_redis(args.redis_url)),
    ):
        if reason is not None:
            skipped[store] = reason
            print(f"  {store}: skipped ({reason})")
    if not args.no_langgraph:
        try:
            import _langgraph  # noqa: F401
        except ImportError as exc:
            args.no_langgraph = True
            print(f"  LangGraph rows: skipped ({exc}; pip install -e '.[bench]')")
    targets = make_targets(args)
    for index in range(args.runs):
        await one_run(args, targets, skipped)
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
    parser.add_argument("--redis-url", default=DEFAULT_REDIS_URL)
    parser.add_argument(
        "--no-langgraph", action="store_true", help="leave out the rows against LangGraph"
    )
    parser.add_argument("--cold-child", help=argparse.SUPPRESS)
    parser.add_argument("--floor-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cold_child:
        print(asyncio.run(cold_child(json.loads(args.cold_child))))
        return 0
    if args.floor_child:
        print(floor_child(json.loads(args.floor_child)))
        return 0
    quick = args.quick or os.environ.get("PRISM_BENCH_QUICK", "") not in ("", "0")
    args.runs = args.runs or (1 if quick else 3)
    args.continue_turns = [40, 400, 2000]
    args.langgraph_turns = [40, 400]
    args.flat_turns = (40, 2000)
    args.flat_repeats = 2 if quick else 3
    args.cli_samples = 5 if quick else 11
    args.warm_samples = 7 if quick else 15
    args.cold_samples = 3 if quick else 7
    args.turn_repeats = 3 if quick else 6
    args.concurrent_turns = 10 if quick else 20
    args.repeats = 2 if quick else 3
    args.dispatch_decisions = 50 if quick else 200
    return anyio.run(run, args, backend="asyncio")


if __name__ == "__main__":
    sys.exit(main())
