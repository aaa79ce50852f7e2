"""Store call timeouts and the transient/permanent classification of SQL failures."""

from __future__ import annotations

import sqlite3

import pytest
import sqlalchemy as sa
from sqlalchemy import exc

from prism_core import CheckpointStoreError, CheckpointStoreUnavailableError
from prism_store_sql import SqlStoreConfigError, create_sql_checkpoint_store
from prism_store_sql._engine import is_transient, translate_errors

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
