"""What a task queue worker pays to open the SQL stores again for each task.

A Celery task (``prism_celery``) runs its coroutine in a new event loop and opens its stores
from their URLs, then closes them. This script repeats that in one warm process: each sample
is one ``anyio.run`` that opens ``open_sql_stores(url)``, loads a checkpoint that exists,
lists a session, and closes the stores. Beside it, the plain driver doing the same work in a
new event loop: ``sqlite3.connect`` + the same two ``SELECT`` + close on SQLite, and
``asyncpg.connect`` + the same two ``SELECT`` + close on PostgreSQL (the floor a new
connection sets). Printed: medians and p95 in ms over ``--samples`` samples after
``--warmup``, the two measured interleaved, and their ratio.

Run it with::

    .venv/bin/python bench/reopen.py
    .venv/bin/python bench/reopen.py --samples 60 --backends sqlite

Each run uses its own SQLite directory and PostgreSQL table prefix and removes them at the
end. An unreachable PostgreSQL is reported as skipped.
"""

from __future__ import annotations

import argparse
import functools
import gc
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from _support import (
    DEFAULT_POSTGRES_URL,
    drop_sql_tables_at,
    format_table,
    median_ms,
    p95_ms,
    probe_postgres,
    unique_prefix,
)

from prism_core.records import create_session_entry
from prism_store_sql import open_sql_stores

NS, KEY, SESSION = "bench.reopen", "run-1", "session-1"


async def _seed(url: str, prefix: str) -> None:
    async with open_sql_stores(url, table_prefix=prefix) as (checkpoints, sessions):
        await checkpoints.save(NS, KEY, {"step": 1}, version=1, expected_version=0)
        await sessions.append(create_session_entry(session_id=SESSION, kind="label", label="x"))


def _prism(url: str, prefix: str) -> float:
    async def task() -> float:
        start = time.perf_counter()
        async with open_sql_stores(url, table_prefix=prefix) as (checkpoints, sessions):
            assert await checkpoints.load(NS, KEY) is not None
            assert len(await sessions.list(SESSION)) == 1
        return time.perf_counter() - start

    return anyio.run(task, backend="asyncio")


def _raw_sqlite(path: str, prefix: str) -> float:
    async def task() -> float:
        start = time.perf_counter()
        connection = sqlite3.connect(path)
        try:
            connection.execute("PRAGMA busy_timeout=5000")
            row = connection.execute(
                f"SELECT * FROM {prefix}checkpoints WHERE namespace = ? AND key = ?", (NS, KEY)
            ).fetchone()
            rows = connection.execute(
                f"SELECT * FROM {prefix}session_entries WHERE session_id = ? ORDER BY seq",
                (SESSION,),
            ).fetchall()
        finally:
            connection.close()
        assert row is not None
        assert len(rows) == 1
        return time.perf_counter() - start

    return anyio.run(task, backend="asyncio")


def _raw_postgres(url: str, prefix: str) -> float:
    import asyncpg  # type: ignore[import-untyped]

    async def task() -> float:
        start = time.perf_counter()
        connection = await asyncpg.connect(url)
        try:
            row = await connection.fetchrow(
                f"SELECT * FROM {prefix}checkpoints WHERE namespace = $1 AND key = $2", NS, KEY
            )
            rows = await connection.fetch(
                f"SELECT * FROM {prefix}session_entries WHERE session_id = $1 ORDER BY seq",
                SESSION,
            )
        finally:
            await connection.close()
        assert row is not None
        assert len(rows) == 1
        return time.perf_counter() - start

    return anyio.run(task, backend="asyncio")


def _interleaved(
    prism: Callable[[], float], raw: Callable[[], float], samples: int, warmup: int
) -> tuple[list[float], list[float]]:
    ours: list[float] = []
    plain: list[float] = []
    for index in range(warmup + samples):
        order = (prism, raw) if index % 2 == 0 else (raw, prism)
        for measure in order:
            gc.collect()
            elapsed = measure()
            if index >= warmup:
                (ours if measure is prism else plain).append(elapsed)
    return ours, plain


#: What the plain driver does in each sample, by backend.
_RAW_DOES = {
    "sqlite": "sqlite3.connect + 2 SELECT + close",
    "postgres": "asyncpg.connect + 2 SELECT + close",
}


def _compare(
    backend: str, url: str, prefix: str, raw: Callable[[str], float], args: argparse.Namespace
) -> list[str]:
    """Seed the stores at ``url``, time Prism and ``raw(prefix)`` interleaved; the row."""
    anyio.run(_seed, url, prefix, backend="asyncio")
    ours, plain = _interleaved(
        lambda: _prism(url, prefix), lambda: raw(prefix), args.samples, args.warmup
    )
    return [
        backend,
        f"{median_ms(ours):.2f}",
        f"{p95_ms(ours):.2f}",
        f"{median_ms(plain):.2f}",
        f"{p95_ms(plain):.2f}",
        f"{median_ms(ours) / median_ms(plain):.2f}x",
        _RAW_DOES[backend],
    ]


def run(args: argparse.Namespace) -> int:
    """Measure each backend asked for; print the table."""
    rows: list[list[str]] = []
    notes: list[str] = []
    if "sqlite" in args.backends:
        with tempfile.TemporaryDirectory(prefix="prism-reopen-") as work:
            path = str(Path(work) / "runs.db")
            raw_sqlite = functools.partial(_raw_sqlite, path)
            rows.append(_compare("sqlite", f"sqlite:///{path}", "prism_", raw_sqlite, args))
    if "postgres" in args.backends:
        url = args.postgres_url
        unreachable = anyio.run(probe_postgres, url, backend="asyncio")
        if unreachable is not None:
            notes.append(f"postgres skipped: {unreachable}")
        else:
            prefix = unique_prefix()
            try:
                raw_postgres = functools.partial(_raw_postgres, url)
                rows.append(_compare("postgres", url, prefix, raw_postgres, args))
            finally:
                anyio.run(drop_sql_tables_at, url, prefix, backend="asyncio")
    print(
        f"reopen per task: open_sql_stores + load + list + close in a new event loop, "
        f"{args.samples} samples after {args.warmup} warm-up, interleaved with the plain driver"
    )
    headers = ["backend", "prism ms", "p95", "raw ms", "p95", "prism/raw", "raw does"]
    print(format_table(headers, rows))
    for note in notes:
        print(note)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the options and run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=40, help="timed samples per backend")
    parser.add_argument("--warmup", type=int, default=5, help="untimed samples first")
    parser.add_argument(
        "--backends", nargs="+", choices=("sqlite", "postgres"), default=["sqlite", "postgres"]
    )
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    args: Any = parser.parse_args(argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
