"""Decide → dispatch: how soon a decision recorded in one process starts its tool in an idle
worker in another, on SQLite, PostgreSQL and Redis.

For each backend a worker process runs ``run_worker`` on its stores with a poll of ten
minutes (so only the store's wake-up can bring it a decision) and waits, idle. This process
holds many runs suspended on one approval each (a side-effecting ``refund``) and approves them
one by one with ``decide_agent_run``, the backends interleaved (the order rotates every
round), one decision in flight at a time, a short pause between two. Each sample is

    ``time.time()`` as the tool starts in the worker process
    - ``time.time()`` as the decision's write returns in this process (committed),

wall-clock times of two processes on one machine (the write is timed by a wrapper of the
deciding store's ``save_request``, on the run's record only). So a sample holds the work
mark's write and the notification in the deciding process, the wake-up, the worker's sweep
(marks and expired runs listed), the run's load, the claim (a compare-and-swap write under
the worker's lease) and the ``dispatched`` mark written before a side-effecting tool starts.
The time ``decide_agent_run`` takes in the deciding process (validation, both writes, the
notification and the read back) is shown beside it.

Targets: p50 ≤ 10 ms and p99 ≤ 50 ms on every backend (``bench/targets.py`` has the rows).
Each backend gets its own SQLite file, table prefix and Redis key prefix, removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from _support import (
    DEFAULT_POSTGRES_URL,
    DEFAULT_REDIS_URL,
    delete_redis_keys,
    drop_sql_tables_at,
    format_table,
    probe_postgres,
    probe_redis,
    unique_prefix,
)

from prism_core import (
    AGENT_RUN_NAMESPACE,
    ProviderRequest,
    RunStateOptions,
    ToolDefinition,
    create_agent,
    decide_agent_run,
    open_stores,
    provider_done,
    provider_text_delta,
    provider_tool_call,
    run_worker,
    tool_call_content,
)

SCRIPT = Path(__file__).resolve()
REVISION = "dispatch-1"
AGENT_ID = "refunder"
P50_TARGET_MS = 10.0
P99_TARGET_MS = 50.0
#: The worker's poll: far beyond any sample, so only a wake-up brings a decision.
SLOW_POLL_MS = 600_000
#: Between two decisions, so the worker that ran the last one has finished it.
PAUSE_S = 0.02
BACKENDS = ("sqlite", "postgresql", "redis")
LABELS = {"sqlite": "SQLite", "postgresql": "PostgreSQL", "redis": "Redis"}


def _plugins() -> list[object]:
    import prism_store_redis
    import prism_store_sql

    return [prism_store_sql.plugin, prism_store_redis.plugin]


def store_url(url: str, prefix: str) -> str:
    """``url`` with the store option that puts its tables or keys under ``prefix``."""
    option = "prefix" if url.startswith(("redis:", "rediss:")) else "table_prefix"
    return f"{url}{'&' if '?' in url else '?'}{option}={prefix}"


def build_agent(sessions: Any, on_refund: Any) -> Any:
    """One ``refund`` call that needs approval (side-effecting), then the answer."""

    class Provider:
        id = "mock"

        async def generate(self, request: ProviderRequest) -> Any:
            if any(m.role == "tool" for m in request.messages):
                yield provider_text_delta("refunded")
            else:
                call = tool_call_content("call-1", "refund", {"order": "A-1"})
                yield provider_tool_call(call)
            yield provider_done()

    return create_agent(
        id=AGENT_ID,
        model={"provider": "mock", "model": "demo"},
        provider=Provider(),
        tools=[
            ToolDefinition(
                "refund",
                on_refund,
                parameters={"type": "object", "properties": {"order": {"type": "string"}}},
                needs_approval=True,
            )
        ],
        store=sessions,
    )


# -- the worker process -----------------------------------------------------------------------


def _say(value: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


async def worker_child(job: dict[str, Any]) -> None:
    """Run a worker on the stores until SIGTERM; print ``ready`` after its first sweep and
    one line per tool call, stamped when the tool starts."""
    import logging

    class Ready(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith("swept:") and not self.said:
                self.said = True
                _say({"ready": True})

        said = False

    workers = logging.getLogger("prism_core.workers")
    workers.addHandler(Ready(logging.DEBUG))
    workers.setLevel(logging.DEBUG)
    workers.propagate = False

    def refund(args: dict[str, Any], context: Any) -> Any:
        _say({"run": context.run_id, "t": time.time()})
        return {"refunded": args["order"]}

    pair = open_stores(job["url"], plugins=_plugins())
    async with pair:
        stop = anyio.Event()

        async def on_term() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    stop.set()
                    return

        # Built once, as a host builds its agents.
        agent = build_agent(pair.sessions, refund)

        def resolve(agent_id: str) -> tuple[Any, str]:
            return agent, REVISION

        async with anyio.create_task_group() as group:
            group.start_soon(on_term)
            await run_worker(
                checkpoints=pair.checkpoints,
                sessions=pair.sessions,
                resolve_agent=resolve,
                poll_ms=SLOW_POLL_MS,
                stop=stop,
            )
            group.cancel_scope.cancel()


# -- this process -----------------------------------------------------------------------------


@dataclass
class Side:
    """One backend: its stores here, its worker process, the runs waiting for a decision."""

    name: str
    url: str
    pair: Any = None
    process: Any = None
    runs: list[tuple[str, int]] = field(default_factory=list)
    started: dict[str, float] = field(default_factory=dict)
    committed: dict[str, float] = field(default_factory=dict)
    arrived: anyio.Event = field(default_factory=anyio.Event)
    latencies: list[float] = field(default_factory=list)
    decide_calls: list[float] = field(default_factory=list)


async def _read_lines(side: Side, ready: anyio.Event) -> None:
    buffer = b""
    async for chunk in side.process.stdout:
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if not line.startswith(b"{"):
                continue
            message = json.loads(line)
            if message.get("ready"):
                ready.set()
            elif "run" in message:
                side.started[message["run"]] = message["t"]
                side.arrived.set()


def _never(args: dict[str, Any], context: Any) -> Any:
    raise RuntimeError("a tool ran in the deciding process")


async def _suspend(side: Side, count: int) -> None:
    agent = build_agent(side.pair.sessions, _never)
    options = RunStateOptions(side.pair.checkpoints, REVISION)
    for _ in range(count):
        result = await agent.create_session().run("refund A-1", run_state=options)
        if result.status != "suspended" or result.run_state is None:
            raise RuntimeError(f"a run ended {result.status}, not suspended")
        side.runs.append((result.run_id, result.run_state.version))


async def _decide(side: Side) -> None:
    run_id, version = side.runs.pop()
    checkpoints = side.pair.checkpoints
    agent = build_agent(side.pair.sessions, _never)
    side.arrived = anyio.Event()
    called = time.perf_counter()
    await decide_agent_run(
        agent,
        {"run_id": run_id},
        {"expected_version": version, "decision": "approve", "actor": "bench"},
        checkpoints=checkpoints,
        definition_revision=REVISION,
    )
    side.decide_calls.append(time.perf_counter() - called)
    with anyio.fail_after(60):
        while run_id not in side.started:
            await side.arrived.wait()
            side.arrived = anyio.Event()
    side.latencies.append(side.started[run_id] - side.committed[run_id])


def _time_commits(side: Side) -> None:
    """Note when each write of a run's record returns (the last one before the tool starts
    is the decision's)."""
    store = side.pair.checkpoints
    save_request = store.save_request

    async def timed(request: Any) -> Any:
        record = await save_request(request)
        if request.namespace == AGENT_RUN_NAMESPACE:
            side.committed[request.key] = time.time()
        return record

    store.save_request = timed


@asynccontextmanager
async def _sides(names: Sequence[str], args: argparse.Namespace) -> AsyncIterator[list[Side]]:
    """Each backend's stores (a prefix of their own) and worker process; all removed after."""
    async with AsyncExitStack() as stack:
        folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="prism-dispatch-"))
        sides: list[Side] = []
        for name in names:
            base = {
                "sqlite": f"sqlite:///{folder}/dispatch.db",
                "postgresql": args.postgres_url,
                "redis": args.redis_url,
            }[name]
            prefix = unique_prefix()
            side = Side(name, store_url(base, prefix))
            stack.push_async_callback(_drop, name, base, prefix)
            side.pair = await stack.enter_async_context(open_stores(side.url, plugins=_plugins()))
            _time_commits(side)
            sides.append(side)
        async with anyio.create_task_group() as group:
            for side in sides:
                await _suspend(side, args.decisions)
                side.process = await anyio.open_process(
                    [sys.executable, str(SCRIPT), "--worker-child", json.dumps({"url": side.url})],
                    stderr=None,
                )
                ready = anyio.Event()
                group.start_soon(_read_lines, side, ready)
                with anyio.fail_after(60):
                    await ready.wait()
            try:
                yield sides
            finally:
                with anyio.CancelScope(shield=True):
                    for side in sides:
                        await _stop(side.process)
                group.cancel_scope.cancel()


async def _stop(process: Any) -> None:
    process.terminate()
    with anyio.move_on_after(10):
        await process.wait()
        return
    process.kill()
    await process.wait()


async def _drop(name: str, url: str, prefix: str) -> None:
    if name == "postgresql":
        await drop_sql_tables_at(url, prefix)
    elif name == "redis":
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(url)
        try:
            await delete_redis_keys(client, prefix)
        finally:
            await client.aclose()


async def available(args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    """The backends to measure, and why the others are skipped."""
    skipped: dict[str, str] = {}
    names: list[str] = []
    for name in args.backends:
        reason = None
        if name == "postgresql":
            reason = await probe_postgres(args.postgres_url)
        elif name == "redis":
            reason = await probe_redis(args.redis_url)
        if reason is None:
            names.append(name)
        else:
            skipped[name] = reason
    return names, skipped


async def measure(names: Sequence[str], args: argparse.Namespace) -> dict[str, Side]:
    """``args.decisions`` decisions per backend, interleaved; the samples of each."""
    async with _sides(names, args) as sides:
        for index in range(args.decisions):
            shift = index % len(sides)
            for side in sides[shift:] + sides[:shift]:
                await _decide(side)
                await anyio.sleep(PAUSE_S)
    return {side.name: side for side in sides}


def percentile(samples: Sequence[float], share: float) -> float:
    """The nearest-rank percentile ``share`` (0..1) of ``samples``."""
    ordered = sorted(samples)
    index = max(0, min(len(ordered) - 1, -(-len(ordered) * share // 1) - 1))
    return ordered[int(index)]


def report(sides: dict[str, Side], skipped: dict[str, str]) -> tuple[str, list[str]]:
    """The table (ms) and the targets missed."""
    rows: list[list[str]] = []
    failed: list[str] = []
    for name in BACKENDS:
        if name in skipped:
            rows.append([LABELS[name], "-", "-", "-", "-", "-", "-", f"skipped ({skipped[name]})"])
            continue
        if name not in sides:
            continue
        ms = [s * 1000 for s in sides[name].latencies]
        p50, p99 = percentile(ms, 0.5), percentile(ms, 0.99)
        ok = p50 <= P50_TARGET_MS and p99 <= P99_TARGET_MS
        if not ok:
            failed.append(LABELS[name])
        decide = statistics.median(sides[name].decide_calls) * 1000
        rows.append(
            [
                LABELS[name],
                str(len(ms)),
                f"{min(ms):.2f}",
                f"{p50:.2f}",
                f"{percentile(ms, 0.9):.2f}",
                f"{p99:.2f}",
                f"{max(ms):.2f}",
                f"{decide:.2f}",
                "PASS" if ok else "FAIL",
            ]
        )
    headers = ["backend", "n", "min", "p50", "p90", "p99", "max", "decide call p50", ""]
    return format_table(headers, rows), failed


async def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    print(
        f"decide -> dispatch: {args.decisions} decisions per backend, python "
        f"{platform.python_version()}, load average {os.getloadavg()[0]:.2f}"
    )
    names, skipped = await available(args)
    sides = await measure(names, args) if names else {}
    table, failed = report(sides, skipped)
    print()
    print("ms from the decision's write to the tool's start in the worker process")
    print(table)
    if args.samples:
        for name, side in sides.items():
            raw = " ".join(f"{s * 1000:.2f}" for s in side.latencies)
            print(f"\n{LABELS[name]} samples (ms, in order): {raw}")
    print()
    print(
        f"targets: p50 <= {P50_TARGET_MS:g} ms and p99 <= {P99_TARGET_MS:g} ms; "
        + (f"missed on {', '.join(failed)}" if failed else "met")
    )
    print(f"total {time.perf_counter() - started:.1f} s (load average {os.getloadavg()[0]:.2f})")
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--decisions", type=int, default=200, help="per backend (default 200)")
    parser.add_argument("--quick", action="store_true", help="50 decisions per backend")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--samples", action="store_true", help="print every sample")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument("--redis-url", default=DEFAULT_REDIS_URL)
    parser.add_argument("--worker-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker_child:
        anyio.run(worker_child, json.loads(args.worker_child), backend="asyncio")
        return 0
    if args.quick:
        args.decisions = 50
    args.backends = [name.strip() for name in args.backends.split(",") if name.strip()]
    return anyio.run(run, args, backend="asyncio")


if __name__ == "__main__":
    sys.exit(main())
