"""The SQL stores keep the effect ledger (conformance on the thread-driven SQLite backend, on
SQLite through SQLAlchemy and on PostgreSQL) and delete sessions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from prism_core.testing import (
    EffectLedgerConformance,
    SessionDeletionConformance,
    SharedCommitLedgerConformance,
)
from prism_store_sql import create_sql_checkpoint_store, create_sql_session_store, open_sql_stores
from tests.core.test_ledger_runs import SCENARIOS

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
