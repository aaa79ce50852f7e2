"""Versioned migrations: missing schema errors, idempotent and concurrent migrate, the CLI."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

import anyio
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from prism_store_sql import (
    SCHEMA_VERSION,
    SqlStoreConfigError,
    SqlStoreSchemaError,
    create_sql_checkpoint_store,
    create_sql_session_store,
    migrate,
    open_sql_stores,
    read_schema_version,
)
from prism_store_sql._engine import async_url
from prism_store_sql._migrations import migrate_command
from prism_store_sql._schema import build_tables

from .conftest import PostgresServer, Target, sent_statements


async def _version_rows(target: Target) -> list[tuple[int, str]]:
    table = build_tables(target.prefix).schema_version
    engine = create_async_engine(async_url(target.url))
    try:
        async with engine.connect() as connection:
            result = await connection.execute(
                sa.select(table.c.version, table.c.description).order_by(table.c.version)
            )
            return [(row.version, row.description) for row in result]
    finally:
        await engine.dispose()


async def _run_module(*args: str) -> anyio.abc.Process:
    """Run ``python -m prism_store_sql ARGS`` and return the finished process."""
    return await anyio.run_process([sys.executable, "-m", "prism_store_sql", *args], check=False)


@pytest.mark.anyio
async def test_missing_schema_names_the_command_that_fixes_it(fresh_target: Target) -> None:
    """With ``create_schema=False`` a missing schema raises; the named command fixes it."""
    store = create_sql_checkpoint_store(
        fresh_target.url, table_prefix=fresh_target.prefix, create_schema=False
    )
    async with store:
        with pytest.raises(SqlStoreSchemaError) as info:
            await store.load("ns", "k")
        assert info.value.code == "ERR_PRISM_STORE_SCHEMA"
        message = str(info.value)
        command = next(
            line.strip() for line in message.splitlines() if "-m prism_store_sql migrate" in line
        )
        shown = fresh_target.url
        expected = make_url(shown) if shown.startswith("sqlite:") else async_url(shown)
        assert command == migrate_command(expected, fresh_target.prefix)
        assert "create_schema=True" in message
        argv = shlex.split(command)
        assert argv[:3] == ["python", "-m", "prism_store_sql"]
        done = await anyio.run_process([sys.executable, *argv[1:]], check=False)
        assert done.returncode == 0, done.stderr.decode()
        assert f"schema version {SCHEMA_VERSION}" in done.stdout.decode()
        # The failed check is not remembered: the same store works once the schema exists.
        assert await store.load("ns", "k") is None
        saved = await store.save("ns", "k", {"ok": True}, version=1)
        assert saved.version == 1


@pytest.mark.anyio
async def test_missing_schema_fails_the_session_store_too(fresh_target: Target) -> None:
    """The session store refuses a missing schema the same way and writes nothing."""
    async with create_sql_session_store(
        fresh_target.url, table_prefix=fresh_target.prefix, create_schema=False
    ) as store:
        with pytest.raises(SqlStoreSchemaError, match="prism_store_sql migrate"):
            await store.list("s1")
    assert await read_schema_version(fresh_target.url, table_prefix=fresh_target.prefix) == 0


def test_migrate_command_masks_passwords_and_names_the_prefix() -> None:
    """The suggested command never shows a password and carries a non-default prefix."""
    url = async_url("postgresql://app:s3cret@db.example/prism")
    command = migrate_command(url, "tenant_a_")
    assert "s3cret" not in command
    assert command == (
        "python -m prism_store_sql migrate "
        "'postgresql+asyncpg://app:***@db.example/prism' --table-prefix tenant_a_"
    )
    assert "--table-prefix" not in migrate_command(url, "prism_")


@pytest.mark.anyio
async def test_migrate_is_idempotent_and_keeps_data(fresh_target: Target) -> None:
    """Migrating twice records each version once and leaves stored records alone."""
    assert await migrate(fresh_target.url, table_prefix=fresh_target.prefix) == SCHEMA_VERSION
    async with create_sql_checkpoint_store(
        fresh_target.url, table_prefix=fresh_target.prefix, create_schema=False
    ) as store:
        await store.save("ns", "k", "kept", version=1)
        assert await migrate(fresh_target.url, table_prefix=fresh_target.prefix) == SCHEMA_VERSION
        record = await store.load("ns", "k")
        assert record is not None
        assert record.value == "kept"
    rows = await _version_rows(fresh_target)
    assert [version for version, _ in rows] == list(range(1, SCHEMA_VERSION + 1))
    assert (
        await read_schema_version(fresh_target.url, table_prefix=fresh_target.prefix)
        == SCHEMA_VERSION
    )


@pytest.mark.anyio
async def test_concurrent_migrations_apply_each_step_once(fresh_target: Target) -> None:
    """Eight engines migrating one empty database at once all succeed; each step runs once."""
    results: list[int] = []

    async def run() -> None:
        results.append(await migrate(fresh_target.url, table_prefix=fresh_target.prefix))

    async with anyio.create_task_group() as tg:
        for _ in range(8):
            tg.start_soon(run)
    assert results == [SCHEMA_VERSION] * 8
    assert len(await _version_rows(fresh_target)) == SCHEMA_VERSION


@pytest.mark.anyio
async def test_create_schema_migrates_on_first_use(fresh_target: Target) -> None:
    """The default ``create_schema=True`` creates the tables on the first call."""
    async with create_sql_session_store(
        fresh_target.url, table_prefix=fresh_target.prefix
    ) as store:
        assert await store.list("s1") == []
    assert (
        await read_schema_version(fresh_target.url, table_prefix=fresh_target.prefix)
        == SCHEMA_VERSION
    )


@pytest.mark.anyio
@pytest.mark.parametrize("create_schema", [True, False])
@pytest.mark.parametrize("backend", ["aiosqlite", "postgresql"])
async def test_a_migrated_schema_costs_one_version_read(
    backend: str, create_schema: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Once migrated, an engine store's first call checks the schema with one read of the
    version row: no table inspection, no migration lock."""
    if backend == "postgresql":
        server: PostgresServer = request.getfixturevalue("postgres_server")
        fresh_target = server.fresh()
    else:
        fresh_target = Target("sqlite", f"sqlite+aiosqlite:///{tmp_path / 'p.db'}", "prism_")
    await migrate(fresh_target.url, table_prefix=fresh_target.prefix)
    engine = create_async_engine(async_url(fresh_target.url))
    statements: list[str] = []

    def record(*args: object) -> None:
        statements.append(str(args[2]))

    sa.event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        store = create_sql_session_store(
            engine, table_prefix=fresh_target.prefix, create_schema=create_schema
        )
        async with store:
            assert await store.list("s1") == []
    finally:
        await engine.dispose()
    schema = [text for text in statements if "schema_version" in text or "pg_" in text]
    assert len(schema) == 1, statements
    assert "max(" in schema[0].lower()
    assert len(statements) == 2, statements


@pytest.mark.anyio
async def test_the_schema_check_on_postgresql_opens_no_transaction(
    postgres_server: PostgresServer,
) -> None:
    """On PostgreSQL the version read runs in autocommit: the server sees the one ``SELECT``
    and no ``BEGIN`` or ``ROLLBACK`` around it (two round trips spared on every new engine)."""
    target = postgres_server.fresh()
    await migrate(target.url, table_prefix=target.prefix)
    sent: list[str] = []
    async with create_sql_checkpoint_store(target.url, table_prefix=target.prefix) as store:

        def on_connect(dbapi_connection: object, _record: object) -> None:
            driver = dbapi_connection.driver_connection  # type: ignore[attr-defined]
            driver.add_query_logger(lambda logged: sent.append(logged.query))

        # Added before the first call: the logger sees the transaction commands asyncpg
        # sends after SQLAlchemy's own first-connect queries; the cursor event sees the
        # version read (a prepared statement, which the logger does not see).
        sa.event.listen(store.engine.sync_engine, "connect", on_connect)
        with sent_statements(store.engine) as statements:
            assert await store.load("ns", "k") is None
    heads = [query.split(None, 1)[0].rstrip(";").upper() for query in sent]
    assert {"BEGIN", "ROLLBACK"}.isdisjoint(heads), sent
    assert sum("schema_version" in text for text in statements) == 1, statements


@pytest.mark.anyio
@pytest.mark.parametrize("backend", ["aiosqlite", "postgresql"])
@pytest.mark.parametrize("pairing", ["open_sql_stores", "sharing"])
async def test_stores_on_one_engine_check_the_schema_once(
    backend: str, pairing: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The two stores of ``open_sql_stores`` (or a session store made on a checkpoint store)
    share the engine and the tables, so the first call of the second store reads no schema
    version; a missing schema is still created once, by whichever store comes first."""
    if backend == "postgresql":
        server: PostgresServer = request.getfixturevalue("postgres_server")
        target = server.fresh()
    else:
        target = Target("sqlite", f"sqlite+aiosqlite:///{tmp_path / 'p.db'}", "prism_")
    if pairing == "open_sql_stores":
        checkpoints, sessions = open_sql_stores(target.url, table_prefix=target.prefix)
    else:
        checkpoints = create_sql_checkpoint_store(target.url, table_prefix=target.prefix)
        sessions = create_sql_session_store(checkpoints)
    async with checkpoints, sessions:
        assert await sessions.list("s1") == []  # the first call: creates the tables
        with sent_statements(checkpoints.engine) as statements:
            assert await checkpoints.load("ns", "k") is None
            assert await sessions.list("s2") == []
        assert [text for text in statements if "schema_version" in text] == []
        assert len(statements) == 2, statements
    assert await read_schema_version(target.url, table_prefix=target.prefix) == SCHEMA_VERSION


@pytest.mark.anyio
async def test_a_newer_schema_is_refused(fresh_target: Target) -> None:
    """A database migrated by a newer release is refused with an upgrade hint."""
    await migrate(fresh_target.url, table_prefix=fresh_target.prefix)
    table = build_tables(fresh_target.prefix).schema_version
    engine = create_async_engine(async_url(fresh_target.url))
    try:
        async with engine.begin() as connection:
            await connection.execute(
                sa.insert(table).values(
                    version=SCHEMA_VERSION + 1, description="future", applied_at=time.time()
                )
            )
    finally:
        await engine.dispose()
    for create_schema in (True, False):
        async with create_sql_checkpoint_store(
            fresh_target.url, table_prefix=fresh_target.prefix, create_schema=create_schema
        ) as store:
            with pytest.raises(SqlStoreSchemaError, match="pip install --upgrade"):
                await store.load("ns", "k")
    with pytest.raises(SqlStoreSchemaError, match="newer"):
        await migrate(fresh_target.url, table_prefix=fresh_target.prefix)


@pytest.mark.anyio
async def test_foreign_tables_are_reported_not_adopted(sqlite_target: Target) -> None:
    """Tables with the store's names but no recorded version make migrate fail clearly."""
    engine = create_async_engine(async_url(sqlite_target.url))
    try:
        async with engine.begin() as connection:
            await connection.execute(sa.text("CREATE TABLE prism_checkpoints (x INTEGER)"))
        with pytest.raises(SqlStoreSchemaError, match="table_prefix"):
            await migrate(engine)
        assert await read_schema_version(engine) == 0
    finally:
        await engine.dispose()


@pytest.mark.anyio
async def test_module_command_migrates_and_reports_status(fresh_target: Target) -> None:
    """``python -m prism_store_sql migrate`` is idempotent; ``status`` reports the version."""
    prefix_args = ["--table-prefix", fresh_target.prefix]
    before = await _run_module("status", fresh_target.url, *prefix_args)
    if fresh_target.backend == "sqlite":
        assert before.returncode == 3
        assert "no database" in before.stdout.decode()
    else:
        assert before.returncode == 2
        assert "schema version 0" in before.stdout.decode()
    for _ in range(2):
        done = await _run_module("migrate", fresh_target.url, *prefix_args)
        assert done.returncode == 0, done.stderr.decode()
        assert f"schema version {SCHEMA_VERSION}" in done.stdout.decode()
    after = await _run_module("status", fresh_target.url, *prefix_args)
    assert after.returncode == 0
    assert "up to date" in after.stdout.decode()


@pytest.mark.anyio
async def test_module_command_reports_errors_without_a_traceback() -> None:
    """A bad URL exits 1 with the error code and message, not a traceback."""
    done = await _run_module("migrate", "mysql://somewhere/db")
    assert done.returncode == 1
    err = done.stderr.decode()
    assert "ERR_PRISM_STORE_CONFIG" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("prefix", ["", "1abc", "bad-prefix", "a b", "x" * 41, "p;drop"])
def test_bad_table_prefixes_are_refused(prefix: str) -> None:
    """A prefix that is not a plain identifier is refused before anything connects."""
    with pytest.raises(SqlStoreConfigError, match="table_prefix"):
        create_sql_checkpoint_store("sqlite://", table_prefix=prefix)
