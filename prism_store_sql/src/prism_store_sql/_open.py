"""Opening the SQL stores: which backend a URL or engine gets, the pair on one connection,
and the schema commands.

A plain ``sqlite:///path.db`` URL gets the thread-driven SQLite stores (:mod:`._sqlite_stores`);
every other URL, and an ``AsyncEngine``, the engine stores (:mod:`._engine_stores`). This is
the one module that names both backends: they never name each other.
"""

from __future__ import annotations

import attrs
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from prism_core.stores import StorePair, echo

from ._engine import DEFAULT_TIMEOUT_MS, EngineHandle, open_engine, require_asyncio
from ._engine_stores import EngineCheckpointStore, EngineSessionStore
from ._errors import SqlStoreConfigError
from ._migrations import SCHEMA_VERSION, apply_migrations, missing_database, read_version
from ._schema import DEFAULT_TABLE_PREFIX, build_tables, check_table_prefix
from ._sqlite import (
    DEFAULT_GROUP_COMMIT,
    MAX_GROUP_COMMIT,
    SqliteDatabase,
    read_sqlite_version,
    sqlite_path,
)
from ._sqlite_stores import SqliteCheckpointStore, SqliteSessionStore
from ._store_types import SqlCheckpointStore, SqlSessionStore
from ._transaction import SqlTransaction

__all__ = (
    "SqlStores",
    "create_sql_checkpoint_store",
    "create_sql_session_store",
    "migrate",
    "open_sql_stores",
    "read_schema_version",
)


def create_sql_checkpoint_store(
    url_or_engine: str | URL | AsyncEngine,
    *,
    create_schema: bool = True,
    table_prefix: str = DEFAULT_TABLE_PREFIX,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> SqlCheckpointStore:
    """A checkpoint store on SQLite or PostgreSQL.

    ``url_or_engine`` is ``sqlite:///path.db`` (the thread-driven SQLite backend: one stdlib
    ``sqlite3`` connection, asyncio and trio), ``postgresql://user@host/db`` (asyncpg), an
    explicit async URL (``sqlite+aiosqlite://…``, ``postgresql+asyncpg://…``) or a SQLAlchemy
    ``AsyncEngine`` (both asyncio only). An engine passed in is never disposed of by the
    store. With ``create_schema=True`` the tables are created or upgraded on first use; with
    ``False`` a missing or old schema raises :class:`~prism_store_sql.SqlStoreSchemaError`
    naming the migrate command. Building the store opens no connection. ``timeout_ms`` bounds
    each call of a connection or engine created here (connect, statement, lock wait; SQLite's
    busy timeout; see :mod:`prism_store_sql._engine`); connection failures and timeouts raise
    :class:`~prism_core.CheckpointStoreUnavailableError`. Raises
    :class:`~prism_store_sql.SqlStoreDriverError` when the driver is not installed.
    """
    target = sqlite_path(url_or_engine)
    if target is not None:
        path, url = target
        return SqliteCheckpointStore(
            SqliteDatabase(
                path, url, table_prefix, create_schema=create_schema, timeout_ms=timeout_ms
            )
        )
    return EngineCheckpointStore(
        open_engine(url_or_engine, timeout_ms=timeout_ms),
        build_tables(table_prefix),
        create_schema=create_schema,
        group_commit=DEFAULT_GROUP_COMMIT,
    )


def _check_group_commit(group_commit: object) -> int:
    # The same bound and words as the SQLite backend's own check.
    if type(group_commit) is not int or not 1 <= group_commit <= MAX_GROUP_COMMIT:
        raise SqlStoreConfigError(
            f"group_commit must be an int from 1 to {MAX_GROUP_COMMIT} (writes per "
            f"commit; 1 commits each write alone), got {echo(group_commit)}"
        )
    return group_commit


def create_sql_session_store(
    url_or_engine: str | URL | AsyncEngine | SqlCheckpointStore,
    *,
    create_schema: bool = True,
    table_prefix: str = DEFAULT_TABLE_PREFIX,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> SqlSessionStore:
    """A session store on SQLite or PostgreSQL.

    Accepts the same URLs and engines as
    :func:`~prism_store_sql.create_sql_checkpoint_store`, never disposes of an engine it was
    handed, creates (``create_schema=True``) or requires the tables on first use, and bounds
    each call by ``timeout_ms`` like the checkpoint store. Given a SQL checkpoint store
    instead, it shares that store's connection (SQLite) or engine, table prefix and timeouts,
    so the two can commit together (see :func:`~prism_store_sql.open_sql_stores`).
    """
    if isinstance(url_or_engine, SqlCheckpointStore):
        return _sharing(url_or_engine)
    target = sqlite_path(url_or_engine)
    if target is not None:
        path, url = target
        return SqliteSessionStore(
            SqliteDatabase(
                path, url, table_prefix, create_schema=create_schema, timeout_ms=timeout_ms
            )
        )
    return EngineSessionStore(
        open_engine(url_or_engine, timeout_ms=timeout_ms),
        build_tables(table_prefix),
        create_schema=create_schema,
    )


def _sharing(checkpoints: SqlCheckpointStore) -> SqlSessionStore:
    if checkpoints.closed:
        raise SqlStoreConfigError("the checkpoint store to share is closed")
    if isinstance(checkpoints, SqliteCheckpointStore):
        return SqliteSessionStore(checkpoints.database)
    assert isinstance(checkpoints, EngineCheckpointStore)
    sessions = EngineSessionStore(
        EngineHandle(checkpoints.engine, owned=False),
        checkpoints.tables,
        create_schema=checkpoints.creates_schema,
    )
    # The same connections: their statements and plan settings too; and the same tables,
    # checked once for both.
    sessions._direct = checkpoints._direct
    sessions._schema = checkpoints._schema
    return sessions


@attrs.define(eq=False)
class SqlStores(StorePair):
    """A checkpoint store and a session store sharing one connection (or engine): a
    :class:`~prism_core.stores.StorePair` of the SQL stores.

    Unpacks as ``checkpoints, sessions = stores``; closing it closes both (and the
    connection, or the engine the stores created).
    """

    checkpoints: SqlCheckpointStore
    sessions: SqlSessionStore

    def transaction(self) -> SqlTransaction:
        """A shared commit over both stores: queue ``append``/``save`` inside
        ``async with stores.transaction() as tx:``; they are written in one transaction
        (one commit) when the block ends, or not at all."""
        tx = self.checkpoints.shared_transaction(self.sessions)
        if tx is None:
            raise SqlStoreConfigError("these stores are closed")
        return tx


def open_sql_stores(
    url_or_engine: str | URL | AsyncEngine,
    *,
    create_schema: bool = True,
    table_prefix: str = DEFAULT_TABLE_PREFIX,
    synchronous: str = "FULL",
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    group_commit: int = DEFAULT_GROUP_COMMIT,
) -> SqlStores:
    """Both SQL stores on one connection, able to commit together.

    ``url_or_engine`` takes what :func:`~prism_store_sql.create_sql_checkpoint_store` takes.
    A plain ``sqlite:///path.db`` URL gives one stdlib ``sqlite3`` connection shared by both
    stores (asyncio and trio); ``synchronous`` is its ``PRAGMA synchronous`` (``FULL`` by
    default: a commit survives a power cut; ``NORMAL`` survives a process crash only and
    commits faster). Other URLs and engines share one SQLAlchemy engine (asyncio only) and
    take no ``synchronous``. ``timeout_ms`` bounds each call as in
    :func:`~prism_store_sql.create_sql_checkpoint_store`. ``group_commit`` bounds how many
    writes one commit may take: the writes that reach the store while a commit is in flight
    (from concurrent runs) join the next one, each caller still waiting for its own commit
    (see docs/stores.md, "The commit path"); on PostgreSQL (asyncpg) it also bounds how many
    concurrent checkpoint loads share one query. ``1`` commits every write alone. Opens no
    connection until the first call.
    """
    target = sqlite_path(url_or_engine)
    checkpoints: SqlCheckpointStore
    if target is not None:
        path, url = target
        database = SqliteDatabase(
            path,
            url,
            table_prefix,
            create_schema=create_schema,
            synchronous=synchronous,
            timeout_ms=timeout_ms,
            group_commit=group_commit,
        )
        checkpoints = SqliteCheckpointStore(database)
    else:
        if synchronous != "FULL":
            raise SqlStoreConfigError(
                "synchronous= applies to plain sqlite:/// URLs only (the thread-driven SQLite "
                "backend); leave it out for other databases"
            )
        bound = _check_group_commit(group_commit)
        checkpoints = EngineCheckpointStore(
            open_engine(url_or_engine, timeout_ms=timeout_ms),
            build_tables(table_prefix),
            create_schema=create_schema,
            group_commit=bound,
        )
    return SqlStores(checkpoints, create_sql_session_store(checkpoints))


async def migrate(
    url_or_engine: str | URL | AsyncEngine, *, table_prefix: str = DEFAULT_TABLE_PREFIX
) -> int:
    """Create or upgrade the SQL store tables for ``table_prefix``; returns the schema version.

    Idempotent and safe to run from several processes at once. An engine passed in is used
    and left open; an engine created from a URL is disposed of before returning. A plain
    ``sqlite:///`` URL is migrated on a stdlib ``sqlite3`` connection (asyncio or trio).
    """
    tables = build_tables(check_table_prefix(table_prefix))
    target = sqlite_path(url_or_engine)
    if target is not None:
        database = SqliteDatabase(*target, tables, create_schema=True)
        database.acquire()
        try:
            # Opening the connection checks the version row and applies any missing step.
            await database.run("migrate the schema", lambda connection: None)
        finally:
            await database.release()
        return SCHEMA_VERSION
    handle = open_engine(url_or_engine)
    try:
        require_asyncio()
        return await apply_migrations(handle.engine, tables)
    finally:
        if handle.owned:
            await handle.engine.dispose()


async def read_schema_version(
    url_or_engine: str | URL | AsyncEngine, *, table_prefix: str = DEFAULT_TABLE_PREFIX
) -> int:
    """The schema version recorded for ``table_prefix`` (``0`` when there are no tables).

    Writes nothing: a SQLite URL whose file does not exist reads as ``0`` without creating it.
    """
    tables = build_tables(check_table_prefix(table_prefix))
    if missing_database(url_or_engine) is not None:
        return 0
    target = sqlite_path(url_or_engine)
    if target is not None:
        return await read_sqlite_version(target[0], tables)
    handle = open_engine(url_or_engine)
    try:
        require_asyncio()
        return await read_version(handle.engine, tables)
    finally:
        if handle.owned:
            await handle.engine.dispose()
