"""Store latency next to the raw driver round trip, on SQLite, PostgreSQL and Redis.

For each backend this measures, in one run and interleaved iteration by iteration:

- checkpoint ``save``: a realistic ~2 KB agent-run state, compare-and-swap on the previous
  version (``version=v+1, expected_version=v``), as every-turn checkpointing writes it;
- checkpoint ``load`` of that record;
- session ``append`` of a ~2 KB tool-result entry;
- session ``read_branch_path`` of a 40-entry branch;

and next to each, the same bytes through the same connection without the store:

- SQL (``raw``): SQLAlchemy Core ``text()`` on an ``AsyncConnection`` from the store's own
  engine: a bare ``INSERT … ON CONFLICT (namespace, key) DO UPDATE`` with the same
  parameters inside ``engine.begin()``, a plain ``SELECT`` by key, a bare ``INSERT`` of the
  entry row, a ``SELECT`` of the session's 40 rows;
- SQL (``driver``): the same statements on the engine's raw asyncpg / aiosqlite connection
  (no SQLAlchemy at all), as the floor;
- Redis (``raw``): ``SET`` / ``GET`` of the same bytes, ``SET`` of the entry, ``MGET`` of 40
  entries, on the same client.

It prints the median and p95 of each, the ratio store/raw, and PASS/FAIL against the target
ratio (≤ 1.5) for ``save`` and ``load``. A backend whose service is unreachable prints a
``skipped: <reason>`` row.

Run it with ``make bench`` or::

    .venv/bin/python bench/stores.py
    .venv/bin/python bench/stores.py --iterations 500 --backends sqlite,redis \\
        --postgres-url postgresql://postgres@127.0.0.1:5432/test --redis-url redis://127.0.0.1:6379/0

Every run works under its own table prefix / key prefix (``bench_<random>_``) and drops its
tables and deletes its keys at the end, also when it fails or is interrupted, so it can share
a database and a Redis server with other users.
"""

from __future__ import annotations

import argparse
import gc
import platform
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import attrs
from _support import (
    AGENT_ID,
    DEFAULT_POSTGRES_URL,
    DEFAULT_REDIS_URL,
    NAMESPACE,
    Investigation,
    delete_redis_keys,
    drop_sql_tables,
    format_table,
    median_ms,
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
from prism_core.codec import dumps, unstructure
from prism_core.durable import (
    AgentRunState,
    DecisionScope,
    StickyDecision,
    arguments_hash,
)
from prism_core.durable._state import (
    RunCountersState,
    SessionStateRecord,
    parse_state,
    state_to_json,
)
from prism_core.sessions import new_entry_id

TARGET_RATIO = 1.5
WARMUP = 30
BRANCH_LENGTH = 40
BACKENDS = ("sqlite", "postgres", "redis")

Op = Callable[[], Awaitable[Any]]


@dataclass
class Row:
    """One operation on one backend: the store's samples and its baselines'."""

    backend: str
    operation: str
    store: list[float] = field(default_factory=list)
    raw: list[float] = field(default_factory=list)
    raw_label: str = ""
    driver: list[float] | None = None
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


_ENTRY_COLUMNS = ("id", "session_id", "parent_id", "kind", "run_id", "timestamp")


def entry_payload(entry: SessionEntry) -> str:
    """The JSON payload column the SQL session store writes for ``entry``."""
    data = unstructure(entry)
    return dumps({k: v for k, v in data.items() if k not in _ENTRY_COLUMNS}).decode()


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


async def measure(ops: Sequence[tuple[str, Op]], iterations: int) -> dict[str, list[float]]:
    """Warm every op up, then time them interleaved (rotating the order each iteration)."""
    for _ in range(WARMUP):
        for _, op in ops:
            await op()
    gc.collect()
    samples: dict[str, list[float]] = {name: [] for name, _ in ops}
    count = len(ops)
    clock = time.perf_counter
    for i in range(iterations):
        for j in range(count):
            name, op = ops[(i + j) % count]
            start = clock()
            await op()
            samples[name].append(clock() - start)
    return samples


# -- SQL --------------------------------------------------------------------------------------


def sql_statements(prefix: str, paramstyle: str) -> dict[str, str]:
    """The baseline statements, with ``:name`` (SQLAlchemy), ``$n`` (asyncpg) or ``?``."""
    cp, se = f'"{prefix}checkpoints"', f'"{prefix}session_entries"'
    cp_cols = (
        "namespace",
        "key",
        "owner",
        "version",
        "fencing_token",
        "category",
        "value",
        "metadata",
        "created_at",
        "updated_at",
    )
    se_cols = ("id", "session_id", "parent_id", "seq", "kind", "payload", "run_id", "timestamp")

    def marks(names: Sequence[str]) -> str:
        if paramstyle == "named":
            return ", ".join(f":{n}" for n in names)
        if paramstyle == "numeric":
            return ", ".join(f"${i}" for i in range(1, len(names) + 1))
        return ", ".join("?" for _ in names)

    def where(names: Sequence[str]) -> str:
        if paramstyle == "named":
            return " AND ".join(f'"{n}" = :{n}' for n in names)
        if paramstyle == "numeric":
            return " AND ".join(f'"{n}" = ${i}' for i, n in enumerate(names, 1))
        return " AND ".join(f'"{n}" = ?' for n in names)

    quoted = ", ".join(f'"{c}"' for c in cp_cols)
    updated = ", ".join(
        f'"{c}" = excluded."{c}"'
        for c in ("version", "fencing_token", "category", "value", "metadata", "updated_at")
    )
    return {
        "save": (
            f"INSERT INTO {cp} ({quoted}) VALUES ({marks(cp_cols)}) "
            f'ON CONFLICT ("namespace", "key") DO UPDATE SET {updated} RETURNING "created_at"'
        ),
        "load": f"SELECT {quoted} FROM {cp} WHERE {where(('namespace', 'key', 'owner'))}",
        "append": (
            f"INSERT INTO {se} ({', '.join(f'{chr(34)}{c}{chr(34)}' for c in se_cols)}) "
            f"VALUES ({marks(se_cols)})"
        ),
        "branch": (
            f'SELECT "id", "session_id", "parent_id", "kind", "payload", "run_id", "timestamp" '
            f'FROM {se} WHERE {where(("session_id",))} ORDER BY "seq"'
        ),
    }


async def bench_sql(
    backend: str, url: str, prefix: str, iterations: int, payloads: Payloads
) -> list[Row]:
    """The four operations on a SQL backend (``sqlite`` or ``postgres``)."""
    from sqlalchemy import text

    from prism_store_sql import create_sql_checkpoint_store, create_sql_session_store

    checkpoints = create_sql_checkpoint_store(url, table_prefix=prefix)
    engine = checkpoints.engine
    sessions = create_sql_session_store(engine, table_prefix=prefix)
    held: Any = None
    try:
        state = payloads.state
        state_json = dumps(state).decode()
        harvested = payloads.entries
        result_entry = payloads.result_entry

        # Schema, a first record and the 40-entry branch (all untimed).
        version = 0
        await checkpoints.save(
            NAMESPACE, "run-store", state, version=1, expected_version=0, category="agent-run"
        )
        version = 1
        parent: str | None = None
        for entry in harvested[:BRANCH_LENGTH]:
            stored = await sessions.append(fresh(entry, "sess-branch", parent))
            parent = stored.id
        branch_leaf = parent
        append_parent: str | None = None

        named = sql_statements(prefix, "named")
        is_pg = engine.dialect.name == "postgresql"
        native = sql_statements(prefix, "numeric" if is_pg else "qmark")

        # The driver baseline holds one pooled connection's raw driver connection.
        held = await engine.connect()
        raw_connection = await held.get_raw_connection()
        driver = raw_connection.driver_connection

        raw_version = 0
        driver_version = 0
        raw_seq = 0
        driver_seq = 0
        raw_parent: str | None = None
        driver_parent: str | None = None

        def cp_params(key: str, next_version: int) -> dict[str, Any]:
            now = time.time()
            return {
                "namespace": NAMESPACE,
                "key": key,
                "owner": "",
                "version": next_version,
                "fencing_token": None,
                "category": "agent-run",
                "value": state_json,
                "metadata": None,
                "created_at": now,
                "updated_at": now,
            }

        def se_params(session_id: str, seq: int, parent_id: str | None) -> dict[str, Any]:
            entry = fresh(result_entry, session_id, parent_id)
            return {
                "id": entry.id,
                "session_id": session_id,
                "parent_id": parent_id,
                "seq": seq,
                "kind": entry.kind,
                "payload": entry_payload(entry),
                "run_id": entry.run_id,
                "timestamp": entry.timestamp,
            }

        async def driver_write(sql: str, params: dict[str, Any], fetch: bool) -> Any:
            values = list(params.values())
            if is_pg:
                if fetch:
                    return await driver.fetchrow(sql, *values)
                return await driver.execute(sql, *values)
            rows = await driver.execute_fetchall(sql, values)
            if driver.in_transaction:
                await driver.commit()
            return rows

        async def driver_read(sql: str, values: list[Any]) -> Any:
            if is_pg:
                return await driver.fetch(sql, *values)
            return await driver.execute_fetchall(sql, values)

        # save
        async def store_save() -> None:
            nonlocal version
            await checkpoints.save(
                NAMESPACE,
                "run-store",
                state,
                version=version + 1,
                expected_version=version,
                category="agent-run",
            )
            version += 1

        async def raw_save() -> None:
            nonlocal raw_version
            raw_version += 1
            async with engine.begin() as connection:
                result = await connection.execute(
                    text(named["save"]), cp_params("run-raw", raw_version)
                )
                result.first()

        async def driver_save() -> None:
            nonlocal driver_version
            driver_version += 1
            await driver_write(native["save"], cp_params("run-driver", driver_version), True)

        # load
        async def store_load() -> None:
            record = await checkpoints.load(NAMESPACE, "run-store")
            assert record is not None

        load_params = {"namespace": NAMESPACE, "key": "run-raw", "owner": ""}

        async def raw_load() -> None:
            async with engine.connect() as connection:
                result = await connection.execute(text(named["load"]), load_params)
                assert result.first() is not None

        async def driver_load() -> None:
            rows = await driver_read(native["load"], [NAMESPACE, "run-driver", ""])
            assert rows

        # append
        async def store_append() -> None:
            nonlocal append_parent
            stored = await sessions.append(fresh(result_entry, "sess-append", append_parent))
            append_parent = stored.id

        async def raw_append() -> None:
            nonlocal raw_seq, raw_parent
            raw_seq += 1
            params = se_params("sess-raw", raw_seq, raw_parent)
            async with engine.begin() as connection:
                await connection.execute(text(named["append"]), params)
            raw_parent = params["id"]

        async def driver_append() -> None:
            nonlocal driver_seq, driver_parent
            driver_seq += 1
            params = se_params("sess-driver", driver_seq, driver_parent)
            await driver_write(native["append"], params, False)
            driver_parent = params["id"]

        # branch: the raw baselines read a 40-row session of the same entries
        for i, entry in enumerate(harvested[:BRANCH_LENGTH], 1):
            params = {
                "id": new_entry_id(),
                "session_id": "sess-raw-branch",
                "parent_id": None,
                "seq": i,
                "kind": entry.kind,
                "payload": entry_payload(entry),
                "run_id": entry.run_id,
                "timestamp": entry.timestamp,
            }
            async with engine.begin() as connection:
                await connection.execute(text(named["append"]), params)

        async def store_branch() -> None:
            path = await sessions.read_branch_path("sess-branch", branch_leaf)
            assert len(path) == BRANCH_LENGTH

        async def raw_branch() -> None:
            async with engine.connect() as connection:
                result = await connection.execute(
                    text(named["branch"]), {"session_id": "sess-raw-branch"}
                )
                assert len(result.all()) == BRANCH_LENGTH

        async def driver_branch() -> None:
            rows = await driver_read(native["branch"], ["sess-raw-branch"])
            assert len(rows) == BRANCH_LENGTH

        txn = "text() in engine.begin()"
        specs = [
            ("save", store_save, raw_save, driver_save, f"INSERT…ON CONFLICT DO UPDATE, {txn}"),
            ("load", store_load, raw_load, driver_load, "SELECT by key, text() on connect()"),
            ("append", store_append, raw_append, driver_append, f"INSERT entry row, {txn}"),
            (
                f"branch({BRANCH_LENGTH})",
                store_branch,
                raw_branch,
                driver_branch,
                f"SELECT {BRANCH_LENGTH} rows by session, text()",
            ),
        ]
        rows: list[Row] = []
        for name, store_op, raw_op, driver_op, label in specs:
            samples = await measure(
                [("store", store_op), ("raw", raw_op), ("driver", driver_op)], iterations
            )
            rows.append(
                Row(
                    backend=backend,
                    operation=name,
                    store=samples["store"],
                    raw=samples["raw"],
                    raw_label=label,
                    driver=samples["driver"],
                    gated=name in ("save", "load"),
                )
            )
        return rows
    finally:
        with anyio.CancelScope(shield=True):
            if held is not None:
                await held.close()
            if is_postgres(url):
                await drop_sql_tables(engine, prefix)
            await sessions.aclose()
            await checkpoints.aclose()


def is_postgres(url: str) -> bool:
    return url.split(":", 1)[0].split("+", 1)[0].lower() == "postgresql"


# -- Redis ------------------------------------------------------------------------------------


async def bench_redis(url: str, prefix: str, iterations: int, payloads: Payloads) -> list[Row]:
    """The four operations on Redis, against SET / GET / SET / MGET of the same bytes."""
    import redis.asyncio as aioredis

    from prism_store_redis import create_redis_checkpoint_store, create_redis_session_store

    client = aioredis.Redis.from_url(url)
    checkpoints = create_redis_checkpoint_store(client, prefix=prefix)
    sessions = create_redis_session_store(client, prefix=prefix)
    try:
        state = payloads.state
        state_bytes = dumps(state)
        harvested = payloads.entries
        result_entry = payloads.result_entry

        await checkpoints.save(
            NAMESPACE, "run-store", state, version=1, expected_version=0, category="agent-run"
        )
        version = 1
        parent: str | None = None
        branch_keys: list[str] = []
        for entry in harvested[:BRANCH_LENGTH]:
            stored = await sessions.append(fresh(entry, "sess-branch", parent))
            parent = stored.id
            raw_key = f"{prefix}:raw:branch:{stored.id}"
            await client.set(raw_key, dumps(stored))
            branch_keys.append(raw_key)
        branch_leaf = parent
        append_parent: str | None = None
        raw_count = 0

        async def store_save() -> None:
            nonlocal version
            await checkpoints.save(
                NAMESPACE,
                "run-store",
                state,
                version=version + 1,
                expected_version=version,
                category="agent-run",
            )
            version += 1

        async def raw_save() -> None:
            await client.set(f"{prefix}:raw:cp", state_bytes)

        async def store_load() -> None:
            assert await checkpoints.load(NAMESPACE, "run-store") is not None

        async def raw_load() -> None:
            assert await client.get(f"{prefix}:raw:cp") is not None

        async def store_append() -> None:
            nonlocal append_parent
            stored = await sessions.append(fresh(result_entry, "sess-append", append_parent))
            append_parent = stored.id

        async def raw_append() -> None:
            nonlocal raw_count
            raw_count += 1
            entry = fresh(result_entry, "sess-raw", None)
            await client.set(f"{prefix}:raw:se:{raw_count}", dumps(entry))

        async def store_branch() -> None:
            path = await sessions.read_branch_path("sess-branch", branch_leaf)
            assert len(path) == BRANCH_LENGTH

        async def raw_branch() -> None:
            values = await client.mget(branch_keys)
            assert len(values) == BRANCH_LENGTH

        specs = [
            ("save", store_save, raw_save, "SET of the same bytes"),
            ("load", store_load, raw_load, "GET of the same bytes"),
            ("append", store_append, raw_append, "SET of the entry's bytes"),
            (f"branch({BRANCH_LENGTH})", store_branch, raw_branch, f"MGET of {BRANCH_LENGTH}"),
        ]
        rows: list[Row] = []
        for name, store_op, raw_op, label in specs:
            samples = await measure([("store", store_op), ("raw", raw_op)], iterations)
            rows.append(
                Row(
                    backend="redis",
                    operation=name,
                    store=samples["store"],
                    raw=samples["raw"],
                    raw_label=label,
                    gated=name in ("save", "load"),
                )
            )
        return rows
    finally:
        with anyio.CancelScope(shield=True):
            await delete_redis_keys(client, prefix)
            await sessions.aclose()
            await checkpoints.aclose()
            await client.aclose()


# -- main -------------------------------------------------------------------------------------


def render(rows: Sequence[Row]) -> str:
    headers = (
        "backend",
        "operation",
        "store med ms",
        "store p95",
        "raw med ms",
        "raw p95",
        "store/raw",
        "target",
        "result",
        "driver med ms",
        "store/driver",
        "raw baseline",
    )
    lines: list[list[str]] = []
    for row in rows:
        if row.skipped is not None:
            lines.append(
                [
                    row.backend,
                    row.operation,
                    *["-"] * 6,
                    "SKIP",
                    "-",
                    "-",
                    f"skipped: {row.skipped}",
                ]
            )
            continue
        store, raw = median_ms(row.store), median_ms(row.raw)
        ratio = store / raw
        driver = median_ms(row.driver) if row.driver else None
        lines.append(
            [
                row.backend,
                row.operation,
                f"{store:.3f}",
                f"{p95_ms(row.store):.3f}",
                f"{raw:.3f}",
                f"{p95_ms(row.raw):.3f}",
                f"{ratio:.2f}",
                f"<= {TARGET_RATIO}" if row.gated else "-",
                ("PASS" if ratio <= TARGET_RATIO else "FAIL") if row.gated else "info",
                f"{driver:.3f}" if driver is not None else "-",
                f"{store / driver:.2f}" if driver is not None else "-",
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
        f"prism store benchmark: {args.iterations} timed iterations per operation after "
        f"{WARMUP} warm-up, interleaved; python {platform.python_version()}, "
        f"prefix {prefix}"
    )
    payloads = Payloads(realistic_state(), await harvest_entries())
    branch = payloads.entries[:BRANCH_LENGTH]
    print(
        f"checkpoint value {len(dumps(payloads.state))} B of canonical JSON; appended entry "
        f"{len(dumps(payloads.result_entry))} B; {BRANCH_LENGTH}-entry branch "
        f"{sum(len(dumps(e)) for e in branch)} B"
    )
    started = time.perf_counter()
    rows: list[Row] = []
    for backend in backends:
        t0 = time.perf_counter()
        try:
            if backend == "sqlite":
                with tempfile.TemporaryDirectory(prefix="prism-bench-") as tmp:
                    url = f"sqlite:///{Path(tmp) / 'bench.db'}"
                    rows += await bench_sql("sqlite", url, prefix, args.iterations, payloads)
            elif backend == "postgres":
                reason = await probe_postgres(args.postgres_url)
                if reason is not None:
                    rows.append(Row("postgres", "all", skipped=reason))
                    continue
                rows += await bench_sql(
                    "postgres", args.postgres_url, prefix, args.iterations, payloads
                )
            else:
                reason = await probe_redis(args.redis_url)
                if reason is not None:
                    rows.append(Row("redis", "all", skipped=reason))
                    continue
                rows += await bench_redis(
                    args.redis_url, prefix.rstrip("_"), args.iterations, payloads
                )
        except Exception as exc:
            rows.append(Row(backend, "all", skipped=f"failed: {type(exc).__name__}: {exc}"))
            continue
        print(f"  {backend}: measured in {time.perf_counter() - t0:.1f} s")
    print()
    print(render(rows))
    print()
    gated = [r for r in rows if r.gated and r.skipped is None]
    failed = [r for r in gated if median_ms(r.store) / median_ms(r.raw) > TARGET_RATIO]
    skipped = [r.backend for r in rows if r.skipped is not None]
    print(
        f"save/load ratio target <= {TARGET_RATIO}: {len(gated) - len(failed)} of {len(gated)} "
        f"pass"
        + (
            f"; failing: {', '.join(f'{r.backend} {r.operation}' for r in failed)}"
            if failed
            else ""
        )
        + (f"; skipped: {', '.join(skipped)}" if skipped else "")
    )
    print(
        "raw = the same statement through the store's engine with SQLAlchemy text() (SQL) or "
        "the same bytes with SET/GET/MGET (Redis); driver = the engine's bare asyncpg/aiosqlite "
        "connection, no SQLAlchemy."
    )
    print(f"total {time.perf_counter() - started:.1f} s")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--iterations", type=int, default=300, help="timed iterations per op")
    parser.add_argument(
        "--backends", default=",".join(BACKENDS), help="comma-separated: sqlite,postgres,redis"
    )
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument("--redis-url", default=DEFAULT_REDIS_URL)
    args = parser.parse_args(argv)
    if args.iterations < 1:
        parser.error("--iterations must be at least 1")
    try:
        return anyio.run(run, args, backend="asyncio")
    except KeyboardInterrupt:
        print("interrupted (tables and keys of this run were removed)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
