"""Shared pieces of the store benchmarks: the investigation workload, statistics, tables,
service probes and cleanup. Imported by ``bench/stores.py`` and ``bench/durable.py``."""

from __future__ import annotations

import os
import secrets
import statistics
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import anyio

from prism_core import (
    AGENT_RUN_NAMESPACE,
    ProviderRequest,
    ToolDefinition,
    provider_done,
    provider_text_delta,
    provider_tool_call,
    tool_call_content,
)

__all__ = (
    "AGENT_ID",
    "DEFAULT_POSTGRES_URL",
    "DEFAULT_REDIS_URL",
    "NAMESPACE",
    "REVISION",
    "Investigation",
    "WorkerDied",
    "run_until_the_worker_dies",
    "delete_redis_keys",
    "drop_sql_tables",
    "drop_sql_tables_at",
    "format_table",
    "median_ms",
    "p95_ms",
    "probe_postgres",
    "probe_redis",
    "probe_tool",
    "tool_output",
    "unique_prefix",
    "until_wal_steady",
    "wal_bytes",
    "WAL_STEADY_BYTES",
)

DEFAULT_POSTGRES_URL = os.environ.get(
    "PRISM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
DEFAULT_REDIS_URL = os.environ.get("PRISM_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
NAMESPACE = AGENT_RUN_NAMESPACE
REVISION = "bench-1"
AGENT_ID = "investigator"
PROBE_TIMEOUT_S = 5.0


#: A SQLite WAL file this large has reached the writer's automatic checkpoint (1000 pages of
#: 4 KiB, each with its 24-byte frame header): from then on it is rewritten in place.
WAL_STEADY_BYTES = 1000 * (4096 + 24)


def wal_bytes(database: str) -> int:
    """The size of the WAL file beside the SQLite file ``database`` (0 when there is none)."""
    try:
        return os.path.getsize(f"{database}-wal")
    except OSError:
        return 0


async def until_wal_steady(database: str, step: Callable[[], Awaitable[object]]) -> None:
    """Await ``step()`` until the WAL beside ``database`` has reached
    :data:`WAL_STEADY_BYTES`; a WAL that never gets there (a file not in WAL mode, a size
    limit) is an error after 500 steps, not a benchmark that never ends."""
    for _ in range(500):
        if wal_bytes(database) >= WAL_STEADY_BYTES:
            return
        await step()
    raise RuntimeError(f"the WAL of {database} did not reach {WAL_STEADY_BYTES} bytes")


def unique_prefix() -> str:
    """A table / key prefix no other run uses (``bench_<random>_``)."""
    return f"bench_{secrets.token_hex(4)}_"


# -- statistics and tables --------------------------------------------------------------------


def median_ms(samples: Sequence[float]) -> float:
    """The median of ``samples`` (seconds) in milliseconds."""
    return statistics.median(samples) * 1000.0


def p95_ms(samples: Sequence[float]) -> float:
    """The 95th percentile (nearest rank) of ``samples`` (seconds) in milliseconds."""
    ordered = sorted(samples)
    index = max(0, min(len(ordered) - 1, round(0.95 * len(ordered)) - 1))
    return ordered[index] * 1000.0


def format_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A plain-text table: left-aligned text, columns padded to their widest cell."""
    body = [list(map(str, row)) for row in rows]
    widths = [len(h) for h in headers]
    for row in body:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: Sequence[str]) -> str:
        return "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(cells)).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in body)])


# -- the workload -----------------------------------------------------------------------------


class WorkerDied(BaseException):
    """Stands in for the worker process being killed: nothing in a run may catch it."""


async def run_until_the_worker_dies(run: Awaitable[object]) -> None:
    """Await ``run``, which must end with :class:`WorkerDied` (raised alone, or inside the
    exception group of a task group); anything else propagates, and a run that ends
    normally is an error."""
    try:
        await run
    except WorkerDied:
        return
    except BaseExceptionGroup as group:
        if group.subgroup(WorkerDied) is None:
            raise
        return
    raise RuntimeError("the worker was meant to die")


def tool_output(step: int, size: int = 2048) -> str:
    """A ~``size``-byte log excerpt, different per step, as an investigation tool returns."""
    lines: list[str] = []
    total = 0
    i = 0
    while total < size:
        line = (
            f"2026-11-30T12:{i % 60:02d}:{(step * 7 + i) % 60:02d}Z api-{step % 5} "
            f"GET /v1/orders/{step * 1000 + i} status={200 if i % 9 else 503} "
            f"latency_ms={(step * 31 + i * 17) % 900} trace=t{step:03d}{i:04d}"
        )
        lines.append(line)
        total += len(line) + 1
        i += 1
    return "\n".join(lines)[:size]


def probe_tool(calls: list[int] | None = None, *, effect: str | None = "read") -> ToolDefinition:
    """The investigation's one tool: reads a log window and returns ~2 KB of it.

    ``effect=None`` declares it side-effecting (neither read-only nor idempotent), so a
    durable run marks each call ``dispatched`` before it starts."""

    def probe(args: dict[str, Any], context: Any) -> str:
        if calls is not None:
            calls.append(args["step"])
        return tool_output(int(args["step"]))

    return ToolDefinition(
        "probe",
        probe,
        description="Read the service log window around one step of the investigation.",
        parameters={
            "type": "object",
            "properties": {"step": {"type": "integer", "minimum": 0}},
            "required": ["step"],
        },
        effect=effect,
    )


class Investigation:
    """A provider that calls ``probe`` once per turn for ``turns`` turns, then answers.

    It picks its turn from how many assistant messages the request holds, so a resumed run
    (new agent, new provider) continues the same script. ``calls`` records the
    ``perf_counter`` time of every ``generate`` call, the moment the runtime hands the request
    to the provider. With ``die_at`` it raises :class:`WorkerDied` on that turn's call (0-based
    by completed turns), after recording the time.
    """

    id = "mock"

    def __init__(self, turns: int, *, die_at: int | None = None) -> None:
        self.turns = turns
        self.die_at = die_at
        self.calls: list[float] = []

    def generate(self, request: ProviderRequest) -> Any:
        self.calls.append(time.perf_counter())
        index = sum(1 for m in request.messages if m.role == "assistant")
        return self._events(index)

    async def _events(self, index: int) -> Any:
        if index == self.die_at:
            raise WorkerDied()
        if index < self.turns:
            call = tool_call_content(f"call_{index:03d}", "probe", {"step": index})
            yield provider_tool_call(call)
        else:
            yield provider_text_delta("Root cause: api-3 exhausted its connection pool at 12:41.")
        yield provider_done()


# -- services ---------------------------------------------------------------------------------


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def probe_postgres(url: str) -> str | None:
    """``None`` when PostgreSQL at ``url`` answers within a few seconds, else why not."""
    try:
        import asyncpg
    except ImportError as exc:
        return f"asyncpg is not installed ({exc})"
    dsn = url.replace("postgresql+asyncpg://", "postgresql://", 1)
    try:
        with anyio.fail_after(PROBE_TIMEOUT_S):
            connection = await asyncpg.connect(dsn, timeout=PROBE_TIMEOUT_S)
            try:
                await connection.fetchval("SELECT 1")
            finally:
                await connection.close()
    except TimeoutError:
        return f"PostgreSQL did not answer within {PROBE_TIMEOUT_S:.0f} s"
    except Exception as exc:
        return f"PostgreSQL unreachable: {_reason(exc)}"
    return None


async def probe_redis(url: str) -> str | None:
    """``None`` when Redis at ``url`` answers a PING within a few seconds, else why not."""
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(
        url, socket_connect_timeout=PROBE_TIMEOUT_S, socket_timeout=PROBE_TIMEOUT_S
    )
    try:
        with anyio.fail_after(PROBE_TIMEOUT_S * 2):
            await client.ping()
    except TimeoutError:
        return f"Redis did not answer within {PROBE_TIMEOUT_S:.0f} s"
    except Exception as exc:
        return f"Redis unreachable: {_reason(exc)}"
    finally:
        with anyio.CancelScope(shield=True):
            await client.aclose()
    return None


async def drop_sql_tables(engine: Any, prefix: str) -> list[str]:
    """Drop every table whose name starts with ``prefix``; the names dropped.

    Runs shielded from cancellation so an interrupted benchmark still cleans up.
    """
    from sqlalchemy import text

    pattern = prefix.replace("_", r"\_") + "%"
    with anyio.CancelScope(shield=True):
        async with engine.begin() as connection:
            if engine.dialect.name == "postgresql":
                query = (
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                    r"AND tablename LIKE :pattern ESCAPE '\'"
                )
            else:
                query = (
                    "SELECT name FROM sqlite_master WHERE type = 'table' "
                    r"AND name LIKE :pattern ESCAPE '\'"
                )
            names = [row[0] for row in await connection.execute(text(query), {"pattern": pattern})]
            for name in names:
                if not name.startswith(prefix):  # belt and braces: never touch other tables
                    continue
                await connection.execute(text(f'DROP TABLE IF EXISTS "{name}"'))
    return names


async def drop_sql_tables_at(url: str, prefix: str) -> list[str]:
    """:func:`drop_sql_tables` on an engine of its own for ``url``, disposed of afterwards."""
    from sqlalchemy.ext.asyncio import create_async_engine

    from prism_store_sql._engine import async_url

    engine = create_async_engine(async_url(url))
    try:
        return await drop_sql_tables(engine, prefix)
    finally:
        with anyio.CancelScope(shield=True):
            await engine.dispose()


async def delete_redis_keys(client: Any, prefix: str) -> int:
    """Delete every key under ``<prefix>:``; how many were deleted (shielded, like above)."""
    deleted = 0
    with anyio.CancelScope(shield=True):
        batch: list[bytes] = []
        async for key in client.scan_iter(match=f"{prefix}:*", count=500):
            batch.append(key)
            if len(batch) >= 500:
                deleted += await client.delete(*batch)
                batch = []
        if batch:
            deleted += await client.delete(*batch)
    return deleted
