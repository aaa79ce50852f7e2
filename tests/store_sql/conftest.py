"""Fixtures for the SQL store tests: SQLite files and an isolated PostgreSQL table prefix.

SQLAlchemy's async engine, aiosqlite and asyncpg are asyncio libraries, so these tests run on
anyio's asyncio backend unless they say otherwise; the thread-driven SQLite stores
(``sqlite:///``) also run their tests on trio, and one test checks that trio gets a clear error
from the engine-driven stores. PostgreSQL tests write under a table prefix unique to this test
session (``prism_t<hex>_``) and drop every table with that prefix when the session ends.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from unittest import mock

import attrs
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from prism_store_sql._engine import async_url
from tests.conftest import POSTGRES_URL, service_unavailable

T = TypeVar("T")


@pytest.fixture
def anyio_backend() -> str:
    """The engine-driven SQL stores are asyncio-only (SQLAlchemy's async engine and its
    drivers are); tests of the thread-driven SQLite stores override this with both."""
    return "asyncio"


def aiosqlite_url(url: str) -> str:
    """A plain ``sqlite:`` URL as the explicit SQLAlchemy ``sqlite+aiosqlite:`` URL."""
    return url.replace("sqlite:", "sqlite+aiosqlite:", 1) if url.startswith("sqlite:") else url


def run_in_fresh_loop(make: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine on a private event loop in a worker thread (for session fixtures)."""

    async def main() -> T:
        return await make()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, main()).result()


@contextmanager
def _sent_to_asyncpg(engine: AsyncEngine, record: Callable[[str], object]) -> Iterator[None]:
    """``record`` the SQL of each statement the stores send straight to asyncpg (on an asyncpg
    engine their hot path skips SQLAlchemy's execution layer, and so its events)."""
    if engine.dialect.driver != "asyncpg":
        yield
        return
    import asyncpg  # type: ignore[import-untyped]

    def recording(name: str) -> Any:
        original = getattr(asyncpg.Connection, name)

        async def call(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
            record(query)
            return await original(self, query, *args, **kwargs)

        return mock.patch.object(asyncpg.Connection, name, call)

    with recording("fetchrow"), recording("fetch"):
        yield


@contextmanager
def sent_statements(engine: AsyncEngine) -> Iterator[list[str]]:
    """The SQL text of every statement sent on ``engine``'s connections while the block runs,
    through SQLAlchemy (its cursor events) or straight to asyncpg."""
    statements: list[str] = []

    def record(*args: Any) -> None:
        statements.append(str(args[2]))

    sa.event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        with _sent_to_asyncpg(engine, statements.append):
            yield statements
    finally:
        sa.event.remove(engine.sync_engine, "before_cursor_execute", record)


@contextmanager
def counted_commits(engine: AsyncEngine) -> Iterator[Callable[[], int]]:
    """A reader of the commits on ``engine``'s connections while the block runs: SQLAlchemy's
    commit events, plus each write sent straight to asyncpg (one statement in autocommit is
    its own commit; a read starts with ``SELECT``)."""
    count = [0]

    def committed(*_: Any) -> None:
        count[0] += 1

    def sent(query: str) -> None:
        if not query.lstrip().upper().startswith("SELECT"):
            count[0] += 1

    sa.event.listen(engine.sync_engine, "commit", committed)
    try:
        with _sent_to_asyncpg(engine, sent):
            yield lambda: count[0]
    finally:
        sa.event.remove(engine.sync_engine, "commit", committed)


@attrs.frozen
class Target:
    """A database URL and a table prefix that a test may use."""

    backend: str
    url: str
    prefix: str


class PostgresServer:
    """The test server plus this session's table prefix; hands out sub-prefixes."""

    def __init__(self, url: str, prefix: str) -> None:
        self.url = url
        self.prefix = prefix
        self._counter = itertools.count(1)

    def shared(self) -> Target:
        """The session-wide prefix (for tests that use their own namespaces or sessions)."""
        return Target("postgresql", self.url, self.prefix)

    def fresh(self) -> Target:
        """A prefix no other test uses (for tests that need empty or missing tables)."""
        return Target("postgresql", self.url, f"{self.prefix}{next(self._counter)}_")


async def _ping(url: str) -> None:
    engine = create_async_engine(async_url(url))
    try:
        async with engine.connect() as connection:
            await connection.execute(sa.text("SELECT 1"))
    finally:
        await engine.dispose()


async def _drop_prefix(url: str, prefix: str) -> None:
    engine = create_async_engine(async_url(url))
    try:
        async with engine.begin() as connection:
            names = (
                await connection.execute(
                    sa.text(
                        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                        "AND starts_with(tablename, :prefix)"
                    ),
                    {"prefix": prefix},
                )
            ).scalars()
            for name in list(names):
                await connection.execute(sa.text(f'DROP TABLE IF EXISTS "{name}" CASCADE'))
    finally:
        await engine.dispose()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The PostgreSQL test server; skips (or fails when required) if it is unreachable."""
    try:
        run_in_fresh_loop(lambda: _ping(POSTGRES_URL))
    except Exception as exc:
        service_unavailable("PostgreSQL", f"{POSTGRES_URL}: {type(exc).__name__}: {exc}")
    server = PostgresServer(POSTGRES_URL, f"prism_t{uuid.uuid4().hex[:10]}_")
    yield server
    run_in_fresh_loop(lambda: _drop_prefix(server.url, server.prefix))


@pytest.fixture
def sqlite_target(tmp_path: Path) -> Target:
    """A SQLite file of this test's own, with the default prefix."""
    return Target("sqlite", f"sqlite:///{tmp_path / 'prism.db'}", "prism_")


@pytest.fixture(params=["sqlite", "aiosqlite", "postgresql"])
def fresh_target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    """An empty database location on each backend (tables not created yet): SQLite through
    the thread-driven backend (``sqlite:///``) and through SQLAlchemy (``+aiosqlite``)."""
    if request.param == "sqlite":
        return Target("sqlite", f"sqlite:///{tmp_path / 'prism.db'}", "prism_")
    if request.param == "aiosqlite":
        return Target("sqlite", f"sqlite+aiosqlite:///{tmp_path / 'prism.db'}", "prism_")
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.fresh()
