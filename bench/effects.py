"""A filtered ``list_effects`` on a store holding 100,000 effect records, per backend.

Each backend's ledger is filled with ``--effects`` records (100,000 by default) written the way
runs write them: ledger rows riding checkpoint saves (``--batch`` records per save). The
records spread over 500 runs and 50 tools; 1 in 20 was approved by one of 40 actors; each has
a unique order number and an amount among 100; 1 in 1000 is ``in_doubt``. Then each query
below is timed (one page of at most 100 records, what an operator's first look reads):

- ``order``: ``arguments={"order": <one order>}`` (one record);
- ``key``: ``idempotency_key=<one key>`` (one record);
- ``run``: ``run_id=<one run>`` (200 records, first page);
- ``tool+actor``: ``tool_name=<one tool>, actor=<one actor>`` (~50 records);
- ``in_doubt``: ``status="in_doubt"`` (100 records);
- ``amount+tool``: ``arguments={"amount": 7}, tool_name=<one tool>`` (~20 records);
- ``last hour``: ``since=<an hour ago>`` on a store whose records span a day (first page).

On PostgreSQL the ledger's tables are analysed after the fill (``--no-analyze`` skips it): a
server running autovacuum does that itself after a bulk load, and without statistics the
planner may join an argument's index rows to every effect row instead of starting from them.

It prints, per backend and query, the median and p95 over ``--repeats`` rounds of
``--iterations`` calls, and the raw figures: each round's median (ms). A backend whose
service is unreachable prints a ``skipped`` row. Run it as::

    .venv/bin/python bench/effects.py
    .venv/bin/python bench/effects.py --effects 100000 --backends sqlite,postgresql,redis

Every run uses its own SQLite file, table prefix and key prefix and removes them at the end.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from _support import (
    DEFAULT_POSTGRES_URL,
    DEFAULT_REDIS_URL,
    delete_redis_keys,
    drop_sql_tables_at,
    format_table,
    p95_ms,
    probe_postgres,
    probe_redis,
    unique_prefix,
)

from prism_core import EffectRecord, list_effects
from prism_core.stores import LedgerEffect, LedgerWrite, validate_save

RUNS = 500
TOOLS = 50
ACTORS = 40
NAMESPACE = "bench.effects"


def records(count: int, owner: dict[str, str], now: float) -> list[EffectRecord]:
    """``count`` effect records spread as the module docstring says (seeded: the same store
    every time)."""
    rng = random.Random(7)
    span = 86400.0
    out = []
    for index in range(count):
        run = index % RUNS
        approved = (f"actor-{rng.randrange(ACTORS)}",) if index % 20 == 0 else ()
        out.append(
            EffectRecord(
                run_id=f"run-{run:04d}",
                session_id=f"session-{run:04d}",
                agent_id="bench",
                tool_name=f"tool-{index % TOOLS:02d}",
                tool_call_id=f"call-{index:06d}",
                idempotency_key=f"idem-{index:06d}",
                fencing_token=1,
                arguments={"order": f"O-{index:06d}", "amount": index % 100},
                arguments_hash=f"{index:064x}",
                status="in_doubt" if index % 1000 == 0 else "completed",
                result_hash=f"{index + 1:064x}",
                started_at=now - span + span * index / count,
                finished_at=now - span + span * index / count + 0.1,
                executed_by="bench:1",
                approved_by=approved,
                ownership=owner,
            )
        )
    return out


async def fill(checkpoints: Any, rows: Sequence[EffectRecord], batch: int, owner: Any) -> float:
    """Write ``rows`` through checkpoint saves of ``batch`` rows each; the seconds taken."""
    started = time.perf_counter()
    for version, first in enumerate(range(0, len(rows), batch), start=1):
        ledger = LedgerWrite(effects=tuple(LedgerEffect.of(r) for r in rows[first : first + batch]))
        request = validate_save(
            NAMESPACE,
            "filler",
            {"status": "running"},
            version=version,
            ownership=owner,
            ledger=ledger,
        )
        await checkpoints.save_request(request)
    return time.perf_counter() - started


def queries(rows: Sequence[EffectRecord], now: float) -> dict[str, dict[str, Any]]:
    """The timed queries' filters (see the module docstring)."""
    middle = rows[len(rows) // 2 + 3]
    approved = next(r for r in rows[len(rows) // 3 :] if r.approved_by)
    return {
        "order": {"arguments": {"order": middle.arguments["order"]}},
        "key": {"idempotency_key": middle.idempotency_key},
        "run": {"run_id": middle.run_id},
        "tool+actor": {"tool_name": approved.tool_name, "actor": approved.approved_by[0]},
        "in_doubt": {"status": "in_doubt"},
        "amount+tool": {"arguments": {"amount": 7}, "tool_name": "tool-07"},
        "last hour": {"since": now - 3600},
    }


async def measure(
    checkpoints: Any, filters: dict[str, Any], owner: Any, iterations: int, repeats: int
) -> tuple[list[float], list[float], int]:
    """Every sample (seconds), each round's median (ms), and how many records a page held."""
    samples: list[float] = []
    rounds: list[float] = []
    found = 0
    for _ in range(repeats):
        this: list[float] = []
        for _ in range(iterations):
            started = time.perf_counter()
            page = await list_effects(checkpoints, ownership=owner, limit=100, **filters)
            this.append(time.perf_counter() - started)
            found = len(page.effects)
        samples.extend(this)
        rounds.append(statistics.median(this) * 1000.0)
    return samples, rounds, found


async def analyze_sql_tables(url: str, prefix: str) -> None:
    """``ANALYZE`` the ledger's tables under ``prefix`` at the PostgreSQL ``url`` (what
    autovacuum does after a bulk load on a server that runs it; the planner needs the
    statistics to start from the most selective index)."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    from prism_store_sql._engine import async_url

    engine = create_async_engine(async_url(url))
    try:
        async with engine.begin() as connection:
            for table in ("effects", "effect_terms", "decisions"):
                await connection.execute(text(f'ANALYZE "{prefix}{table}"'))
    finally:
        await engine.dispose()


async def bench_backend(
    name: str, opener: Any, args: argparse.Namespace, after_fill: Any = None
) -> list[list[str]]:
    """The table rows of one backend (``after_fill``: awaited once the store is filled)."""
    owner = {"tenant_id": "bench"}
    now = time.time()
    rows = records(args.effects, owner, now)
    out: list[list[str]] = []
    async with opener() as pair:
        checkpoints = pair.checkpoints
        took = await fill(checkpoints, rows, args.batch, owner)
        out.append([name, f"fill {len(rows)}", f"{took:.1f} s", "", "", ""])
        if after_fill is not None:
            await after_fill()
        for label, filters in queries(rows, now).items():
            samples, rounds, found = await measure(
                checkpoints, filters, owner, args.iterations, args.repeats
            )
            out.append(
                [
                    name,
                    label,
                    f"{statistics.median(rounds):.2f}",
                    f"{p95_ms(samples):.2f}",
                    str(found),
                    " ".join(f"{r:.2f}" for r in rounds),
                ]
            )
    return out


async def run(args: argparse.Namespace) -> int:
    """Every backend asked for, in turn; prints one table."""
    from prism_store_redis import open_redis_stores
    from prism_store_sql import open_sql_stores

    wanted = [b.strip() for b in args.backends.split(",") if b.strip()]
    table: list[list[str]] = []
    prefix = unique_prefix()
    with tempfile.TemporaryDirectory() as folder:
        for backend in wanted:
            if backend == "memory":
                from contextlib import asynccontextmanager

                from prism_core import StorePair, create_memory_checkpoint_store
                from prism_core.stores import create_memory_session_store

                @asynccontextmanager
                async def memory() -> Any:
                    yield StorePair(create_memory_checkpoint_store(), create_memory_session_store())

                table += await bench_backend("memory", memory, args)
            elif backend == "sqlite":
                url = f"sqlite:///{Path(folder) / 'effects.db'}"
                table += await bench_backend("sqlite", lambda url=url: open_sql_stores(url), args)
            elif backend == "postgresql":
                reason = await probe_postgres(args.postgres_url)
                if reason is not None:
                    table.append(["postgresql", "skipped", reason, "", "", ""])
                    continue
                try:
                    table += await bench_backend(
                        "postgresql",
                        lambda: open_sql_stores(args.postgres_url, table_prefix=prefix),
                        args,
                        None
                        if args.no_analyze
                        else lambda: analyze_sql_tables(args.postgres_url, prefix),
                    )
                finally:
                    await drop_sql_tables_at(args.postgres_url, prefix)
            elif backend == "redis":
                reason = await probe_redis(args.redis_url)
                if reason is not None:
                    table.append(["redis", "skipped", reason, "", "", ""])
                    continue
                import redis.asyncio as aioredis

                key_prefix = prefix.rstrip("_")
                try:
                    table += await bench_backend(
                        "redis",
                        lambda key_prefix=key_prefix: open_redis_stores(
                            args.redis_url, prefix=key_prefix
                        ),
                        args,
                    )
                finally:
                    client = aioredis.Redis.from_url(args.redis_url)
                    await delete_redis_keys(client, key_prefix)
                    await client.aclose()
            else:
                print(f"unknown backend {backend!r}", file=sys.stderr)
                return 2
    print(
        f"list_effects on {args.effects} effect records (page of at most 100), "
        f"{args.repeats} rounds of {args.iterations} calls; Python {platform.python_version()}; "
        f"PostgreSQL {'not ' if args.no_analyze else ''}analysed after the fill"
    )
    headers = ["backend", "query", "median ms", "p95 ms", "found", "rounds' medians (ms)"]
    print(format_table(headers, table))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments and run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--effects", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000, help="records per checkpoint save")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--backends", default="sqlite,postgresql,redis")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument(
        "--no-analyze",
        action="store_true",
        help="query PostgreSQL without ANALYZE after the fill (no planner statistics)",
    )
    parser.add_argument("--redis-url", default=DEFAULT_REDIS_URL)
    return anyio.run(run, parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
