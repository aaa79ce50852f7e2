"""Store call timeouts and the transient/permanent classification of SQL failures."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import exc

from prism_core import CheckpointStoreError, CheckpointStoreUnavailableError, create_session_entry
from prism_store_sql import SqlStoreConfigError, create_sql_checkpoint_store, open_sql_stores
from prism_store_sql._engine import BUSY_TIMEOUT_MS, is_transient, translate_errors

from .conftest import PostgresServer


class _Sqlstate(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(f"sqlstate {sqlstate}")
        self.sqlstate = sqlstate


def test_timeout_ms_must_be_a_positive_integer() -> None:
    """0, negative, boolean and float timeouts are configuration errors."""
    for bad in (0, -5, True, 1.5):
        with pytest.raises(SqlStoreConfigError):
            create_sql_checkpoint_store("sqlite:///x.db", timeout_ms=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (exc.OperationalError("UPDATE", {}, _Sqlstate("57P01")), True),
        (exc.OperationalError("UPDATE", {}, _Sqlstate("08006")), True),
        (exc.DBAPIError("UPDATE", {}, _Sqlstate("57014")), True),
        (exc.DBAPIError("UPDATE", {}, _Sqlstate("55P03")), True),
        (exc.OperationalError("UPDATE", {}, sqlite3.OperationalError("database is locked")), True),
        (exc.TimeoutError("QueuePool limit reached"), True),
        (exc.IntegrityError("INSERT", {}, _Sqlstate("23505")), False),
        (exc.ProgrammingError("SELECT", {}, _Sqlstate("42P01")), False),
        (exc.OperationalError("UPDATE", {}, sqlite3.OperationalError("no such table: x")), False),
    ],
)
def test_failures_are_classified(error: BaseException, transient: bool) -> None:
    """Connection failures, shutdowns, cancelled statements and lock timeouts are transient;
    constraint and schema errors are not, and translate_errors raises the matching type."""
    assert is_transient(error) is transient
    with pytest.raises(CheckpointStoreError) as info, translate_errors("save a checkpoint"):
        raise error
    assert isinstance(info.value, CheckpointStoreUnavailableError) is transient


@pytest.mark.anyio
async def test_postgres_sessions_carry_the_store_timeouts(postgres_server: PostgresServer) -> None:
    """A PostgreSQL store created from a URL sets statement and lock timeouts on its
    connections; a statement over the timeout is a transient failure."""
    postgres_target = postgres_server.fresh()
    store = create_sql_checkpoint_store(
        postgres_target.url, table_prefix=postgres_target.prefix, timeout_ms=300
    )
    async with store:
        async with store.engine.connect() as connection:
            statement = (await connection.execute(sa.text("SHOW statement_timeout"))).scalar()
            lock = (await connection.execute(sa.text("SHOW lock_timeout"))).scalar()
            assert (statement, lock) == ("300ms", "300ms")
            with pytest.raises(exc.DBAPIError) as info:
                await connection.execute(sa.text("SELECT pg_sleep(2)"))
        assert is_transient(info.value)


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.anyio
async def test_thread_driven_sqlite_lock_wait_is_transient(tmp_path: Path) -> None:
    """The thread-driven SQLite stores wait ``timeout_ms`` for another writer's lock (their
    busy timeout), then raise the transient error; the store works again once the lock is
    gone, and other failures stay permanent."""
    path = tmp_path / "runs.db"
    url = f"sqlite:///{path}"
    assert create_sql_checkpoint_store(url).database.busy_timeout_ms == BUSY_TIMEOUT_MS
    stores = open_sql_stores(url, timeout_ms=300)
    async with stores:
        checkpoints, sessions = stores
        assert checkpoints.database.busy_timeout_ms == 300
        await checkpoints.save("ns", "k", {"n": 1}, version=1, expected_version=0)
        holder = sqlite3.connect(path, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")
            started = time.monotonic()
            with pytest.raises(CheckpointStoreUnavailableError) as info:
                await checkpoints.save("ns", "k", {"n": 2}, version=2, expected_version=1)
            assert time.monotonic() - started >= 0.25  # waited out the busy timeout
            assert "database is locked" in str(info.value)
            with pytest.raises(CheckpointStoreUnavailableError):
                await sessions.append(create_session_entry(session_id="s", kind="label", label="x"))
            holder.execute("COMMIT")
        finally:
            holder.close()
        record = await checkpoints.save("ns", "k", {"n": 2}, version=2, expected_version=1)
        assert record.version == 2
    broken = tmp_path / "not-a-db.db"
    broken.write_bytes(b"this is not a database file" * 100)
    with pytest.raises(CheckpointStoreError) as permanent:
        async with create_sql_checkpoint_store(f"sqlite:///{broken}") as store:
            await store.load("ns", "k")
    assert not isinstance(permanent.value, CheckpointStoreUnavailableError)
