"""The SQL stores keep the effect ledger (conformance on the thread-driven SQLite backend, on
SQLite through SQLAlchemy and on PostgreSQL) and delete sessions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from prism_core.testing import (
    EffectLedgerConformance,
    SessionDeletionConformance,
    SharedCommitLedgerConformance,
)
from prism_store_sql import create_sql_checkpoint_store, create_sql_session_store, open_sql_stores
from tests import ledger_operations
from tests.core.durable.test_ledger_runs import SCENARIOS

from .conftest import PostgresServer, Target, aiosqlite_url


@pytest.fixture(params=["sqlite", "aiosqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, sqlite_target: Target) -> tuple[str, str]:
    """A database URL and table prefix on each SQL backend."""
    if request.param == "sqlite":
        return sqlite_target.url, sqlite_target.prefix
    if request.param == "aiosqlite":
        return aiosqlite_url(sqlite_target.url), sqlite_target.prefix
    server: PostgresServer = request.getfixturevalue("postgres_server")
    target = server.shared()
    return target.url, target.prefix


class TestSqlEffectLedger(EffectLedgerConformance):
    """The checkpoint store keeps an effect ledger on every SQL backend."""

    @pytest.fixture
    async def checkpoint_store(self, ledger_url: tuple[str, str]) -> AsyncIterator[Any]:
        """A store on this backend; every suite test writes under its own owner."""
        url, prefix = ledger_url
        async with create_sql_checkpoint_store(url, table_prefix=prefix) as store:
            yield store


class TestSqlSharedCommitLedger(SharedCommitLedgerConformance):
    """A shared commit writes its save's ledger rows on every SQL backend."""

    @pytest.fixture
    async def shared_stores(self, ledger_url: tuple[str, str]) -> AsyncIterator[Any]:
        """Both stores on one connection or engine."""
        url, prefix = ledger_url
        async with open_sql_stores(url, table_prefix=prefix) as stores:
            yield stores.checkpoints, stores.sessions


class TestPostgresGroupCommitLedger(EffectLedgerConformance):
    """On PostgreSQL with group commit, a save with ledger rows goes alone and keeps them."""

    @pytest.fixture
    async def checkpoint_store(self, postgres_server: PostgresServer) -> AsyncIterator[Any]:
        """A store on the session's tables with group commit."""
        target = postgres_server.shared()
        async with open_sql_stores(target.url, table_prefix=target.prefix, group_commit=16) as pair:
            yield pair.checkpoints


class TestSqlSessionDeletion(SessionDeletionConformance):
    """The session store deletes a session on every SQL backend."""

    @pytest.fixture
    async def session_store(self, ledger_url: tuple[str, str]) -> AsyncIterator[Any]:
        """A session store on this backend."""
        url, prefix = ledger_url
        async with create_sql_session_store(url, table_prefix=prefix) as store:
            yield store


@pytest.mark.anyio
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
async def test_ledger_scenarios(scenario: Any, ledger_url: tuple[str, str]) -> None:
    """Each ledger scenario of real runs holds on every SQL backend (stores opened as a pair,
    as a host opens them)."""
    url, prefix = ledger_url
    async with open_sql_stores(url, table_prefix=prefix) as stores:
        await scenario(stores.checkpoints, stores.sessions)


async def _table_text(url: str, prefix: str) -> str:
    """Every row of every table of ``prefix`` on PostgreSQL, as text."""
    from sqlalchemy.ext.asyncio import create_async_engine

    from prism_store_sql._engine import async_url

    engine = create_async_engine(async_url(url))
    try:
        async with engine.connect() as connection:
            names = (
                await connection.execute(
                    sa.text(
                        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                        "AND starts_with(tablename, :prefix) ORDER BY tablename"
                    ),
                    {"prefix": prefix},
                )
            ).scalars()
            parts = []
            for name in list(names):
                rows = await connection.execute(sa.text(f'SELECT t::text FROM "{name}" AS t'))
                parts.extend(str(row[0]) for row in rows)
    finally:
        await engine.dispose()
    return "\n".join(sorted(parts))


def _sqlite_bytes(url: str) -> bytes:
    """The SQLite database file and its WAL, as they are on disk."""
    path = Path(url.removeprefix("sqlite:///").removeprefix("sqlite+aiosqlite:///"))
    found = b""
    for name in (path, Path(f"{path}-wal")):
        if name.exists():
            found += name.read_bytes()
    return found


@pytest.mark.anyio
async def test_a_preview_writes_nothing(ledger_url: tuple[str, str]) -> None:
    """Previews leave the SQLite file and its WAL byte for byte, and every PostgreSQL row."""
    url, prefix = ledger_url

    async def snapshot() -> Any:
        if url.startswith("postgresql"):
            return await _table_text(url, prefix)
        return _sqlite_bytes(url)

    async with open_sql_stores(url, table_prefix=prefix) as stores:
        await ledger_operations.a_preview_writes_nothing(
            stores.checkpoints, stores.sessions, snapshot
        )


@pytest.mark.anyio
async def test_finished_runs_are_purged(ledger_url: tuple[str, str]) -> None:
    """Finished runs older than the date go with their transcripts; the ledger stays."""
    url, prefix = ledger_url
    async with open_sql_stores(url, table_prefix=prefix) as stores:
        await ledger_operations.finished_runs_are_purged(stores.checkpoints, stores.sessions)


@pytest.mark.anyio
async def test_an_erased_session_leaves_no_bytes_behind(ledger_url: tuple[str, str]) -> None:
    """The erased argument and reason are in the storage before the erasure (the control)
    and nowhere after it: not in the SQLite file or its WAL (scrubbed), not in any row of
    the PostgreSQL tables."""
    url, prefix = ledger_url
    secrets = (
        ledger_operations.ERASED_ARGUMENT.encode(),
        ledger_operations.ERASED_REASON.encode(),
    )

    async def storage() -> bytes:
        if url.startswith("postgresql"):
            return (await _table_text(url, prefix)).encode()
        return _sqlite_bytes(url)

    async def present() -> None:
        held = await storage()
        assert all(secret in held for secret in secrets)

    async with open_sql_stores(url, table_prefix=prefix) as stores:
        await ledger_operations.a_session_is_erased(
            stores.checkpoints, stores.sessions, before_erase=present
        )
        held = await storage()
    assert not any(secret in held for secret in secrets)
