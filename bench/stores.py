"""Store latency next to the plain driver doing the same durable work, per backend.

For each backend this measures, in one run, interleaved iteration by iteration and repeated:

- checkpoint ``save``: a realistic ~2 KB agent-run state with different bytes every time,
  compare-and-swap on the previous version, as every-turn checkpointing writes it;
- checkpoint ``load`` of that record;
- session ``append`` of a ~2 KB tool-result entry;
- session ``read_branch_path`` of a 40- and a 400-entry branch, and the *continue floor*: that
  branch read plus one checkpoint save, the store work a ``continue`` cannot avoid;

and beside each, the same work through the plain synchronous driver on its own connection,
never through our store or its engine (see ``bench/_raw.py``): stdlib ``sqlite3`` in WAL with
``synchronous=FULL`` (an upsert of the row and a commit; the branch as rows read and
JSON-decoded), psycopg 3 in autocommit, redis-py with a pipelined ``SET`` + ``HSET``.

It prints the median (over the repeats' medians) and p95 of each, the raw figure beside ours,
the ratio prism/raw, and PASS/FAIL against the target ratio for the gated rows. A backend
whose service is unreachable prints a ``skipped: <reason>`` row.

Run it with ``make bench`` or::

    .venv/bin/python bench/stores.py
    .venv/bin/python bench/stores.py --iterations 200 --repeats 3 --backends sqlite,redis

Every run works under its own table prefix / key prefix (``bench_<random>_``) and drops its
tables and deletes its keys at the end, also when it fails or is interrupted, so it can share
a database and a Redis server with other users.
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import attrs
from _raw import RawPostgres, RawRedis, RawSqlite
from _support import (
    AGENT_ID,
    DEFAULT_POSTGRES_URL,
    DEFAULT_REDIS_URL,
    NAMESPACE,
    Investigation,
    delete_redis_keys,
    drop_sql_tables_at,
    format_table,
    p95_ms,
    probe_postgres,
    probe_redis,
    probe_tool,
    unique_prefix,
)

from prism_core import (
    RunLimits,
    SessionEntry,
    Usage,
    create_agent,
    create_memory_session_store,
)
from prism_core.codec import dumps
from prism_core.durable import (
    AgentRunState,
    DecisionScope,
    StickyDecision,
    arguments_hash,
)
from prism_core.durable._state import (
    RunCountersState,
    SessionStateRecord,
    state_to_json,
)
from prism_core.durable._state_parse import parse_state
from prism_core.records import new_entry_id

TARGET_RATIO = 1.5
WARMUP = 30
BRANCH_LENGTHS = (40, 400)
BACKENDS = ("sqlite", "postgres", "redis")

Op = Callable[[], Awaitable[Any]]


@dataclass
class Row:
    """One operation on one backend: our store's samples and the plain driver's."""

    backend: str
    operation: str
    store: Sampled | None = None
    raw: Sampled | None = None
    raw_label: str = ""
    gated: bool = False
    skipped: str | None = None


# -- the payloads -----------------------------------------------------------------------------


def realistic_state() -> dict[str, Any]:
    """A ~2 KB running agent-run state (every-turn policy, mid-investigation), as JSON data.

    It has what a real mid-run checkpoint carries: counters with usage, finite limits, a wall
    deadline, the run's tool names, two sticky decisions and the loaded skills.
    """

    def scope(tool: str, args: dict[str, Any]) -> DecisionScope:
        return DecisionScope(
            tool_name=tool,
            effect_kind="write",
            identity=f"{AGENT_ID}/{tool}",
            arguments_hash=arguments_hash(args),
        )

    state = AgentRunState(
        status="running",
        run_id="run_5f0c2a9e41d84b7c9d3e2f1a6b8c7d90",
        session_id="sess_0b7e4c1d2a3f4e5d8c9b0a1f2e3d4c5b",
        agent_id=AGENT_ID,
        definition_revision="2026-11-30.1",
        fingerprint="3f9a1c7e5b2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a1c3e5b7d9f2a4c6e8b0d1f3a",
        leaf_id="entry_9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a",
        counters=RunCountersState(
            turns=17,
            provider_attempts=18,
            tool_rounds=16,
            tool_calls=21,
            usage=Usage(
                input_tokens=184_220,
                output_tokens=6_913,
                total_tokens=191_133,
                cache_read_tokens=151_040,
                cost=0.4127,
                currency="USD",
            ),
        ),
        limits=attrs.asdict(
            RunLimits(
                max_turns=60,
                max_provider_attempts=90,
                max_tool_rounds=60,
                max_tool_calls=200,
                max_wall_time_ms=1_800_000,
                max_total_tokens=2_000_000,
                max_cost=5.0,
                cost_currency="USD",
            )
        ),
        wall_deadline=1_796_041_234.125,
        checkpoint_policy="every-turn",
        max_state_bytes=262_144,
        sticky_decisions=(
            StickyDecision(
                scope=scope("restart_service", {"service": "api-3", "region": "eu-west-1"}),
                outcome="allow_for_run",
                reason="on-call approved restarts of api-3 for this incident",
            ),
            StickyDecision(
                scope=scope("page_team", {"team": "payments", "severity": "sev2"}),
                outcome="reject_for_run",
                reason="payments is already engaged in the incident channel",
            ),
        ),
        tool_names=(
            "probe",
            "search_logs",
            "query_metrics",
            "list_deploys",
            "read_runbook",
            "restart_service",
            "page_team",
            "load_skill",
        ),
        session_state=SessionStateRecord(
            loaded_skill_names=("incident-triage", "postgres-diagnostics", "kubernetes-basics")
        ),
    )
    data = state_to_json(state)
    parse_state(data, max_bytes=262_144)  # it is a valid state
    return data


async def harvest_entries() -> list[SessionEntry]:
    """The entries of a real 20-turn investigation on the memory store (user message, then
    assistant tool call / ~2 KB tool result pairs, then the answer)."""
    sessions = create_memory_session_store()
    agent = create_agent(
        id=AGENT_ID,
        model={"provider": "mock", "model": "demo"},
        store=sessions,
        tools=[probe_tool()],
        provider=Investigation(20),
    )
    await agent.create_session(id="harvest").run("Why did checkout fail at 12:40?")
    return await sessions.list("harvest")


def fresh(entry: SessionEntry, session_id: str, parent_id: str | None) -> SessionEntry:
    """``entry`` with a new id, in ``session_id``, under ``parent_id``."""
    return attrs.evolve(entry, id=new_entry_id(), session_id=session_id, parent_id=parent_id)


@dataclass
class Payloads:
    """The bytes every backend writes and reads."""

    state: dict[str, Any]
    entries: list[SessionEntry]

    @property
    def result_entry(self) -> SessionEntry:
        """The first ~2 KB tool-result entry."""
        return next(e for e in self.entries if e.message and e.message.role == "tool")


# -- measuring --------------------------------------------------------------------------------


@dataclass
class Sampled:
    """Every sample of one op, and the median of each repeat."""

    samples: list[float] = field(default_factory=list)
    medians: list[float] = field(default_factory=list)


async def measure(
    ops: Sequence[tuple[str, Op]], iterations: int, repeats: int
) -> dict[str, Sampled]:
    """Warm every op up, then time them interleaved (rotating the order each iteration),
    ``repeats`` times over; each repeat contributes its median."""
    for _ in range(WARMUP):
        for _, op in ops:
            await op()
    out: dict[str, Sampled] = {name: Sampled() for name, _ in ops}
    count = len(ops)
    clock = time.perf_counter
    for _ in range(repeats):
        gc.collect()
        batch: dict[str, list[float]] = {name: [] for name, _ in ops}
        for i in range(iterations):
            for j in range(count):
                name, op = ops[(i + j) % count]
                start = clock()
                await op()
                batch[name].append(clock() - start)
        for name, samples in batch.items():
            out[name].samples += samples
            out[name].medians.append(statistics.median(samples))
    return out


def sync(call: Callable[[], Any]) -> Op:
    """A synchronous baseline call as an op (run inline: the plain driver blocks)."""

    async def op() -> None:
        call()

    return op


def make_row(
    backend: str, operation: str, sampled: dict[str, Sampled], label: str, *, gated: bool
) -> Row:
    """A table row from the ``"prism"`` and ``"raw"`` samples of one measurement."""
    return Row(
        backend=backend,
        operation=operation,
        store=sampled["prism"],
        raw=sampled["raw"],
        raw_label=label,
        gated=gated,
    )


# -- SQL --------------------------------------------------------------------------------------


async def bench_sql(
    backend: str, url: str, prefix: str, args: argparse.Namespace, payloads: Payloads
) -> list[Row]:
    """The store operations on a SQL backend (``sqlite`` or ``postgres``) beside the plain
    driver: stdlib ``sqlite3`` (WAL, ``synchronous=FULL``) or psycopg 3 (autocommit)."""
    from prism_store_sql import create_sql_checkpoint_store, create_sql_session_store

    raw: Any
    if backend == "sqlite":
        raw = RawSqlite(url.removeprefix("sqlite:///"))
    else:
        raw = RawPostgres(url, prefix)
    checkpoints = create_sql_checkpoint_store(url, table_prefix=prefix)
    sessions = create_sql_session_store(url, table_prefix=prefix)
    try:
        return await _sql_rows(backend, raw, checkpoints, sessions, args, payloads)
    finally:
        with anyio.CancelScope(shield=True):
            if backend == "postgres":
                await drop_sql_tables_at(url, prefix)
            raw.close()
            await sessions.aclose()
            await checkpoints.aclose()


async def _sql_rows(
    backend: str,
    raw: Any,
    checkpoints: Any,
    sessions: Any,
    args: argparse.Namespace,
    payloads: Payloads,
) -> list[Row]:
    state = payloads.state
    state_json = dumps(state).decode()
    entry_json = dumps(payloads.result_entry).decode()
    counter = 0
    version = 1
    await checkpoints.save(
        NAMESPACE, "run-store", state, version=1, expected_version=0, category="agent-run"
    )
    raw.write("cp", state_json)

    async def store_save() -> None:
        nonlocal version, counter
        counter += 1
        await checkpoints.save(
            NAMESPACE,
            "run-store",
            {**state, "bench_counter": counter},
            version=version + 1,
            expected_version=version,
            category="agent-run",
        )
        version += 1

    async def store_load() -> None:
        assert await checkpoints.load(NAMESPACE, "run-store") is not None

    append_parent: str | None = None

    async def store_append() -> None:
        nonlocal append_parent
        stored = await sessions.append(fresh(payloads.result_entry, "sess-append", append_parent))
        append_parent = stored.id

    rows: list[Row] = []
    specs: list[tuple[str, Op, Op, str, bool]] = [
        ("save", store_save, sync(lambda: raw.write("cp", state_json)), "upsert + commit", True),
        ("load", store_load, sync(lambda: raw.read("cp")), "SELECT by key + JSON decode", True),
        (
            "append",
            store_append,
            sync(lambda: raw.write(new_entry_id(), entry_json)),
            "insert of the entry + commit",
            False,
        ),
    ]
    for name, prism_op, raw_op, label, gated in specs:
        sampled = await measure(
            [("prism", prism_op), ("raw", raw_op)], args.iterations, args.repeats
        )
        rows.append(make_row(backend, name, sampled, f"{raw.label}: {label}", gated=gated))

    # Branch reads and the continue floor: the branch read plus one durable write.
    for length in BRANCH_LENGTHS:
        session_id = f"sess-branch-{length}"
        parent: str | None = None
        entries = [payloads.entries[i % len(payloads.entries)] for i in range(length)]
        for entry in entries:
            parent = (await sessions.append(fresh(entry, session_id, parent))).id
        leaf = parent
        can_branch = isinstance(raw, RawSqlite)
        if can_branch:
            raw.fill_branch(session_id, [dumps(e).decode() for e in entries])

        async def store_branch(
            session_id: str = session_id, leaf: Any = leaf, length: int = length
        ) -> None:
            assert len(await sessions.read_branch_path(session_id, leaf)) == length

        async def store_floor(session_id: str = session_id, leaf: Any = leaf) -> None:
            await store_branch(session_id, leaf)
            await store_save()

        def raw_branch(session_id: str = session_id, length: int = length) -> None:
            assert len(raw.read_branch(session_id)) == length

        def raw_floor(session_id: str = session_id) -> None:
            raw_branch(session_id)
            raw.write("cp", state_json)

        # Long branches take ~10x longer per read: fewer iterations keep `make bench` short.
        iterations = max(5, args.iterations * 40 // length)
        if not can_branch:
            sampled = await measure([("prism", store_branch)], iterations, args.repeats)
            rows.append(Row(backend, f"branch({length})", sampled["prism"], None, "-", gated=False))
            continue
        sampled = await measure(
            [("prism", store_branch), ("raw", sync(raw_branch))], iterations, args.repeats
        )
        rows.append(
            make_row(
                backend,
                f"branch({length})",
                sampled,
                f"{raw.label}: SELECT {length} rows + JSON decode",
                gated=False,
            )
        )
        sampled = await measure(
            [("prism", store_floor), ("raw", sync(raw_floor))], iterations, args.repeats
        )
        rows.append(
            make_row(
                backend,
                f"continue floor({length})",
                sampled,
                f"{raw.label}: branch read + decode + one durable write",
                gated=True,
            )
        )
    return rows


# -- Redis ------------------------------------------------------------------------------------


async def bench_redis(
    url: str, prefix: str, args: argparse.Namespace, payloads: Payloads
) -> list[Row]:
    """The store operations on Redis beside a plain redis-py client's pipelined SET/HSET."""
    import redis.asyncio as aioredis

    from prism_store_redis import create_redis_checkpoint_store, create_redis_session_store

    client = aioredis.Redis.from_url(url)
    checkpoints = create_redis_checkpoint_store(client, prefix=prefix)
    sessions = create_redis_session_store(client, prefix=prefix)
    raw = RawRedis(url, prefix)
    try:
        state = payloads.state
        state_json = dumps(state).decode()
        entry_json = dumps(payloads.result_entry).decode()
        await checkpoints.save(
            NAMESPACE, "run-store", state, version=1, expected_version=0, category="agent-run"
        )
        raw.write("cp", state_json)
        version = 1
        counter = 0
        append_parent: str | None = None

        async def store_save() -> None:
            nonlocal version, counter
            counter += 1
            await checkpoints.save(
                NAMESPACE,
                "run-store",
                {**state, "bench_counter": counter},
                version=version + 1,
                expected_version=version,
                category="agent-run",
            )
            version += 1

        async def store_load() -> None:
            assert await checkpoints.load(NAMESPACE, "run-store") is not None

        async def store_append() -> None:
            nonlocal append_parent
            stored = await sessions.append(
                fresh(payloads.result_entry, "sess-append", append_parent)
            )
            append_parent = stored.id

        specs: list[tuple[str, Op, Op, str, bool]] = [
            ("save", store_save, sync(lambda: raw.write("cp", state_json)), "SET+HSET", True),
            ("load", store_load, sync(lambda: raw.read("cp")), "GET + JSON decode", True),
            (
                "append",
                store_append,
                sync(lambda: raw.write(new_entry_id(), entry_json)),
                "SET+HSET of the entry",
                False,
            ),
        ]
        rows: list[Row] = []
        for name, prism_op, raw_op, label, gated in specs:
            sampled = await measure(
                [("prism", prism_op), ("raw", raw_op)], args.iterations, args.repeats
            )
            rows.append(make_row("redis", name, sampled, f"redis-py: {label}", gated=gated))
        return rows
    finally:
        with anyio.CancelScope(shield=True):
            raw.close()
            await delete_redis_keys(client, prefix)
            await sessions.aclose()
            await checkpoints.aclose()
            await client.aclose()


# -- main -------------------------------------------------------------------------------------


def _median(sampled: Sampled) -> float:
    return statistics.median(sampled.medians) * 1000.0


def render(rows: Sequence[Row]) -> str:
    """The results table."""
    headers = (
        "backend",
        "operation",
        "prism med ms",
        "prism p95",
        "raw med ms",
        "raw p95",
        "prism/raw",
        "target",
        "result",
        "repeat medians prism (ms)",
        "raw baseline",
    )
    lines: list[list[str]] = []
    for row in rows:
        if row.skipped is not None or row.store is None:
            lines.append(
                [row.backend, row.operation, *["-"] * 6, "SKIP", "-", f"skipped: {row.skipped}"]
            )
            continue
        store = _median(row.store)
        spread = " ".join(f"{m * 1000:.3f}" for m in row.store.medians)
        if row.raw is None:
            lines.append(
                [
                    row.backend,
                    row.operation,
                    f"{store:.3f}",
                    f"{p95_ms(row.store.samples):.3f}",
                    *["-"] * 4,
                    "info",
                    spread,
                    "no plain-driver baseline",
                ]
            )
            continue
        raw = _median(row.raw)
        ratio = store / raw
        lines.append(
            [
                row.backend,
                row.operation,
                f"{store:.3f}",
                f"{p95_ms(row.store.samples):.3f}",
                f"{raw:.3f}",
                f"{p95_ms(row.raw.samples):.3f}",
                f"{ratio:.2f}",
                f"<= {TARGET_RATIO}" if row.gated else "-",
                ("PASS" if ratio <= TARGET_RATIO else "FAIL") if row.gated else "info",
                spread,
                row.raw_label,
            ]
        )
    return format_table(headers, lines)


async def run(args: argparse.Namespace) -> int:
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = sorted(set(backends) - set(BACKENDS))
    if unknown:
        print(f"unknown backends {unknown}; choose from {', '.join(BACKENDS)}", file=sys.stderr)
        return 2
    prefix = unique_prefix()
    print(
        f"prism store benchmark: {args.repeats} repeats x {args.iterations} timed iterations "
        f"per operation after {WARMUP} warm-up, prism and raw interleaved; python "
        f"{platform.python_version()}, prefix {prefix}"
    )
    payloads = Payloads(realistic_state(), await harvest_entries())
    print(
        f"checkpoint value {len(dumps(payloads.state))} B of canonical JSON; appended entry "
        f"{len(dumps(payloads.result_entry))} B"
    )
    started = time.perf_counter()
    rows: list[Row] = []
    for backend in backends:
        t0 = time.perf_counter()
        try:
            if backend == "sqlite":
                with tempfile.TemporaryDirectory(prefix="prism-bench-") as tmp:
                    url = f"sqlite:///{Path(tmp) / 'bench.db'}"
                    rows += await bench_sql("sqlite", url, prefix, args, payloads)
            elif backend == "postgres":
                reason = await probe_postgres(args.postgres_url)
                if reason is not None:
                    rows.append(Row("postgres", "all", skipped=reason))
                    continue
                rows += await bench_sql("postgres", args.postgres_url, prefix, args, payloads)
            else:
                reason = await probe_redis(args.redis_url)
                if reason is not None:
                    rows.append(Row("redis", "all", skipped=reason))
                    continue
                rows += await bench_redis(args.redis_url, prefix.rstrip("_"), args, payloads)
        except Exception as exc:
            rows.append(Row(backend, "all", skipped=f"failed: {type(exc).__name__}: {exc}"))
            continue
        print(f"  {backend}: measured in {time.perf_counter() - t0:.1f} s")
    print()
    print(render(rows))
    print()
    gated = [r for r in rows if r.gated and r.store is not None and r.raw is not None]
    failed = [
        r
        for r in gated
        if r.store is not None
        and r.raw is not None
        and _median(r.store) / _median(r.raw) > TARGET_RATIO
    ]
    skipped = [r.backend for r in rows if r.skipped is not None]
    print(
        f"prism/raw target <= {TARGET_RATIO}: {len(gated) - len(failed)} of {len(gated)} pass"
        + (
            f"; failing: {', '.join(f'{r.backend} {r.operation}' for r in failed)}"
            if failed
            else ""
        )
        + (f"; skipped: {', '.join(skipped)}" if skipped else "")
    )
    print(f"total {time.perf_counter() - started:.1f} s")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--iterations", type=int, default=100, help="timed iterations per repeat")
    parser.add_argument("--repeats", type=int, default=3, help="repeats (each gives a median)")
    parser.add_argument(
        "--backends", default=",".join(BACKENDS), help="comma-separated: sqlite,postgres,redis"
    )
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument("--redis-url", default=DEFAULT_REDIS_URL)
    args = parser.parse_args(argv)
    if args.iterations < 1 or args.repeats < 1:
        parser.error("--iterations and --repeats must be at least 1")
    try:
        return anyio.run(run, args, backend="asyncio")
    except KeyboardInterrupt:
        print("interrupted (tables and keys of this run were removed)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
