"""The SQL stores pass the checkpoint and session store conformance suites on both backends."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from prism_core.records import SessionStore
from prism_core.stores import CheckpointStore
from prism_core.testing import (
    CheckpointBatchConformance,
    CheckpointStampConformance,
    CheckpointStatusIndexConformance,
    CheckpointStoreConformance,
    LeaseRenewalConformance,
    SessionStoreConformance,
    SharedCommitConformance,
)
from prism_store_sql import create_sql_checkpoint_store, create_sql_session_store, open_sql_stores

from .conftest import PostgresServer, Target, aiosqlite_url


@pytest.fixture(params=["asyncio", "trio"])
def both_backends(request: pytest.FixtureRequest) -> str:
    """The thread-driven SQLite stores run on asyncio and on trio."""
    return str(request.param)


class TestSqliteCheckpointStore(CheckpointStoreConformance):
    """The checkpoint store on a SQLite file (thread-driven), on asyncio and trio."""

    @pytest.fixture
    def anyio_backend(self, both_backends: str) -> str:
        """Both anyio backends."""
        return both_backends

    @pytest.fixture
    async def checkpoint_store(self, sqlite_target: Target) -> AsyncIterator[CheckpointStore]:
        """A store on this test's own SQLite file."""
        async with create_sql_checkpoint_store(sqlite_target.url) as store:
            yield store

    @pytest.fixture
    def checkpoint_store_factory(self, sqlite_target: Target) -> Callable[[], CheckpointStore]:
        """Another store (its own connection) on the same SQLite file."""
        return lambda: create_sql_checkpoint_store(sqlite_target.url)


class TestPostgresCheckpointStore(CheckpointStoreConformance):
    """The checkpoint store on PostgreSQL (this session's table prefix)."""

    @pytest.fixture
    async def checkpoint_store(
        self, postgres_server: PostgresServer
    ) -> AsyncIterator[CheckpointStore]:
        """A store on the session's tables; every suite test uses its own namespace."""
        target = postgres_server.shared()
        async with create_sql_checkpoint_store(target.url, table_prefix=target.prefix) as store:
            yield store

    @pytest.fixture
    def checkpoint_store_factory(
        self, postgres_server: PostgresServer
    ) -> Callable[[], CheckpointStore]:
        """Another store (its own engine and pool) on the same tables."""
        target = postgres_server.shared()
        return lambda: create_sql_checkpoint_store(target.url, table_prefix=target.prefix)


class TestSqliteSessionStore(SessionStoreConformance):
    """The session store on a SQLite file (thread-driven), on asyncio and trio."""

    @pytest.fixture
    def anyio_backend(self, both_backends: str) -> str:
        """Both anyio backends."""
        return both_backends

    @pytest.fixture
    async def session_store(self, sqlite_target: Target) -> AsyncIterator[SessionStore]:
        """A store on this test's own SQLite file."""
        async with create_sql_session_store(sqlite_target.url) as store:
            yield store

    @pytest.fixture
    def session_store_factory(self, sqlite_target: Target) -> Callable[[], SessionStore]:
        """Another store (its own engine and pool) on the same SQLite file."""
        return lambda: create_sql_session_store(sqlite_target.url)


class TestPostgresSessionStore(SessionStoreConformance):
    """The session store on PostgreSQL (this session's table prefix)."""

    @pytest.fixture
    async def session_store(self, postgres_server: PostgresServer) -> AsyncIterator[SessionStore]:
        """A store on the session's tables; every suite test uses its own session ids."""
        target = postgres_server.shared()
        async with create_sql_session_store(target.url, table_prefix=target.prefix) as store:
            yield store

    @pytest.fixture
    def session_store_factory(self, postgres_server: PostgresServer) -> Callable[[], SessionStore]:
        """Another store (its own engine and pool) on the same tables."""
        target = postgres_server.shared()
        return lambda: create_sql_session_store(target.url, table_prefix=target.prefix)


class TestAiosqliteCheckpointStore(CheckpointStoreConformance):
    """The checkpoint store on a SQLite file through SQLAlchemy (``sqlite+aiosqlite``)."""

    @pytest.fixture
    async def checkpoint_store(self, sqlite_target: Target) -> AsyncIterator[CheckpointStore]:
        """A store on this test's own SQLite file, through an engine."""
        async with create_sql_checkpoint_store(aiosqlite_url(sqlite_target.url)) as store:
            yield store

    @pytest.fixture
    def checkpoint_store_factory(self, sqlite_target: Target) -> Callable[[], CheckpointStore]:
        """Another store (its own engine) on the same SQLite file."""
        return lambda: create_sql_checkpoint_store(aiosqlite_url(sqlite_target.url))


class TestAiosqliteSessionStore(SessionStoreConformance):
    """The session store on a SQLite file through SQLAlchemy (``sqlite+aiosqlite``)."""

    @pytest.fixture
    async def session_store(self, sqlite_target: Target) -> AsyncIterator[SessionStore]:
        """A store on this test's own SQLite file, through an engine."""
        async with create_sql_session_store(aiosqlite_url(sqlite_target.url)) as store:
            yield store

    @pytest.fixture
    def session_store_factory(self, sqlite_target: Target) -> Callable[[], SessionStore]:
        """Another store (its own engine) on the same SQLite file."""
        return lambda: create_sql_session_store(aiosqlite_url(sqlite_target.url))


class TestSqliteSharedCommit(SharedCommitConformance):
    """Shared commits on one SQLite connection, on asyncio and trio."""

    @pytest.fixture
    def anyio_backend(self, both_backends: str) -> str:
        """Both anyio backends."""
        return both_backends

    @pytest.fixture
    async def shared_stores(
        self, sqlite_target: Target
    ) -> AsyncIterator[tuple[CheckpointStore, SessionStore]]:
        """Both stores on one connection to this test's SQLite file."""
        async with open_sql_stores(sqlite_target.url) as stores:
            yield stores.checkpoints, stores.sessions


class TestAiosqliteSharedCommit(SharedCommitConformance):
    """Shared commits on one SQLAlchemy engine over a SQLite file."""

    @pytest.fixture
    async def shared_stores(
        self, sqlite_target: Target
    ) -> AsyncIterator[tuple[CheckpointStore, SessionStore]]:
        """Both stores on one engine."""
        async with open_sql_stores(aiosqlite_url(sqlite_target.url)) as stores:
            yield stores.checkpoints, stores.sessions


class TestPostgresSharedCommit(SharedCommitConformance):
    """Shared commits on one SQLAlchemy engine over PostgreSQL."""

    @pytest.fixture
    async def shared_stores(
        self, postgres_server: PostgresServer
    ) -> AsyncIterator[tuple[CheckpointStore, SessionStore]]:
        """Both stores on one engine, on the session's tables."""
        target = postgres_server.shared()
        async with open_sql_stores(target.url, table_prefix=target.prefix) as stores:
            yield stores.checkpoints, stores.sessions


class TestSqliteStatusIndex(CheckpointStatusIndexConformance):
    """The status index on a SQLite file (thread-driven), on asyncio and trio."""

    @pytest.fixture
    def anyio_backend(self, both_backends: str) -> str:
        """Both anyio backends."""
        return both_backends

    @pytest.fixture
    async def checkpoint_store(self, sqlite_target: Target) -> AsyncIterator[CheckpointStore]:
        """A store on this test's own SQLite file."""
        async with create_sql_checkpoint_store(sqlite_target.url) as store:
            yield store


class TestAiosqliteStatusIndex(CheckpointStatusIndexConformance):
    """The status index on a SQLite file through SQLAlchemy (``sqlite+aiosqlite``)."""

    @pytest.fixture
    async def checkpoint_store(self, sqlite_target: Target) -> AsyncIterator[CheckpointStore]:
        """A store on this test's own SQLite file, through an engine."""
        async with create_sql_checkpoint_store(aiosqlite_url(sqlite_target.url)) as store:
            yield store


class TestPostgresStatusIndex(CheckpointStatusIndexConformance):
    """The status index on PostgreSQL (this session's table prefix)."""

    @pytest.fixture
    async def checkpoint_store(
        self, postgres_server: PostgresServer
    ) -> AsyncIterator[CheckpointStore]:
        """A store on the session's tables; every suite test uses its own namespace."""
        target = postgres_server.shared()
        async with create_sql_checkpoint_store(target.url, table_prefix=target.prefix) as store:
            yield store


class TestSqliteCheckpointBatch(CheckpointBatchConformance):
    """Several saves in one commit on a SQLite file (thread-driven), on asyncio and trio."""

    @pytest.fixture
    def anyio_backend(self, both_backends: str) -> str:
        """Both anyio backends."""
        return both_backends

    @pytest.fixture
    async def checkpoint_store(self, sqlite_target: Target) -> AsyncIterator[CheckpointStore]:
        """A store on this test's own SQLite file."""
        async with create_sql_checkpoint_store(sqlite_target.url) as store:
            yield store


class TestAiosqliteCheckpointBatch(CheckpointBatchConformance):
    """Several saves in one commit on a SQLite file through SQLAlchemy."""

    @pytest.fixture
    async def checkpoint_store(self, sqlite_target: Target) -> AsyncIterator[CheckpointStore]:
        """A store on this test's own SQLite file, through an engine."""
        async with create_sql_checkpoint_store(aiosqlite_url(sqlite_target.url)) as store:
            yield store


class TestPostgresCheckpointBatch(CheckpointBatchConformance):
    """Several saves in one commit on PostgreSQL (this session's table prefix)."""

    @pytest.fixture
    async def checkpoint_store(
        self, postgres_server: PostgresServer
    ) -> AsyncIterator[CheckpointStore]:
        """A store on the session's tables; every suite test uses its own namespace."""
        target = postgres_server.shared()
        async with create_sql_checkpoint_store(target.url, table_prefix=target.prefix) as store:
            yield store


class TestSqliteLeaseRenewal(LeaseRenewalConformance):
    """In-place lease renewal on a SQLite file (thread-driven), on asyncio and trio."""

    @pytest.fixture
    def anyio_backend(self, both_backends: str) -> str:
        """Both anyio backends."""
        return both_backends

    @pytest.fixture
    async def checkpoint_store(self, sqlite_target: Target) -> AsyncIterator[CheckpointStore]:
        """A store on this test's own SQLite file."""
        async with create_sql_checkpoint_store(sqlite_target.url) as store:
            yield store


class TestSqliteStamp(CheckpointStampConformance):
    """The stamp read on a SQLite file (thread-driven), on asyncio and trio."""

    @pytest.fixture
    def anyio_backend(self, both_backends: str) -> str:
        """Both anyio backends."""
        return both_backends

    @pytest.fixture
    async def checkpoint_store(self, sqlite_target: Target) -> AsyncIterator[CheckpointStore]:
        """A store on this test's own SQLite file."""
        async with create_sql_checkpoint_store(sqlite_target.url) as store:
            yield store


class TestAiosqliteLeaseRenewal(LeaseRenewalConformance):
    """In-place lease renewal on a SQLite file through SQLAlchemy (``sqlite+aiosqlite``)."""

    @pytest.fixture
    async def checkpoint_store(self, sqlite_target: Target) -> AsyncIterator[CheckpointStore]:
        """A store on this test's own SQLite file, through an engine."""
        async with create_sql_checkpoint_store(aiosqlite_url(sqlite_target.url)) as store:
            yield store


class TestPostgresLeaseRenewal(LeaseRenewalConformance):
    """In-place lease renewal on PostgreSQL (this session's table prefix)."""

    @pytest.fixture
    async def checkpoint_store(
        self, postgres_server: PostgresServer
    ) -> AsyncIterator[CheckpointStore]:
        """A store on the session's tables; every suite test uses its own namespace."""
        target = postgres_server.shared()
        async with create_sql_checkpoint_store(target.url, table_prefix=target.prefix) as store:
            yield store
