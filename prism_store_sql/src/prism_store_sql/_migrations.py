"""Versioned schema migrations, recorded in ``<prefix>schema_version``.

A small runner instead of Alembic: the schema is four tables, the store distribution keeps its
dependencies to prism-runtime-core and the driver, and the same steps must run from the stores'
``create_schema=True`` path, from :func:`~prism_store_sql.migrate` (in :mod:`._open`, which
picks the backend) and from ``python -m prism_store_sql migrate``, without an ``alembic.ini``
or a migrations directory on the host's side. This module holds the steps and the version
checks only.

Each step runs inside one transaction that holds a database-wide lock for the prefix
(``BEGIN IMMEDIATE`` on SQLite, ``pg_advisory_xact_lock`` on PostgreSQL), so concurrent
migrators — several workers starting at once — apply every step exactly once, and a failed
step leaves the previous version intact. Both backends run DDL transactionally.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import time
from collections.abc import Callable
from pathlib import Path

import attrs
import sqlalchemy as sa
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from prism_core.stores import echo, indexed_status

from ._engine import (
    async_url,
    public_url,
    sqlite_file,
    translate_errors,
)
from ._errors import SqlStoreMigrationError, SqlStoreSchemaError
from ._schema import DEFAULT_TABLE_PREFIX, Tables, name_type

__all__ = (
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Migration",
    "apply_migrations",
    "check_sqlite_directory",
    "check_sqlite_file_directory",
    "migrate_command",
    "missing_database",
    "migrate_connection",
    "read_version",
    "require_schema",
    "schema_missing_error",
    "too_new_error",
)


@attrs.frozen
class Migration:
    """One schema step: ``apply`` runs on a synchronous connection inside the lock."""

    version: int
    description: str
    apply: Callable[[sa.Connection, Tables], None]


def _checkpoints_v1(prefix: str) -> sa.Table:
    # The checkpoints table as version 1 created it (before the status column).
    table = sa.Table(
        f"{prefix}checkpoints",
        sa.MetaData(),
        sa.Column("namespace", name_type(), primary_key=True),
        sa.Column("key", name_type(), primary_key=True),
        sa.Column("owner", name_type(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("fencing_token", sa.BigInteger(), nullable=True),
        sa.Column("category", sa.Text(), nullable=True),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("metadata", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
    )
    sa.Index(f"{prefix}checkpoints_owner", table.c.owner, table.c.namespace, table.c.key)
    return table


def _create_v1(connection: sa.Connection, tables: Tables) -> None:
    # build_tables() describes the *current* schema; the checkpoints table changed in v2, so
    # a fresh database replays history from the version-1 definition.
    _checkpoints_v1(tables.prefix).create(connection)
    tables.session_entries.create(connection)
    tables.session_heads.create(connection)


#: Rows read and updated per round of the status backfill.
BACKFILL_BATCH = 500


def _stored_status(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        decoded = json.loads(value)
    except ValueError:
        return None  # a corrupt record stays corrupt, and unindexed
    return indexed_status(decoded)


def _add_status_v2(connection: sa.Connection, tables: Tables) -> None:
    table = tables.checkpoints
    quote = connection.dialect.identifier_preparer.quote
    connection.exec_driver_sql(f"ALTER TABLE {quote(table.name)} ADD COLUMN status TEXT")
    # Batches in key order, decoded in Python: the same rule as every save on both backends,
    # without JSON functions that differ between SQLite and PostgreSQL.
    select = (
        sa.select(table.c.namespace, table.c.key, table.c.value)
        .order_by(table.c.namespace, table.c.key)
        .limit(BACKFILL_BATCH)
    )
    update = (
        sa.update(table)
        .where(table.c.namespace == sa.bindparam("b_ns"), table.c.key == sa.bindparam("b_k"))
        .values(status=sa.bindparam("b_st"))
    )
    after: tuple[str, str] | None = None
    while True:
        statement = select
        if after is not None:
            statement = select.where(sa.tuple_(table.c.namespace, table.c.key) > sa.tuple_(*after))
        rows = connection.execute(statement).all()
        if not rows:
            break
        changes = [
            {"b_ns": row.namespace, "b_k": row.key, "b_st": status}
            for row in rows
            if (status := _stored_status(row.value)) is not None
        ]
        if changes:
            connection.execute(update, changes)
        after = (rows[-1].namespace, rows[-1].key)
    index = next(i for i in table.indexes if i.name == f"{tables.prefix}checkpoints_status")
    index.create(connection)


def _add_ledger_v3(connection: sa.Connection, tables: Tables) -> None:
    for table in tables.ledger_tables:
        table.create(connection)


#: Every step, in order. Append new steps; never edit a released one.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "checkpoints, session entries and session heads", _create_v1),
    Migration(2, "checkpoint status column and index", _add_status_v2),
    Migration(3, "the effect ledger: effects, their index terms, decisions", _add_ledger_v3),
)

#: The schema version this release reads and writes.
SCHEMA_VERSION = MIGRATIONS[-1].version


def migrate_command(url: URL, table_prefix: str) -> str:
    """The shell command that migrates ``url`` (password masked) for ``table_prefix``."""
    command = f"python -m prism_store_sql migrate {shlex.quote(public_url(url))}"
    if table_prefix != DEFAULT_TABLE_PREFIX:
        command += f" --table-prefix {shlex.quote(table_prefix)}"
    return command


def _lock_key(prefix: str) -> int:
    digest = hashlib.sha256(f"prism_store_sql:{prefix}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _lock(connection: sa.Connection, tables: Tables) -> None:
    if connection.dialect.name == "sqlite":
        # Takes the write lock now (waiting out the busy timeout), so the version read
        # below cannot go stale before the DDL.
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    else:
        # A migration may wait for another host's and run long DDL: the store's per-call
        # timeouts do not apply to it (SET LOCAL ends with the migration's transaction).
        connection.exec_driver_sql("SET LOCAL statement_timeout = 0")
        connection.exec_driver_sql("SET LOCAL lock_timeout = 0")
        connection.execute(sa.select(sa.func.pg_advisory_xact_lock(_lock_key(tables.prefix))))


def _recorded_version(connection: sa.Connection, tables: Tables) -> int:
    log = tables.schema_version
    value = connection.execute(sa.select(sa.func.max(log.c.version))).scalar()
    return int(value) if value is not None else 0


def too_new_error(url: URL, tables: Tables, found: int) -> SqlStoreSchemaError:
    """The error for a database whose schema is newer than this release."""
    return SqlStoreSchemaError(
        f"the SQL store schema (prefix {echo(tables.prefix)}) in {public_url(url)} is at version "
        f"{found}, newer than this release of prism-runtime-sql understands (version "
        f"{SCHEMA_VERSION}); upgrade it with: pip install --upgrade prism-runtime-sql"
    )


def check_sqlite_directory(url: URL) -> None:
    """Refuse a SQLite URL whose file's directory does not exist, naming both (SQLite itself
    only says "unable to open database file")."""
    _check_directory(sqlite_file(url))


def check_sqlite_file_directory(database: str) -> None:
    """:func:`check_sqlite_directory` for the ``database`` part of a plain
    ``sqlite:///<database>`` URL, without parsing the URL."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    _check_directory(Path(database))


def _check_directory(path: Path | None) -> None:
    if path is None or path.parent.is_dir():
        return
    raise SqlStoreMigrationError(
        f"cannot create the SQLite database {str(path)!r}: its directory "
        f"{str(path.parent)!r} does not exist. Create it first (mkdir -p "
        f"{shlex.quote(str(path.parent))}) or choose another path."
    )


def missing_database(url_or_engine: str | URL | AsyncEngine) -> str | None:
    """The path of a SQLite database file that does not exist yet, else ``None``.

    Looks at the file system only; PostgreSQL URLs and engines always give ``None``.
    """
    if isinstance(url_or_engine, AsyncEngine):
        return None
    path = sqlite_file(async_url(url_or_engine))
    if path is None or path.exists():
        return None
    return str(path)


def migrate_connection(connection: sa.Connection, tables: Tables, url: URL) -> int:
    """Apply every missing step on a synchronous ``connection`` and commit; the version.

    The one migration runner: the async engines call it through ``run_sync``, the SQLite
    thread-driven stores on their own connection. Raises :class:`SqlStoreSchemaError` when
    a step fails or the database is newer than this release.
    """
    _lock(connection, tables)
    tables.schema_version.create(connection, checkfirst=True)
    current = _recorded_version(connection, tables)
    if current > SCHEMA_VERSION:
        raise too_new_error(url, tables, current)
    for step in MIGRATIONS:
        if step.version <= current:
            continue
        try:
            step.apply(connection, tables)
        except sa.exc.DBAPIError as error:
            if error.connection_invalidated:
                raise
            raise SqlStoreSchemaError(
                f"migrating the SQL store (prefix {echo(tables.prefix)}) in "
                f"{public_url(url)} to version {step.version} failed: "
                f"{error.orig}. Tables with these names but no recorded schema "
                "version belong to something else; choose another table_prefix."
            ) from error
        connection.execute(
            sa.insert(tables.schema_version).values(
                version=step.version, description=step.description, applied_at=time.time()
            )
        )
    connection.commit()
    return max(current, SCHEMA_VERSION)


async def apply_migrations(engine: AsyncEngine, tables: Tables) -> int:
    """Apply every missing step to ``engine`` for ``tables.prefix``; the resulting version.

    Raises :class:`SqlStoreMigrationError` when a SQLite file's directory does not exist,
    :class:`SqlStoreSchemaError` when a step fails or the database is newer than this
    release, and ``CheckpointStoreError`` when the database cannot be reached.
    """
    check_sqlite_directory(engine.url)
    if await _recorded_or_none(engine, tables) == SCHEMA_VERSION:
        return SCHEMA_VERSION
    with translate_errors("migrate the schema"):
        async with engine.connect() as connection:
            return await connection.run_sync(migrate_connection, tables, engine.url)


async def _recorded_or_none(engine: AsyncEngine, tables: Tables) -> int | None:
    """The recorded version read straight from the migration log (one query, no schema
    inspection), or ``None`` when that read fails (no log table yet, or the database said
    no): the caller then takes the full path, which reports any real failure."""
    with translate_errors("read the schema version"):
        async with engine.connect() as connection:
            if engine.dialect.name == "postgresql":
                # One read needs no transaction: asyncpg and psycopg switch to autocommit
                # without a round trip, which spares a BEGIN and a ROLLBACK.
                connection = await connection.execution_options(isolation_level="AUTOCOMMIT")
            try:
                value = (
                    await connection.execute(
                        sa.select(sa.func.max(tables.schema_version.c.version))
                    )
                ).scalar()
            except sa.exc.DBAPIError as error:
                if error.connection_invalidated:
                    raise
                return None
    return int(value) if value is not None else 0


async def read_version(engine: AsyncEngine, tables: Tables) -> int:
    """The schema version recorded on ``engine`` for ``tables`` (``0``: no tables)."""
    found = await _recorded_or_none(engine, tables)
    if found is not None:
        return found
    name = tables.schema_version.name

    def read(sync: sa.Connection) -> int:
        return _recorded_version(sync, tables) if sa.inspect(sync).has_table(name) else 0

    with translate_errors("read the schema version"):
        async with engine.connect() as connection:
            return await connection.run_sync(read)


def schema_missing_error(url: URL, tables: Tables, found: int) -> SqlStoreSchemaError:
    """The error for tables that are missing or older than this release; it names the exact
    command that creates or upgrades them."""
    if found > SCHEMA_VERSION:
        return too_new_error(url, tables, found)
    if found == 0:
        first = (
            f"no Prism tables at {public_url(url)} (table prefix {echo(tables.prefix)}); "
            f"this release needs schema version {SCHEMA_VERSION}. Check the URL, or create "
            "them with:"
        )
    else:
        first = (
            f"the SQL store tables with prefix {echo(tables.prefix)} in {public_url(url)} "
            f"are at schema version {found}; this release needs schema version "
            f"{SCHEMA_VERSION}. Run:"
        )
    lines = [first, f"    {migrate_command(url, tables.prefix)}"]
    if url.password:
        lines.append("(with the real password in place of ***)")
    lines.append(
        "or await prism_store_sql.migrate(url), or open the store with create_schema=True."
    )
    return SqlStoreSchemaError("\n".join(lines))


async def require_schema(engine: AsyncEngine, tables: Tables) -> None:
    """Raise :class:`SqlStoreSchemaError` unless the schema is at :data:`SCHEMA_VERSION`.

    The message names the exact command that creates or upgrades it. A SQLite file that does
    not exist is refused before any connection, so it is not created.
    """
    path = sqlite_file(engine.url)
    if path is not None and not path.exists():
        raise schema_missing_error(engine.url, tables, 0)
    found = await read_version(engine, tables)
    if found != SCHEMA_VERSION:
        raise schema_missing_error(engine.url, tables, found)
