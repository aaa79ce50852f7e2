"""Run wake-ups of the SQL stores: the conformance suite on every backend, then what is
particular to each (stale sockets, long paths and permissions on SQLite files; lost and
pool-free connections on PostgreSQL)."""

from __future__ import annotations

import logging
import os
import socket
import stat
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from prism_core.stores import CheckpointStoreError
from prism_core.testing import RunWakeupsConformance
from prism_store_sql import create_sql_checkpoint_store
from prism_store_sql._engine import async_url
from prism_store_sql._file_wakeups import MAX_ADDRESS, socket_tag, wake_directory
from prism_store_sql._pg_wakeups import MAX_CHANNEL_BYTES, channel_name
from prism_store_sql._wakeups import _IN_MEMORY

from .conftest import PostgresServer, Target, aiosqlite_url

WOKEN_S = 60.0
OTHER_PREFIX = "other_"


def sockets(database: str, prefix: str) -> list[str]:
    """The socket files of the watches on ``database`` and ``prefix``."""
    try:
        names = os.listdir(wake_directory(database))
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n.startswith(socket_tag(prefix)))


def counting_sockets(database: str, prefix: str) -> Callable[[], Awaitable[int]]:
    """An ``open_watches`` counter of the socket files."""

    async def count() -> int:
        return len(sockets(database, prefix))

    return count


@pytest.fixture
def short_target() -> Iterator[Target]:
    """A SQLite file whose wake-up sockets fit a socket address (pytest's own temporary
    directories are too deep for that: the tests on them reach their sockets through the
    directory's descriptor)."""
    with tempfile.TemporaryDirectory(prefix="pw") as name:
        assert len(wake_directory(f"{name}/prism.db")) + 32 <= MAX_ADDRESS
        yield Target("sqlite", f"sqlite:///{name}/prism.db", "prism_")


@pytest.fixture(params=["asyncio", "trio"])
def both_backends(request: pytest.FixtureRequest) -> str:
    """The thread-driven SQLite stores run on asyncio and on trio."""
    return str(request.param)


class TestSqliteWakeups(RunWakeupsConformance):
    """A SQLite file through the thread-driven backend, on asyncio and trio."""

    @pytest.fixture
    def anyio_backend(self, both_backends: str) -> str:
        """Both anyio backends."""
        return both_backends

    @pytest.fixture
    async def wakeup_store(self, short_target: Target) -> AsyncIterator[Any]:
        """A store on this test's own SQLite file (a short path)."""
        async with create_sql_checkpoint_store(short_target.url) as store:
            yield store

    @pytest.fixture
    def wakeup_store_factory(self, short_target: Target) -> Callable[[], Any]:
        """Another store, on its own connection, on the same file."""
        return lambda: create_sql_checkpoint_store(short_target.url)

    @pytest.fixture
    def foreign_wakeup_store_factory(self, short_target: Target) -> Callable[[], Any]:
        """A store on the same file under another table prefix."""
        return lambda: create_sql_checkpoint_store(short_target.url, table_prefix=OTHER_PREFIX)

    @pytest.fixture
    def open_watches(self, short_target: Target) -> Callable[[], Awaitable[int]]:
        """The socket files of the file's default prefix."""
        return counting_sockets(short_target.url.removeprefix("sqlite:///"), "prism_")


class TestAiosqliteWakeups(RunWakeupsConformance):
    """A SQLite file through SQLAlchemy (``sqlite+aiosqlite``), woken by and waking the
    thread-driven stores on the same file."""

    @pytest.fixture
    async def wakeup_store(self, sqlite_target: Target) -> AsyncIterator[Any]:
        """A store on this test's own SQLite file, through an engine."""
        async with create_sql_checkpoint_store(aiosqlite_url(sqlite_target.url)) as store:
            yield store

    @pytest.fixture
    def wakeup_store_factory(self, sqlite_target: Target) -> Callable[[], Any]:
        """A thread-driven store on the same file: the two backends wake each other."""
        return lambda: create_sql_checkpoint_store(sqlite_target.url)

    @pytest.fixture
    def foreign_wakeup_store_factory(self, sqlite_target: Target) -> Callable[[], Any]:
        """A store on the same file under another table prefix."""
        url = aiosqlite_url(sqlite_target.url)
        return lambda: create_sql_checkpoint_store(url, table_prefix=OTHER_PREFIX)

    @pytest.fixture
    def open_watches(self, sqlite_target: Target) -> Callable[[], Awaitable[int]]:
        """The socket files of the file's default prefix."""
        return counting_sockets(sqlite_target.url.removeprefix("sqlite:///"), "prism_")


class TestInMemorySqliteWakeups(RunWakeupsConformance):
    """An in-memory SQLite database: the in-process form, one per connection."""

    @pytest.fixture
    def anyio_backend(self, both_backends: str) -> str:
        """Both anyio backends."""
        return both_backends

    @pytest.fixture
    async def wakeup_store(self) -> AsyncIterator[Any]:
        """A store on a new in-memory database."""
        async with create_sql_checkpoint_store("sqlite://") as store:
            yield store

    @pytest.fixture
    def wakeup_store_factory(self, wakeup_store: Any) -> Callable[[], Any]:
        """The same instance: another in-memory store is another database."""
        return lambda: wakeup_store

    @pytest.fixture
    def foreign_wakeup_store_factory(self) -> Callable[[], Any]:
        """A store on another in-memory database."""
        return lambda: create_sql_checkpoint_store("sqlite://", table_prefix=OTHER_PREFIX)

    @pytest.fixture
    def open_watches(self, wakeup_store: Any) -> Callable[[], Awaitable[int]]:
        """The watches of the database's in-process wake-ups."""

        async def count() -> int:
            local = _IN_MEMORY.get(wakeup_store.database, {}).get("prism_")
            return 0 if local is None else len(local._watches)

        return count


def listening(url: str, prefix: str) -> Callable[[], Awaitable[int]]:
    """An ``open_watches`` counter of the sessions listening on ``prefix``'s channel (the
    last statement of a listening connection is its ``LISTEN``)."""
    query = sa.text(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND query = :listen"
    )
    listen = f'LISTEN "{channel_name(prefix)}"'

    async def count() -> int:
        engine = create_async_engine(async_url(url))
        try:
            async with engine.connect() as connection:
                return int((await connection.execute(query, {"listen": listen})).scalar_one())
        finally:
            await engine.dispose()

    return count


class TestPostgresWakeups(RunWakeupsConformance):
    """PostgreSQL through asyncpg, each test on a prefix of its own (no table is needed)."""

    driver_url: Callable[[str], str] = staticmethod(lambda url: url)

    @pytest.fixture
    def pg_target(self, postgres_server: PostgresServer) -> Target:
        """A prefix no other test notifies."""
        target = postgres_server.fresh()
        return Target(target.backend, type(self).driver_url(target.url), target.prefix)

    @pytest.fixture
    async def wakeup_store(self, pg_target: Target) -> AsyncIterator[Any]:
        """A store on the test's prefix."""
        async with create_sql_checkpoint_store(pg_target.url, table_prefix=pg_target.prefix) as s:
            yield s

    @pytest.fixture
    def wakeup_store_factory(self, pg_target: Target) -> Callable[[], Any]:
        """Another store, with its own engine and pool, on the same prefix."""
        return lambda: create_sql_checkpoint_store(pg_target.url, table_prefix=pg_target.prefix)

    @pytest.fixture
    def foreign_wakeup_store_factory(self, pg_target: Target) -> Callable[[], Any]:
        """A store on the same database under another prefix."""
        prefix = pg_target.prefix + "o_"
        return lambda: create_sql_checkpoint_store(pg_target.url, table_prefix=prefix)

    @pytest.fixture
    def open_watches(self, pg_target: Target) -> Callable[[], Awaitable[int]]:
        """The sessions listening on the prefix's channel."""
        return listening(pg_target.url, pg_target.prefix)


class TestPostgresPsycopgWakeups(TestPostgresWakeups):
    """PostgreSQL through psycopg (``postgresql+psycopg``)."""

    driver_url = staticmethod(lambda url: url.replace("postgresql:", "postgresql+psycopg:", 1))


# -- SQLite files -------------------------------------------------------------------------


#: The tests below use the thread-driven SQLite stores: both anyio backends.
BOTH = pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])


@pytest.mark.anyio
@BOTH
async def test_a_socket_left_by_a_dead_process_is_removed(short_target: Target) -> None:
    """A socket file nobody reads any more (its process died) is removed by the next
    notification; the live watch beside it is woken."""
    database = short_target.url.removeprefix("sqlite:///")
    async with create_sql_checkpoint_store(short_target.url) as store:
        async with store.watch_runs() as watch:
            (live,) = sockets(database, "prism_")
            stale = Path(wake_directory(database)) / f"{socket_tag('prism_')}-{'0' * 16}.sock"
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as dead:
                dead.bind(str(stale))
            assert sockets(database, "prism_") == sorted([live, stale.name])
            await store.notify_runs()
            assert await watch.wait(WOKEN_S)
            assert sockets(database, "prism_") == [live]
        assert sockets(database, "prism_") == []


@pytest.mark.anyio
@BOTH
async def test_a_database_path_too_long_for_a_socket_address(tmp_path: Path) -> None:
    """A socket in a directory whose path is longer than a socket address may be is bound
    and addressed through the directory's descriptor."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    database = str(deep / "prism.db")
    assert len(wake_directory(database)) > MAX_ADDRESS
    url = f"sqlite:///{database}"
    async with (
        create_sql_checkpoint_store(url) as store,
        create_sql_checkpoint_store(url) as other,
        store.watch_runs() as watch,
    ):
        assert len(sockets(database, "prism_")) == 1
        await other.notify_runs()
        assert await watch.wait(WOKEN_S)
    assert sockets(database, "prism_") == []


@pytest.mark.anyio
@BOTH
async def test_sockets_take_the_database_files_permissions(sqlite_target: Target) -> None:
    """Whoever may write the database may wake its workers, nobody else: the directory and
    the sockets get the file's permission bits."""
    database = sqlite_target.url.removeprefix("sqlite:///")
    async with create_sql_checkpoint_store(sqlite_target.url) as store:
        await store.save("prism.test", "k", {"n": 1}, version=1)  # creates the file
        os.chmod(database, 0o640)
        async with store.watch_runs():
            directory = wake_directory(database)
            (name,) = sockets(database, "prism_")
            assert stat.S_IMODE(os.stat(directory).st_mode) == 0o750
            assert stat.S_IMODE(os.stat(Path(directory) / name).st_mode) == 0o640


@pytest.mark.anyio
@BOTH
async def test_a_watch_whose_socket_was_removed_binds_again(sqlite_target: Target) -> None:
    """Someone cleans the directory under an open watch: at its next timeout it binds a new
    socket and reports a wake-up (one may have been missed); later notifications reach it."""
    database = sqlite_target.url.removeprefix("sqlite:///")
    async with create_sql_checkpoint_store(sqlite_target.url) as store:
        async with store.watch_runs() as watch:
            (first,) = sockets(database, "prism_")
            os.unlink(Path(wake_directory(database)) / first)
            assert await watch.wait(0.2) is True
            (second,) = sockets(database, "prism_")
            assert second != first
            await store.notify_runs()
            assert await watch.wait(WOKEN_S)
        assert sockets(database, "prism_") == []


@pytest.mark.anyio
@BOTH
async def test_no_socket_directory_falls_back_to_this_process(
    sqlite_target: Target, caplog: pytest.LogCaptureFixture
) -> None:
    """Where no socket can be made beside the file (here a file is in the directory's way),
    a watch says so once and is still woken by the stores of its own process."""
    database = sqlite_target.url.removeprefix("sqlite:///")
    await anyio.Path(wake_directory(database)).write_text("in the way")
    caplog.set_level(logging.WARNING, logger="prism_store_sql")
    async with (
        create_sql_checkpoint_store(sqlite_target.url) as store,
        create_sql_checkpoint_store(sqlite_target.url) as other,
        store.watch_runs() as watch,
    ):
        assert "reaches it at its poll" in caplog.text
        await other.notify_runs()
        assert await watch.wait(WOKEN_S)
        assert await watch.wait(0.2) is False


@pytest.mark.anyio
@BOTH
async def test_a_closed_store_refuses(sqlite_target: Target) -> None:
    """A closed store neither notifies nor watches (its own calls' error)."""
    store = create_sql_checkpoint_store(sqlite_target.url)
    await store.aclose()
    with pytest.raises(CheckpointStoreError, match="closed"):
        await store.notify_runs()
    with pytest.raises(CheckpointStoreError, match="closed"):
        store.watch_runs()


# -- PostgreSQL ---------------------------------------------------------------------------


def test_channel_names_fit_an_identifier() -> None:
    """The channel is ``<prefix>wake``; a name PostgreSQL could not hold is hashed."""
    assert channel_name("prism_") == "prism_wake"
    assert len(channel_name("p" * 40).encode()) <= MAX_CHANNEL_BYTES
    long = channel_name("p" * 70)
    assert long.startswith("prism_wake_")
    assert len(long.encode()) <= MAX_CHANNEL_BYTES
    assert long != channel_name("p" * 71)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_watch_holds_no_pool_slot_and_listens_again_after_a_lost_connection(
    postgres_server: PostgresServer,
) -> None:
    """The watch's connection is off the store's pool; when the server ends it, the next
    wait listens on a new one and reports a wake-up, and notifications reach it again."""
    target = postgres_server.fresh()
    count = listening(target.url, target.prefix)
    async with (
        create_sql_checkpoint_store(target.url, table_prefix=target.prefix) as store,
        store.watch_runs() as watch,
    ):
        assert store.engine.pool.checkedout() == 0
        assert await count() == 1
        engine = create_async_engine(async_url(target.url))
        try:
            async with engine.connect() as connection:
                ended = await connection.execute(
                    sa.text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND query = :listen"
                    ),
                    {"listen": f'LISTEN "{channel_name(target.prefix)}"'},
                )
                assert ended.scalars().all() == [True]
        finally:
            await engine.dispose()
        with anyio.fail_after(WOKEN_S):
            while not await watch.wait(1.0):
                pass
        assert await count() == 1
        await store.notify_runs()
        assert await watch.wait(WOKEN_S)
