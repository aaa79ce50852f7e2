"""The targets of ``bench/targets.py`` measured beside the store path's own: each against a
yardstick measured in the same run, interleaved, medians over the repeats.

- :func:`measure_flat`: one session's cost per turn (every-turn run minus the same run with
  no persistence, per turn) at 2,000 turns over the same at 40 turns, per backend;
- :func:`measure_sync_tool`: with no persistence, a run whose tool is a plain function over
  the same run whose tool is a coroutine function (per turn);
- :func:`measure_session_only`: a run on a PostgreSQL session store with no durable run over
  the same run made durable (every-turn) on the same stores;
- :func:`measure_ledger`: a side-effecting every-turn run (its effect records ride its
  checkpoints) over the same run with the ledger rows taken out of each save before the
  store sees them, and both runs' commits;
- :func:`measure_langgraph`: warm and cold continue against LangGraph's resume of the same
  crashed workload on the same backend (``bench/compare_langgraph.py``'s stacks);
- :func:`measure_cli`: ``prism runs list`` and ``prism runs show`` as subprocesses, wall
  time, beside ``python -c pass``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import attrs
from _continue import QUESTION
from _support import (
    AGENT_ID,
    REVISION,
    Investigation,
    probe_tool,
    tool_output,
)

from prism_core import RunStateOptions, ToolDefinition, create_agent, create_memory_session_store

SCRIPT = Path(__file__).resolve()


@dataclass
class Figure:
    """One target's figures in one run: ours, the yardstick's, and their ratio."""

    ours: float
    raw: float
    ratio: float


def _figure(ours: list[float], raw: list[float], scale: float = 1000.0) -> Figure:
    a, b = statistics.median(ours) * scale, statistics.median(raw) * scale
    return Figure(a, b, a / b)


# -- flat with run length ---------------------------------------------------------------------


async def measure_flat(
    name: str, args: argparse.Namespace, prefix: str, short: int, long: int, repeats: int
) -> Figure:
    """Cost per turn at ``long`` turns over the cost per turn at ``short`` turns on store
    ``name`` (the runs interleaved; the order flips every repeat)."""
    import durable

    dargs = argparse.Namespace(
        turns=short, postgres_url=args.postgres_url, redis_url=args.redis_url
    )
    costs: dict[int, list[float]] = {short: [], long: []}
    async with durable.open_stores(name, dargs, prefix) as (checkpoints, sessions, _):
        bench = durable.Bench(checkpoints, sessions, short)
        await bench.investigate("none", turns=5)
        await bench.investigate("every-turn", turns=5)
        for rep in range(repeats):
            for turns in (short, long) if rep % 2 == 0 else (long, short):
                pair = {}
                for policy in ("none", "every-turn") if rep % 2 == 0 else ("every-turn", "none"):
                    gc.collect()
                    pair[policy] = (await bench.investigate(policy, turns=turns)).elapsed
                costs[turns].append((pair["every-turn"] - pair["none"]) / turns)
    return _figure(costs[long], costs[short])


# -- a sync tool's turn -----------------------------------------------------------------------


def _async_probe() -> ToolDefinition:
    """``probe`` as a coroutine function (the same result)."""
    sync = probe_tool()

    async def probe(args: dict[str, Any], context: Any) -> str:
        return tool_output(int(args["step"]))

    return ToolDefinition(
        "probe",
        probe,
        description=sync.description,
        parameters=sync.parameters,
        effect="read",
    )


async def _plain_run(tool: ToolDefinition, turns: int) -> float:
    provider = Investigation(turns)
    agent = create_agent(
        id=AGENT_ID,
        model={"provider": "mock", "model": "demo"},
        store=create_memory_session_store(),
        tools=[tool],
        provider=provider,
    )
    session = agent.create_session()
    gc.collect()
    start = time.perf_counter()
    result = await session.run(QUESTION)
    elapsed = time.perf_counter() - start
    if result.status != "succeeded":
        raise RuntimeError(f"a run ended {result.status}")
    return elapsed / turns


async def measure_sync_tool(turns: int, repeats: int) -> Figure:
    """A sync tool's turn over an async tool's, no persistence (memory session store)."""
    sync, asynchronous = probe_tool(), _async_probe()
    await _plain_run(sync, 5)
    await _plain_run(asynchronous, 5)
    ours: list[float] = []
    yardstick: list[float] = []
    for rep in range(repeats):
        for kind in ("sync", "async") if rep % 2 == 0 else ("async", "sync"):
            if kind == "sync":
                ours.append(await _plain_run(sync, turns))
            else:
                yardstick.append(await _plain_run(asynchronous, turns))
    return _figure(ours, yardstick)


# -- a session store without durable runs -----------------------------------------------------


async def measure_session_only(url: str, prefix: str, turns: int, repeats: int) -> Figure:
    """Per turn: a run on the SQL session store at ``url`` with no durable run, over the same
    run with every-turn checkpoints on the same store pair."""
    from prism_store_sql import open_sql_stores

    checkpoints, sessions = open_sql_stores(url, table_prefix=prefix)

    async def one(durable: bool, n: int) -> float:
        provider = Investigation(n)
        agent = create_agent(
            id=AGENT_ID,
            model={"provider": "mock", "model": "demo"},
            store=sessions,
            tools=[probe_tool()],
            provider=provider,
        )
        session = agent.create_session()
        gc.collect()
        start = time.perf_counter()
        if durable:
            options = RunStateOptions(checkpoints, REVISION, checkpoint_policy="every-turn")
            result = await session.run(QUESTION, run_state=options)
        else:
            result = await session.run(QUESTION)
        elapsed = time.perf_counter() - start
        if result.status != "succeeded":
            raise RuntimeError(f"a run ended {result.status}")
        return elapsed / n

    ours: list[float] = []
    yardstick: list[float] = []
    try:
        await one(True, 3)
        await one(False, 3)
        for rep in range(repeats):
            for durable in (False, True) if rep % 2 == 0 else (True, False):
                (yardstick if durable else ours).append(await one(durable, turns))
    finally:
        await sessions.aclose()
        await checkpoints.aclose()
    return _figure(ours, yardstick)


# -- effect records ---------------------------------------------------------------------------


def _without_ledger(request: Any) -> Any:
    return attrs.evolve(request, ledger=None) if request.ledger is not None else request


class _NoLedgerTransaction:
    """A shared commit that hands its saves to the store without their ledger rows."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def append(self, *args: Any, **kw: Any) -> None:
        self.inner.append(*args, **kw)

    def save(self, *args: Any, **kw: Any) -> None:
        self.inner.save(*args, **kw)

    def save_request(self, request: Any) -> None:
        self.inner.save_request(_without_ledger(request))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def __aenter__(self) -> _NoLedgerTransaction:
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.inner.__aexit__(*exc)


async def measure_ledger(
    name: str, args: argparse.Namespace, prefix: str, turns: int, repeats: int
) -> tuple[Figure, Figure]:
    """A side-effecting every-turn run with its effect records over the same run whose saves
    reach the store without ledger rows (wall time per turn), and the two runs' commits
    (``ratio``: the extra commits)."""
    import durable

    class NoLedger(durable.RecordingCheckpoints):
        async def save_request(self, request: Any) -> Any:
            return await super().save_request(_without_ledger(request))

        def shared_transaction(self, sessions: Any) -> Any:
            inner = super().shared_transaction(sessions)
            return None if inner is None else _NoLedgerTransaction(inner)

        def checkpoint_transaction(self) -> Any:
            return _NoLedgerTransaction(super().checkpoint_transaction())

    dargs = argparse.Namespace(
        turns=turns, postgres_url=args.postgres_url, redis_url=args.redis_url
    )
    ours: list[float] = []
    yardstick: list[float] = []
    commits = {"with": 0, "without": 0}
    async with durable.open_stores(name, dargs, prefix) as (checkpoints, sessions, _):
        with_ledger = durable.Bench(checkpoints, sessions, turns)
        without = durable.Bench(checkpoints, sessions, turns)
        without.checkpoints = NoLedger(checkpoints, without.trace)
        for bench in (with_ledger, without):
            await bench.investigate("every-turn-effect", turns=5)
        for rep in range(repeats):
            order = ("with", "without") if rep % 2 == 0 else ("without", "with")
            for kind in order:
                bench = with_ledger if kind == "with" else without
                gc.collect()
                outcome = await bench.investigate("every-turn-effect")
                (ours if kind == "with" else yardstick).append(outcome.elapsed / turns)
                commits[kind] = outcome.commits
    extra = float(commits["with"] - commits["without"])
    return _figure(ours, yardstick), Figure(
        float(commits["with"]), float(commits["without"]), extra
    )


# -- Prism next to LangGraph ------------------------------------------------------------------


def cold_child(job: dict[str, Any]) -> float:
    """In a fresh interpreter (modules imported, then the clock): the host's
    ``asyncio.run``, the stores opened from the URL as the docs show (Prism:
    ``open_stores(url, plugins=discover_store_plugins(url))``; LangGraph:
    ``from_conn_string``), the continue up to the model call; seconds."""
    if job["stack"] == "langgraph":
        import _langgraph

        async def graph() -> float:
            start = time.perf_counter()
            async with _langgraph.open_saver(job["backend"], job["location"]) as saver:
                opened = time.perf_counter() - start
                # The graph is built (untimed) inside, then the clock runs to the model call.
                resume: float = await _langgraph.resume_graph(saver, job["thread_id"], job["turns"])
            return opened + resume

        return asyncio.run(graph())
    return asyncio.run(_prism_cold(job))


async def _prism_cold(job: dict[str, Any]) -> float:
    import prism_store_sql  # noqa: F401  (imported before the clock, as LangGraph's saver)
    from prism_core import discover_store_plugins, open_stores, resume_agent_run

    if job["backend"] == "postgres":
        import asyncpg  # type: ignore[import-untyped]  # noqa: F401

    url = job["url"]
    provider = Investigation(job["turns"])
    start = time.perf_counter()
    pair = open_stores(url, plugins=discover_store_plugins(url))
    opened = time.perf_counter() - start
    try:
        # The agent is built untimed, as the LangGraph side builds its graph.
        agent = create_agent(
            id=AGENT_ID,
            model={"provider": "mock", "model": "demo"},
            store=pair.sessions,
            tools=[probe_tool()],
            provider=provider,
        )
        ref = {"run_id": job["run_id"], "session_id": job["session_id"]}
        decision = {"expected_version": job["version"], "decision": "continue"}
        start = time.perf_counter()
        result = await resume_agent_run(
            agent, ref, decision, checkpoints=pair.checkpoints, definition_revision=REVISION
        )
        if result.status != "succeeded" or not provider.calls:
            raise RuntimeError(f"the continued run ended {result.status}")
        return opened + provider.calls[0] - start
    finally:
        await pair.aclose()


def _child(job: dict[str, Any]) -> float:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), json.dumps(job)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the cold continue process failed:\n{done.stderr[-2000:]}")
    return float(done.stdout.strip().splitlines()[-1])


@dataclass
class VersusLangGraph:
    """Warm continue at each size and cold continue at the first, Prism and LangGraph."""

    warm: dict[int, Figure]
    cold: Figure | None


async def measure_langgraph(
    backend: str, args: argparse.Namespace, prefix: str, sizes: list[int], samples: int, cold: int
) -> VersusLangGraph:
    """Prism's continue over LangGraph's resume of the same crashed run on ``backend``:
    warm (open stores, interleaved sample by sample) at each of ``sizes``, cold (a new
    process per sample, alternating) at the first."""
    import compare_langgraph

    warm: dict[int, Figure] = {}
    cold_figure: Figure | None = None
    for index, turns in enumerate(sizes):
        cargs = argparse.Namespace(turns=turns, postgres_url=args.postgres_url)
        async with compare_langgraph.open_backend(backend, cargs, prefix) as (
            bench,
            graphs,
            _,
            where,
        ):
            await bench.resume(*await bench.crash())
            await graphs.resume(await graphs.crash())
            ours: list[float] = []
            theirs: list[float] = []
            for rep in range(samples):
                for stack in ("prism", "langgraph") if rep % 2 == 0 else ("langgraph", "prism"):
                    if stack == "prism":
                        ours.append((await bench.resume(*await bench.crash())).total)
                    else:
                        theirs.append(await graphs.resume(await graphs.crash()))
            warm[turns] = _figure(ours, theirs)
            if index == 0 and cold:
                ours, theirs = [], []
                url = f"{where['url']}?table_prefix={prefix}"
                for rep in range(cold):
                    for stack in ("prism", "langgraph") if rep % 2 == 0 else ("langgraph", "prism"):
                        job: dict[str, Any] = {"stack": stack, "backend": backend, "turns": turns}
                        if stack == "prism":
                            session_id, run_id, version = await bench.crash()
                            job.update(
                                url=url, session_id=session_id, run_id=run_id, version=version
                            )
                            ours.append(await asyncio.to_thread(_child, job))
                        else:
                            job.update(location=where["location"], thread_id=await graphs.crash())
                            theirs.append(await asyncio.to_thread(_child, job))
                cold_figure = _figure(ours, theirs)
    return VersusLangGraph(warm, cold_figure)


# -- the command line -------------------------------------------------------------------------


def _wall(argv: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{argv[1:4]} failed:\n{done.stderr[-2000:]}")
    return elapsed


async def measure_cli(samples: int) -> dict[str, Figure]:
    """``prism runs list`` and ``prism runs show RUN`` on a SQLite file holding a few
    runs (one suspended mid-run by a crash), wall time of each subprocess; beside it
    ``python -c pass`` (``raw``: what any Python command costs on this machine)."""
    from _continue import _crash

    from prism_store_sql import open_sql_stores

    prism = Path(sys.executable).with_name("prism")
    command = [str(prism)] if prism.exists() else [sys.executable, "-m", "prism_cli"]
    with tempfile.TemporaryDirectory(prefix="prism-cli-") as name:
        url = f"sqlite:///{Path(name) / 'runs.db'}"
        checkpoints, sessions = open_sql_stores(url)
        try:
            runs = [await _crash(checkpoints, sessions, 5) for _ in range(3)]
        finally:
            await sessions.aclose()
            await checkpoints.aclose()
        argvs = {
            "list": [*command, "runs", "list", "--store", url],
            "show": [*command, "runs", "show", runs[0]["run_id"], "--store", url],
        }
        bare = [sys.executable, "-c", "pass"]
        times: dict[str, list[float]] = {"list": [], "show": [], "bare": []}
        for argv in (*argvs.values(), bare):
            await asyncio.to_thread(_wall, argv)  # the page cache, the bytecode
        for rep in range(samples):
            order = ["list", "show", "bare"] if rep % 2 == 0 else ["bare", "show", "list"]
            for key in order:
                argv = argvs.get(key, bare)
                times[key].append(await asyncio.to_thread(_wall, argv))
    floor = statistics.median(times["bare"])
    return {
        key: Figure(statistics.median(times[key]), floor, statistics.median(times[key]))
        for key in ("list", "show")
    }


if __name__ == "__main__":
    print(cold_child(json.loads(sys.argv[1])))
