"""URLs and drivers, engine ownership, closing, typed connection failures and asyncio-only."""

from __future__ import annotations

import sqlite3
import sys
import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from prism_core.content import Message
from prism_core.records import (
    SessionConflictError,
    SessionEntryNotFoundError,
    SessionStore,
    create_session_entry,
)
from prism_core.stores import CheckpointStore, CheckpointStoreError, CheckpointStoreUnavailableError
from prism_store_sql import (
    SqlCheckpointStore,
    SqlSessionStore,
    SqlStoreConfigError,
    SqlStoreDriverError,
    SqlStoreMigrationError,
    create_sql_checkpoint_store,
    create_sql_session_store,
)
from prism_store_sql._engine import async_url, use_wal

from .conftest import PostgresServer, Target, aiosqlite_url


@pytest.mark.parametrize(
    ("url", "drivername"),
    [
        ("sqlite+aiosqlite:///run.db", "sqlite+aiosqlite"),
        ("postgresql://postgres@localhost/prism", "postgresql+asyncpg"),
        ("postgresql+asyncpg://postgres@localhost/prism", "postgresql+asyncpg"),
    ],
)
def test_plain_urls_select_the_async_driver(url: str, drivername: str) -> None:
    """Plain URLs get the default async driver; explicit async drivers are kept."""
    assert async_url(url).drivername == drivername
    store = create_sql_checkpoint_store(url)
    assert store.engine.url.drivername == drivername


@pytest.mark.parametrize("url", ["mysql://db/prism", "redis://localhost", "not a url"])
def test_other_urls_are_refused(url: str) -> None:
    """A URL of another database is a configuration error that names the accepted forms."""
    with pytest.raises(SqlStoreConfigError, match=r"sqlite:///path\.db") as info:
        create_sql_checkpoint_store(url)
    assert info.value.code == "ERR_PRISM_STORE_CONFIG"


@pytest.mark.parametrize(
    ("url", "suggested"),
    [
        ("sqlite+pysqlite:///run.db", "sqlite+aiosqlite://"),
        ("postgresql+psycopg2://postgres@localhost/prism", "postgresql+asyncpg://"),
    ],
)
def test_a_sync_driver_is_refused(url: str, suggested: str) -> None:
    """A sync driver is refused before any import; the error says which URL to use."""
    with pytest.raises(SqlStoreConfigError, match="not an async driver") as info:
        create_sql_session_store(url)
    assert suggested in str(info.value)
    assert not isinstance(info.value, SqlStoreDriverError)


def test_a_password_is_never_echoed() -> None:
    """Errors about a URL do not repeat its password."""
    with pytest.raises(SqlStoreConfigError) as info:
        create_sql_checkpoint_store("postgresql+nosuchdriver://app:s3cret@db/prism")
    assert "s3cret" not in str(info.value)


@pytest.mark.parametrize(
    ("url", "module", "hint"),
    [
        ("sqlite+aiosqlite:///run.db", "aiosqlite", "pip install 'prism-runtime[sql]'"),
        (
            "postgresql://postgres@localhost/prism",
            "asyncpg",
            "pip install 'prism-runtime[postgres]'",
        ),
        ("postgresql+psycopg://postgres@localhost/prism", "psycopg", "pip install psycopg"),
    ],
)
def test_a_missing_driver_names_what_to_install(
    monkeypatch: pytest.MonkeyPatch, url: str, module: str, hint: str
) -> None:
    """Without the driver package, the error says which extra to install."""
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(SqlStoreDriverError) as info:
        create_sql_checkpoint_store(url)
    assert info.value.code == "ERR_PRISM_STORE_DRIVER"
    assert hint in str(info.value)


def test_stores_satisfy_the_protocols(tmp_path: Path) -> None:
    """Both stores are runtime instances of the kernel protocols."""
    url = f"sqlite:///{tmp_path / 'p.db'}"
    assert isinstance(create_sql_checkpoint_store(url), CheckpointStore)
    assert isinstance(create_sql_session_store(url), SessionStore)


@pytest.mark.anyio
async def test_a_host_engine_outlives_the_stores(sqlite_target: Target) -> None:
    """Stores built on a host's engine leave it open and usable after ``aclose``."""
    engine = create_async_engine(async_url(sqlite_target.url))
    try:
        checkpoints = create_sql_checkpoint_store(engine)
        sessions = create_sql_session_store(engine)
        await checkpoints.save("ns", "k", 1, version=1)
        await sessions.append(create_session_entry(session_id="s", kind="label", label="x"))
        for store in (checkpoints, sessions, checkpoints, sessions):
            await store.aclose()
        async with engine.connect() as connection:
            count = await connection.scalar(sa.text("SELECT count(*) FROM prism_checkpoints"))
        assert count == 1
        again = create_sql_checkpoint_store(engine, create_schema=False)
        record = await again.load("ns", "k")
        assert record is not None
        await again.aclose()
    finally:
        await engine.dispose()


@pytest.mark.anyio
async def test_a_store_disposes_the_engine_it_created(sqlite_target: Target) -> None:
    """``aclose`` returns the store's own pooled connections; a second call is harmless."""
    store = create_sql_checkpoint_store(aiosqlite_url(sqlite_target.url))
    await store.save("ns", "k", 1, version=1)
    assert store.engine.pool.checkedin() >= 1  # type: ignore[attr-defined]
    await store.aclose()
    assert store.closed
    assert store.engine.pool.checkedin() == 0  # type: ignore[attr-defined]
    await store.aclose()
    with pytest.raises(CheckpointStoreError, match="closed"):
        await store.load("ns", "k")


@pytest.mark.anyio
async def test_sqlite_connections_use_wal_and_a_busy_timeout(sqlite_target: Target) -> None:
    """Engines created from a SQLite URL switch to WAL and wait 5 s for locks."""
    store = create_sql_checkpoint_store(aiosqlite_url(sqlite_target.url))
    async with store, store.engine.connect() as connection:
        mode = await connection.scalar(sa.text("PRAGMA journal_mode"))
        timeout = await connection.scalar(sa.text("PRAGMA busy_timeout"))
    assert (mode, timeout) == ("wal", 5000)


def test_the_wal_switch_retries_a_lock_lost_to_a_racing_connection() -> None:
    """Connections opening a fresh file together race to convert it to WAL; the loser is told
    "database is locked" at once (SQLite skips the busy handler there), so the switch retries
    until the busy timeout instead of failing the connection."""
    answers: list[Exception | None] = [
        sqlite3.OperationalError("database is locked"),
        sqlite3.OperationalError("database is locked"),
        None,
    ]
    pauses: list[float] = []

    def execute(sql: str) -> None:
        assert sql == "PRAGMA journal_mode=WAL"
        answer = answers.pop(0)
        if answer is not None:
            raise answer

    use_wal(execute, 5000, pauses.append)
    assert answers == []
    assert len(pauses) == 2


def test_the_wal_switch_gives_up_at_the_busy_timeout_and_never_retries_other_errors() -> None:
    """A lock held past the busy timeout, and any error that is not a lock, are raised."""
    tries: list[str] = []

    def locked(sql: str) -> None:
        tries.append(sql)
        raise sqlite3.OperationalError("database is locked")

    with pytest.raises(sqlite3.OperationalError, match="locked"):
        use_wal(locked, 30, lambda seconds: time.sleep(seconds))
    assert len(tries) >= 2

    def broken(sql: str) -> None:
        tries.append(sql)
        raise sqlite3.OperationalError("disk I/O error")

    tries.clear()
    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        use_wal(broken, 5000, lambda seconds: None)
    assert len(tries) == 1


@pytest.mark.anyio
async def test_unreachable_postgres_is_a_typed_store_error() -> None:
    """A refused connection surfaces as ``CheckpointStoreError`` from every operation: its
    transient subclass ``CheckpointStoreUnavailableError``."""
    url = "postgresql://postgres@127.0.0.1:1/test"
    async with create_sql_checkpoint_store(url) as checkpoints:
        with pytest.raises(CheckpointStoreError) as info:
            await checkpoints.save("ns", "k", 1, version=1)
        assert info.value.code == "ERR_PRISM_STORE_UNAVAILABLE"
        assert isinstance(info.value, CheckpointStoreUnavailableError)
        assert isinstance(info.value.__cause__, OSError)
        with pytest.raises(CheckpointStoreError):
            await checkpoints.load("ns", "k")
    async with create_sql_session_store(url) as sessions:
        with pytest.raises(CheckpointStoreError):
            await sessions.append(create_session_entry(session_id="s", kind="label", label="x"))


@pytest.mark.anyio
async def test_unopenable_sqlite_file_is_a_typed_store_error(tmp_path: Path) -> None:
    """A SQLite path in a missing directory fails typed, naming the path, before connecting."""
    url = f"sqlite:///{tmp_path / 'missing' / 'dir' / 'run.db'}"
    async with create_sql_checkpoint_store(url) as store:
        with pytest.raises(SqlStoreMigrationError, match="does not exist") as info:
            await store.load("ns", "k")
    assert info.value.code == "ERR_PRISM_MIGRATION"
    assert str(tmp_path / "missing" / "dir") in str(info.value)
    assert not (tmp_path / "missing").exists()


@pytest.mark.anyio
async def test_a_lost_connection_fails_typed_writes_nothing_and_recovers(
    postgres_server: PostgresServer,
) -> None:
    """A killed server connection fails one call typed, leaves the record, then reconnects."""
    target = postgres_server.shared()
    app = f"prism-test-{uuid.uuid4().hex[:8]}"
    engine = create_async_engine(
        async_url(target.url), connect_args={"server_settings": {"application_name": app}}
    )
    admin = create_async_engine(async_url(target.url))
    ns = f"lost.{uuid.uuid4().hex}"
    try:
        async with create_sql_checkpoint_store(engine, table_prefix=target.prefix) as store:
            await store.save(ns, "k", "v1", version=1)
            async with admin.connect() as connection:
                killed = await connection.scalar(
                    sa.text(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE application_name = :app"
                    ),
                    {"app": app},
                )
            assert killed >= 1
            with pytest.raises(CheckpointStoreError):
                await store.save(ns, "k", "v2", version=2, expected_version=1)
            record = await store.load(ns, "k")
            assert record is not None
            assert (record.version, record.value) == (1, "v1")
            updated = await store.save(ns, "k", "v2", version=2, expected_version=1)
            assert updated.version == 2
    finally:
        await engine.dispose()
        await admin.dispose()


@pytest.mark.anyio
async def test_failed_appends_leave_the_head_where_it_was(sqlite_target: Target) -> None:
    """A refused append (duplicate id, foreign parent) rolls back its head move."""
    async with create_sql_session_store(sqlite_target.url) as store:
        root = await store.append(
            create_session_entry(session_id="s", kind="message", message=Message.user("hi"))
        )
        with pytest.raises(SessionConflictError, match="already exists"):
            await store.append(
                create_session_entry(session_id="s", kind="label", label="dup", id=root.id)
            )
        with pytest.raises(SessionEntryNotFoundError, match="is not in session"):
            await store.append(
                create_session_entry(session_id="s", kind="label", label="x", parent_id="nope")
            )
        child = create_session_entry(session_id="s", kind="label", label="ok", parent_id=root.id)
        assert await store.append(child, expected_leaf_id=root.id) == child
        assert await store.list("s") == [root, child]


@pytest.mark.parametrize("anyio_backend", ["trio"])
@pytest.mark.anyio
async def test_trio_gets_a_clear_error(sqlite_target: Target) -> None:
    """Under trio, a call on an engine-driven store fails with ``SqlStoreDriverError`` naming
    asyncio and the store that works under trio; closing works."""
    checkpoints: SqlCheckpointStore = create_sql_checkpoint_store(aiosqlite_url(sqlite_target.url))
    sessions: SqlSessionStore = create_sql_session_store(aiosqlite_url(sqlite_target.url))
    with pytest.raises(SqlStoreDriverError, match="asyncio") as info:
        await checkpoints.load("ns", "k")
    assert "sqlite:///" in str(info.value)
    with pytest.raises(SqlStoreDriverError, match="asyncio"):
        await sessions.list("s")
    await checkpoints.aclose()
    await sessions.aclose()
