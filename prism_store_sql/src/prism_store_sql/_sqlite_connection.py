"""Opening the SQLite connections of a thread-driven database, and their errors.

The writing connection (:func:`open_writer`) opens on the first hand-off: busy timeout, WAL
mode, ``synchronous``, the automatic WAL checkpoint threshold, and the schema version checked
(or migrated with ``create_schema=True``); :func:`open_inline` opens it on the calling thread
instead when that needs no wait and no migration (a cold ``continue`` then makes its first
read with no thread hop); :func:`open_reader` opens the second, read-only connection of a file
database. It must not run a store's statements.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any, Protocol

import anyio.to_thread
import sqlalchemy as sa
from sqlalchemy.engine import URL
from sqlalchemy.pool import StaticPool

from prism_core.stores import CheckpointStoreError, CheckpointStoreUnavailableError

from ._engine import BUSY_TIMEOUT_MS, DEFAULT_TIMEOUT_MS, is_transient, sqlite_file, use_wal
from ._migrations import (
    SCHEMA_VERSION,
    check_sqlite_directory,
    check_sqlite_file_directory,
    migrate_connection,
    schema_missing_error,
)
from ._schema import Tables

__all__ = (
    "SYNCHRONOUS_MODES",
    "WAIT_CODES",
    "WAL_CHECKPOINT_PAGES",
    "Row",
    "SqliteFile",
    "busy_timeout_ms",
    "open_inline",
    "open_reader",
    "open_writer",
    "read_sqlite_version",
    "recorded_version",
    "sqlite_error",
)

#: The writer's automatic WAL checkpoint threshold, in pages (see :mod:`._sqlite`).
WAL_CHECKPOINT_PAGES = 1000

#: The values ``synchronous=`` accepts (SQLite's ``PRAGMA synchronous``).
SYNCHRONOUS_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")

#: SQLite's primary result codes for "another connection holds a lock" (SQLITE_BUSY,
#: SQLITE_LOCKED): an inline read that meets one is handed to the worker thread to wait.
WAIT_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


def busy_timeout_ms(timeout_ms: int) -> int:
    """SQLite's busy timeout for a store call bound of ``timeout_ms``: the store's own bound
    when the host set one, else :data:`~prism_store_sql._engine.BUSY_TIMEOUT_MS` (the same
    rule as the ``sqlite+aiosqlite`` engines)."""
    return BUSY_TIMEOUT_MS if timeout_ms == DEFAULT_TIMEOUT_MS else timeout_ms


def sqlite_error(action: str, error: sqlite3.Error) -> CheckpointStoreError:
    """``error`` as the store's typed error: :class:`~prism_core.CheckpointStoreUnavailableError`
    for a lock wait past the busy timeout (transient), else ``CheckpointStoreError``."""
    kind = CheckpointStoreUnavailableError if is_transient(error) else CheckpointStoreError
    return kind(f"SQL store failed to {action}: {type(error).__name__}: {error}")


class Row(tuple[Any, ...]):
    """A result row whose columns are also attributes (like SQLAlchemy's ``Row``)."""

    __slots__ = ()
    _names: dict[str, int] = {}  # noqa: RUF012 - replaced per result shape

    def __getattr__(self, name: str) -> Any:
        try:
            return self[self._names[name]]
        except KeyError:
            raise AttributeError(name) from None


class SqliteFile(Protocol):
    """What opening a connection reads of the database it is for."""

    path: str
    prefix: str
    synchronous: str
    busy_timeout_ms: int

    @property
    def url(self) -> URL:
        """The database URL."""
        ...

    @property
    def given_url(self) -> URL | str:
        """The URL as the store was given it (a plain ``sqlite:///`` string, or parsed)."""
        ...

    @property
    def tables(self) -> Tables:
        """The tables of the database's prefix."""
        ...

    @property
    def create_schema(self) -> bool:
        """Whether the connection creates or upgrades the tables."""
        ...

    def row(self, cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> Any:
        """The row factory of the connections."""
        ...


def _connect(path: str) -> sqlite3.Connection:
    return sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, cached_statements=64
    )


def _check_directory(db: SqliteFile) -> None:
    given = db.given_url
    if isinstance(given, str):
        check_sqlite_file_directory(db.path)
    else:
        check_sqlite_directory(given)


def open_writer(db: SqliteFile) -> sqlite3.Connection:
    """The writing connection of ``db``, its schema checked (or migrated)."""
    if not db.create_schema:
        # Without create_schema the store writes nothing until its tables are found:
        # neither a file that is not there nor, before the check, the switch to WAL.
        path = sqlite_file(db.url)
        if path is not None and not path.exists():
            raise schema_missing_error(db.url, db.tables, 0)
    _check_directory(db)
    connection = _connect(db.path)
    try:
        # The busy timeout first: switching a fresh file to WAL needs a lock too.
        connection.execute(f"PRAGMA busy_timeout={int(db.busy_timeout_ms)}")
        if not db.create_schema:
            _check_schema(db, connection)
        use_wal(lambda sql: connection.execute(sql).fetchall(), db.busy_timeout_ms, time.sleep)
        connection.execute(f"PRAGMA synchronous={db.synchronous}")
        connection.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
        if db.create_schema:
            _check_schema(db, connection)
    except BaseException:
        connection.close()
        raise
    connection.row_factory = db.row
    return connection


def open_inline(db: SqliteFile) -> sqlite3.Connection | None:
    """The writing connection of ``db`` opened on the calling thread, or ``None`` when that
    would need a wait or a migration: the file must exist in WAL mode, SQLite must answer
    without a lock wait (busy timeout zero) and the schema must be current. ``None`` leaves
    it to the first hand-off, which waits, switches to WAL, migrates or refuses as usual."""
    if not os.path.exists(db.path):
        # sqlite3 would create the file: creating it (or refusing to, under create=False)
        # is the hand-off's job.
        return None
    connection: sqlite3.Connection | None = None
    try:
        _check_directory(db)
        connection = _connect(db.path)
        connection.execute("PRAGMA busy_timeout=0")
        mode = connection.execute("PRAGMA journal_mode").fetchone()
        if mode is None or str(mode[0]).lower() != "wal":
            return None
        connection.execute(f"PRAGMA synchronous={db.synchronous}")
        connection.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
        if recorded_version(connection, f"{db.prefix}schema_version") != SCHEMA_VERSION:
            return None
        connection.execute(f"PRAGMA busy_timeout={int(db.busy_timeout_ms)}")
        connection.row_factory = db.row
        opened, connection = connection, None
        return opened
    except (sqlite3.Error, CheckpointStoreError):
        return None  # the hand-off meets it again, and reports it
    finally:
        if connection is not None:
            connection.close()


def open_reader(db: SqliteFile) -> sqlite3.Connection:
    """The reading connection of ``db`` (opened after the writer's, which checked the
    schema): read-only, at a zero busy timeout."""
    connection = _connect(db.path)
    try:
        connection.execute("PRAGMA busy_timeout=0")
        connection.execute("PRAGMA query_only=1")
    except BaseException:
        connection.close()
        raise
    connection.row_factory = db.row
    return connection


def _check_schema(db: SqliteFile, connection: sqlite3.Connection) -> None:
    # One read of the version row (its primary key), nothing from sqlite_master: a version
    # recorded by a newer release must be refused even when no table changed.
    found = recorded_version(connection, f"{db.prefix}schema_version")
    if found == SCHEMA_VERSION:
        return
    if not db.create_schema or found > SCHEMA_VERSION:
        raise schema_missing_error(db.url, db.tables, found)
    # The same runner as the async engines, on this very connection (a ``:memory:``
    # database exists only there).
    engine = sa.create_engine("sqlite://", creator=lambda: connection, poolclass=StaticPool)
    with engine.connect() as sa_connection:
        migrate_connection(sa_connection, db.tables, db.url)


def recorded_version(connection: sqlite3.Connection, name: str) -> int:
    """The highest version recorded in the version table ``name`` (``0`` when it is
    missing), read directly rather than looked up through ``sqlite_master``."""
    try:
        row = connection.execute(f'SELECT max(version) FROM "{name}"').fetchone()
    except sqlite3.OperationalError as error:
        if "no such table" in str(error):
            return 0
        raise
    return int(row[0]) if row is not None and row[0] is not None else 0


async def read_sqlite_version(
    path: str, tables: Tables, *, timeout_ms: int = DEFAULT_TIMEOUT_MS
) -> int:
    """The schema version recorded in the SQLite file at ``path`` (``0``: no tables), read on
    a short-lived connection in a worker thread."""

    def read() -> int:
        try:
            connection = sqlite3.connect(path, isolation_level=None)
        except sqlite3.Error as error:
            raise sqlite_error("read the schema version", error) from error
        try:
            connection.execute(f"PRAGMA busy_timeout={busy_timeout_ms(timeout_ms)}")
            return recorded_version(connection, tables.schema_version.name)
        except sqlite3.Error as error:
            raise sqlite_error("read the schema version", error) from error
        finally:
            connection.close()

    return await anyio.to_thread.run_sync(read)
