"""Prism next to LangGraph: the same durable 40-turn workload on both stacks, in one process.

The workload is ``bench/durable.py``'s investigation: a mock model asks for one tool call per
turn, the tool returns a ~2 KB log excerpt (different bytes every turn), and after the last
turn the model answers. Both stacks run it on both backends, interleaved (the order rotates
every repeat, so drift in machine load cancels out):

- Prism: ``checkpoint_policy="every-turn"``, the stores from ``open_sql_stores(url)`` (one
  shared ``sqlite3`` connection for checkpoints and sessions on ``sqlite:///``; one engine on
  PostgreSQL, tables under a fresh ``bench_<random>_`` prefix);
- LangGraph: a ``StateGraph`` with a ``messages`` channel (``add_messages``), an ``agent``
  node calling the mock model and a ``tools`` node running the tool, run with
  ``ainvoke(..., durability="sync")`` on ``AsyncSqliteSaver`` (WAL, ``synchronous=FULL``, like
  Prism's default) and ``AsyncPostgresSaver`` (tables in a fresh ``bench_<random>`` schema).

Printed for each stack and backend:

- cost per turn: (durable run - the same run with no persistence) / turns, median over the
  repeats, with the spread; and its ratio to one raw durable write through the plain driver
  (``bench/_raw.py``: ``sqlite3`` WAL ``synchronous=FULL``, psycopg autocommit);
- bytes written by one run: Prism's checkpoint values (canonical JSON of every save) plus its
  session entries; LangGraph's rows for the thread in its checkpoint, blob and writes tables;
- warm resume: a run dies at the model call after its last tool turn (the model raises a
  ``BaseException``, as a killed worker would); continuing it on the open stores (Prism:
  ``resume_agent_run(..., "continue")``; LangGraph: ``ainvoke(None, config)``) is timed up
  to the model's next call;
- cold resume: the same in a new process, timed from after the imports (each stack's
  database driver included: LangGraph's saver imports psycopg, and the child imports asyncpg
  for Prism) and the store's opening call (``open_sql_stores`` / ``from_conn_string``) to the
  model call; the opening call is timed separately (Prism's opens nothing until the first
  call, LangGraph's connects);
- turns per second with 1 and with 50 sessions at once in one process (``--sessions``), each
  running a 20-turn investigation, durable (one store pair / one checkpointer shared by all)
  and with no persistence, both stacks interleaved.

Run it (about 2 minutes)::

    pip install -e '.[bench]'          # LangGraph and its SQLite / PostgreSQL checkpointers
    .venv/bin/python bench/compare_langgraph.py
    .venv/bin/python bench/compare_langgraph.py --backends sqlite --repeats 4

Every run uses its own SQLite files, PostgreSQL schema and table prefix, and removes them at
the end, also on failure. An unreachable PostgreSQL is reported as skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
from _raw import RawPostgres, RawSqlite
from _support import (
    AGENT_ID,
    DEFAULT_POSTGRES_URL,
    REVISION,
    Investigation,
    drop_sql_tables_at,
    format_table,
    median_ms,
    probe_postgres,
    probe_tool,
    tool_output,
    unique_prefix,
)
from durable import Bench

from prism_core import create_agent, resume_agent_run
from prism_core.codec import dumps

BACKENDS = ("sqlite", "postgres")
#: Tool turns of each run in the sessions-at-once figures (as in ``bench/targets.py``).
CONCURRENT_TURNS = 20
STACKS = ("prism", "langgraph")
INSTALL_HINT = (
    "LangGraph is not installed: install the benchmark extra from the repository root with\n"
    "    .venv/bin/pip install -e '.[bench]'\n"
    "(langgraph, langgraph-checkpoint-sqlite, langgraph-checkpoint-postgres, psycopg[binary])"
)


def langgraph_side() -> Any:
    """The LangGraph half of the benchmark (``bench/_langgraph.py``); exits with the install
    hint when LangGraph is not installed."""
    try:
        import _langgraph
    except ImportError as exc:
        print(f"{INSTALL_HINT}\n({exc})", file=sys.stderr)
        raise SystemExit(2) from exc
    return _langgraph


async def resume_prism(sessions: Any, checkpoints: Any, ids: dict[str, Any], turns: int) -> float:
    """Continue a crashed Prism run; seconds until the provider is called."""
    provider = Investigation(turns)
    agent = create_agent(
        id=AGENT_ID,
        model={"provider": "mock", "model": "demo"},
        store=sessions,
        tools=[probe_tool()],
        provider=provider,
    )
    ref = {"run_id": ids["run_id"], "session_id": ids["session_id"]}
    decision = {"expected_version": ids["version"], "decision": "continue"}
    gc.collect()
    start = time.perf_counter()
    result = await resume_agent_run(
        agent, ref, decision, checkpoints=checkpoints, definition_revision=REVISION
    )
    if result.status != "succeeded" or not provider.calls:
        raise RuntimeError(f"the continued Prism run ended {result.status}")
    return provider.calls[0] - start


# -- cold resume: one new process per sample --------------------------------------------------


async def cold_child(job: dict[str, Any]) -> dict[str, float]:
    """In a fresh process: open the store, continue the crashed run; both times."""
    from prism_store_sql import open_sql_stores

    if job["stack"] == "prism" and job["backend"] == "postgres":
        # The driver is an import, as for LangGraph, whose saver module imports psycopg
        # before its clock starts; Prism's store imports asyncpg only when it makes its
        # engine, which would put a 20 ms import inside the opening call.
        import asyncpg  # type: ignore[import-untyped]  # noqa: F401

    start = time.perf_counter()
    if job["stack"] == "prism":
        checkpoints, sessions = open_sql_stores(job["url"], table_prefix=job["prefix"])
        opened = time.perf_counter()
        try:
            resume = await resume_prism(sessions, checkpoints, job, job["turns"])
        finally:
            await sessions.aclose()
            await checkpoints.aclose()
        return {"open": opened - start, "resume": resume}
    lg = langgraph_side()
    start = time.perf_counter()
    async with lg.open_saver(job["backend"], job["location"]) as saver:
        opened = time.perf_counter()
        resume = await lg.resume_graph(saver, job["thread_id"], job["turns"])
    return {"open": opened - start, "resume": resume}


def run_cold(job: dict[str, Any]) -> dict[str, float]:
    """Run :func:`cold_child` in a new interpreter; its figures."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--cold-child", json.dumps(job)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the cold-resume process failed:\n{done.stderr[-2000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


# -- one backend, both stacks -----------------------------------------------------------------


@dataclass
class Figures:
    """Everything measured for one stack on one backend."""

    none_runs: list[float] = field(default_factory=list)
    durable_runs: list[float] = field(default_factory=list)
    pair_costs: list[float] = field(default_factory=list)
    bytes_written: int = 0
    bytes_detail: str = ""
    warm: list[float] = field(default_factory=list)
    cold_open: list[float] = field(default_factory=list)
    cold_resume: list[float] = field(default_factory=list)
    #: Turns per second by sessions at once, durable and with no persistence.
    rates: dict[int, list[float]] = field(default_factory=dict)
    rates_none: dict[int, list[float]] = field(default_factory=dict)


@dataclass
class BackendResult:
    """Both stacks' figures on one backend, and the raw write baseline."""

    name: str
    skipped: str | None = None
    raw_writes: list[float] = field(default_factory=list)
    stacks: dict[str, Figures] = field(default_factory=lambda: {s: Figures() for s in STACKS})
    seconds: float = 0.0


@asynccontextmanager
async def open_backend(
    name: str, args: argparse.Namespace, prefix: str
) -> AsyncIterator[tuple[Bench, Any, Any, dict[str, Any]]]:
    """Prism's bench, LangGraph's bench, the raw baseline and where the child processes find
    the stores; everything removed on the way out."""
    import psycopg

    from prism_store_sql import open_sql_stores

    lg = langgraph_side()

    async with AsyncExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="prism-compare-")))
        if name == "sqlite":
            url = f"sqlite:///{tmp / 'prism.db'}"
            location = str(tmp / "langgraph.db")
            raw: Any = RawSqlite(str(tmp / "raw.db"))
        else:
            url = args.postgres_url
            schema = prefix.rstrip("_")
            with psycopg.connect(url, autocommit=True) as admin:
                admin.execute(f"CREATE SCHEMA {schema}")
            stack.callback(drop_schema, url, schema)
            location = lg.pg_conninfo(url, schema)
            raw = RawPostgres(url, prefix)
            stack.push_async_callback(drop_sql_tables_at, url, prefix)
        stack.callback(raw.close)
        checkpoints, sessions = open_sql_stores(url, table_prefix=prefix)
        stack.push_async_callback(checkpoints.aclose)
        stack.push_async_callback(sessions.aclose)
        saver = await stack.enter_async_context(lg.open_saver(name, location))
        await saver.setup()
        where = {"backend": name, "url": url, "prefix": prefix, "location": location}
        graphs = lg.GraphBench(saver, name, args.turns)
        yield Bench(checkpoints, sessions, args.turns), graphs, raw, where


def drop_schema(url: str, schema: str) -> None:
    """Drop LangGraph's schema of this run."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


async def measure_backend(name: str, args: argparse.Namespace, prefix: str) -> BackendResult:
    """Every figure of both stacks on one backend, interleaved."""
    out = BackendResult(name)
    started = time.perf_counter()
    prism, graph = out.stacks["prism"], out.stacks["langgraph"]
    async with open_backend(name, args, prefix) as (bench, lg, raw, where):
        # Warm-up: schema, connections, code paths (not counted).
        await bench.investigate("none", turns=5)
        await bench.investigate("every-turn", turns=5)
        await bench.resume(*await bench.crash())
        await lg.investigate(durable=False)
        await lg.resume(await lg.crash())
        raw_value = json.dumps({"role": "tool", "content": tool_output(1)})
        for _ in range(5):
            raw.write("warm", raw_value)

        async def prism_none() -> None:
            prism.none_runs.append((await bench.investigate("none")).elapsed)

        async def prism_durable() -> None:
            outcome = await bench.investigate("every-turn")
            prism.durable_runs.append(outcome.elapsed)
            saved = sum(len(dumps(s.value)) for s in outcome.saves)
            entries = await bench.sessions.inner.list(outcome.session_id)
            session = sum(len(dumps(e)) for e in entries)
            prism.bytes_written = saved + session
            prism.bytes_detail = f"{saved} checkpoint + {session} session"

        async def graph_none() -> None:
            graph.none_runs.append((await lg.investigate(durable=False))[0])

        async def graph_durable() -> None:
            elapsed, thread_id = await lg.investigate(durable=True)
            graph.durable_runs.append(elapsed)
            graph.bytes_written = await lg.bytes_written(thread_id)
            tables = "checkpoints + writes" if name == "sqlite" else "checkpoints + blobs + writes"
            graph.bytes_detail = tables

        async def raw_batch() -> None:
            for _ in range(args.turns):
                start = time.perf_counter()
                raw.write("run", raw_value)
                out.raw_writes.append(time.perf_counter() - start)

        async def warm_prism() -> None:
            prism.warm.append((await bench.resume(*await bench.crash())).total)

        async def warm_graph() -> None:
            graph.warm.append(await lg.resume(await lg.crash()))

        steps = [prism_none, prism_durable, graph_none, graph_durable, raw_batch]
        for rep in range(args.repeats):
            for step in steps[rep % len(steps) :] + steps[: rep % len(steps)]:
                gc.collect()
                await step()
            for figures in (prism, graph):
                cost = (figures.durable_runs[-1] - figures.none_runs[-1]) / args.turns
                figures.pair_costs.append(cost)
        for rep in range(args.resumes):
            for step in (warm_prism, warm_graph) if rep % 2 == 0 else (warm_graph, warm_prism):
                await step()
        for rep in range(args.resumes):
            for at_once in args.sessions:
                for step in STACKS if rep % 2 == 0 else STACKS[::-1]:
                    figures = out.stacks[step]
                    for durable in (True, False):
                        gc.collect()
                        if step == "prism":
                            stores = (bench.checkpoints.inner, bench.sessions.inner)
                            rate = await prism_rate(*(stores if durable else (None, None)), at_once)
                        else:
                            rate = await graph_rate(lg, durable, at_once)
                        (figures.rates if durable else figures.rates_none).setdefault(
                            at_once, []
                        ).append(rate)
        for rep in range(args.cold):
            order = STACKS if rep % 2 == 0 else STACKS[::-1]
            for stack_name in order:
                job: dict[str, Any] = {**where, "stack": stack_name, "turns": args.turns}
                if stack_name == "prism":
                    session_id, run_id, version = await bench.crash()
                    job.update(session_id=session_id, run_id=run_id, version=version)
                else:
                    job["thread_id"] = await lg.crash()
                figures = out.stacks[stack_name]
                sample = await anyio.to_thread.run_sync(run_cold, job)
                figures.cold_open.append(sample["open"])
                figures.cold_resume.append(sample["resume"])
    out.seconds = time.perf_counter() - started
    return out


# -- many sessions at once -------------------------------------------------------------------


async def prism_rate(checkpoints: Any, sessions: Any, count: int) -> float:
    """Turns per second of ``count`` Prism runs at once on one store pair (no persistence
    when ``checkpoints`` is ``None``), as ``bench/targets.py`` measures them."""
    from targets import _sessions_at_once

    return await _sessions_at_once(count, CONCURRENT_TURNS, checkpoints, sessions)


async def graph_rate(graphs: Any, durable: bool, count: int) -> float:
    """Turns per second of ``count`` LangGraph runs at once on ``graphs``' checkpointer
    (none when not ``durable``)."""
    bench = type(graphs)(graphs.saver, graphs.backend, CONCURRENT_TURNS)
    start = time.perf_counter()
    await asyncio.gather(*(bench.investigate(durable=durable) for _ in range(count)))
    return count * CONCURRENT_TURNS / (time.perf_counter() - start)


# -- report -----------------------------------------------------------------------------------


def spread(samples: Sequence[float]) -> str:
    """``median [min..max]`` of ``samples`` (seconds) in milliseconds."""
    if not samples:
        return "-"
    low, high = min(samples) * 1000, max(samples) * 1000
    return f"{median_ms(samples):.3f} [{low:.3f}..{high:.3f}]"


def report(results: Sequence[BackendResult], turns: int) -> str:
    """The side-by-side table and a summary of who is ahead where."""
    live = [r for r in results if r.skipped is None]
    columns = [(r, s) for r in live for s in STACKS]
    headers = ["figure", *[f"{s} {r.name}" for r, s in columns]]
    rows: list[list[str]] = []

    def row(label: str, cell: Any) -> None:
        rows.append([label, *[cell(r, r.stacks[s]) for r, s in columns]])

    def cost(f: Figures) -> float:
        return median_ms(f.pair_costs)

    row("run, no persistence (median ms)", lambda r, f: f"{median_ms(f.none_runs):.1f}")
    row("run, durable (median ms)", lambda r, f: f"{median_ms(f.durable_runs):.1f}")
    row("cost per turn, ms: median [min..max]", lambda r, f: spread(f.pair_costs))
    row("raw durable write, ms: median", lambda r, f: f"{median_ms(r.raw_writes):.3f}")
    row(
        "cost per turn / raw write",
        lambda r, f: f"{cost(f) / median_ms(r.raw_writes):.1f}x",
    )
    row("bytes written by one run", lambda r, f: str(f.bytes_written))
    row("  made of", lambda r, f: f.bytes_detail)
    row("warm resume to the model call, ms", lambda r, f: spread(f.warm))
    row("cold resume after the store's opening, ms", lambda r, f: spread(f.cold_resume))
    row(
        "cold: opening call + resume, ms: median",
        lambda r, f: (
            f"{median_ms([o + c for o, c in zip(f.cold_open, f.cold_resume, strict=True)]):.3f}"
            if f.cold_resume
            else "-"
        ),
    )
    for at_once in sorted({n for r in live for f in r.stacks.values() for n in f.rates}):
        row(
            f"turns/s, {at_once} session(s) at once, durable: median",
            lambda r, f, n=at_once: (
                f"{statistics.median(f.rates[n]):.0f}" if f.rates.get(n) else "-"
            ),
        )
        row(
            f"turns/s, {at_once} session(s) at once, no persistence",
            lambda r, f, n=at_once: (
                f"{statistics.median(f.rates_none[n]):.0f}" if f.rates_none.get(n) else "-"
            ),
        )
    lines = [format_table(headers, rows), "", "summary:"]
    for r in live:
        p, g = r.stacks["prism"], r.stacks["langgraph"]
        parts = [f"cost per turn {cost(p):.3f} vs {cost(g):.3f} ms ({ahead(cost(p), cost(g))})"]
        for label, a, b in (
            ("warm resume", p.warm, g.warm),
            ("cold resume", p.cold_resume, g.cold_resume),
        ):
            if a and b:
                pa, gb = median_ms(a), median_ms(b)
                parts.append(f"{label} {pa:.3f} vs {gb:.3f} ms ({ahead(pa, gb)})")
        lines.append(f"- {r.name}, Prism vs LangGraph: " + "; ".join(parts))
    for r in results:
        if r.skipped is not None:
            lines.append(f"- {r.name}: skipped ({r.skipped})")
    return "\n".join(lines)


def ahead(prism_ms: float, graph_ms: float) -> str:
    """Who is ahead, and by what factor."""
    if prism_ms <= graph_ms:
        return f"Prism ahead, {graph_ms / max(prism_ms, 1e-9):.2f}x"
    return f"LangGraph ahead, {prism_ms / max(graph_ms, 1e-9):.2f}x"


async def run(args: argparse.Namespace) -> int:
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = sorted(set(backends) - set(BACKENDS))
    if unknown:
        print(f"unknown backends {unknown}; choose from {', '.join(BACKENDS)}", file=sys.stderr)
        return 2
    langgraph_side()
    prefix = unique_prefix()
    versions = ", ".join(
        f"{d} {metadata.version(d)}"
        for d in ("langgraph", "langgraph-checkpoint-sqlite", "langgraph-checkpoint-postgres")
    )
    print(
        f"Prism vs LangGraph: {args.turns}-turn investigation, {args.repeats} runs per stack, "
        f"{args.resumes} warm and {args.cold} cold resumes per stack and backend; python "
        f"{platform.python_version()}, {versions}, prefix {prefix}"
    )
    started = time.perf_counter()
    results: list[BackendResult] = []
    for name in backends:
        reason = await probe_postgres(args.postgres_url) if name == "postgres" else None
        if reason is not None:
            results.append(BackendResult(name, skipped=reason))
            print(f"  {name}: skipped ({reason})")
            continue
        result = await measure_backend(name, args, prefix)
        results.append(result)
        print(f"  {name}: measured in {result.seconds:.1f} s")
    print()
    print(report(results, args.turns))
    print(f"total {time.perf_counter() - started:.1f} s")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--turns", type=int, default=40, help="tool turns per run")
    parser.add_argument("--backends", default=",".join(BACKENDS), help="sqlite,postgres")
    parser.add_argument("--repeats", type=int, default=7, help="runs per stack and backend")
    parser.add_argument("--resumes", type=int, default=8, help="warm resumes per stack")
    parser.add_argument("--cold", type=int, default=3, help="cold resumes (processes) per stack")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument(
        "--sessions",
        default="1,50",
        help="sessions at once for the turns/s figures (comma-separated; default 1,50)",
    )
    parser.add_argument("--cold-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        args.sessions = [int(n) for n in str(args.sessions).split(",") if n.strip()]
    except ValueError:
        parser.error("--sessions takes comma-separated counts, e.g. 1,50")
    if any(n < 1 for n in args.sessions):
        parser.error("--sessions counts must be at least 1")
    if args.cold_child:
        figures = anyio.run(cold_child, json.loads(args.cold_child), backend="asyncio")
        print(json.dumps(figures))
        return 0
    for name in ("turns", "repeats", "resumes"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    return anyio.run(run, args, backend="asyncio")


if __name__ == "__main__":
    sys.exit(main())
