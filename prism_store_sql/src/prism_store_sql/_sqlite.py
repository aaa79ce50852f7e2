"""The thread-driven SQLite backend: one stdlib ``sqlite3`` connection, one hand-off per call.

A ``sqlite:///path.db`` store runs every operation as one synchronous function on one
dedicated connection, handed to a worker thread: under asyncio the database's own thread
(one queue, first in first out; the event loop is woken once, when the result is ready),
under any other backend ``anyio.to_thread.run_sync`` under a ``CapacityLimiter(1)``. All
statements of an operation (an append's head move and insert, a
shared commit's entries and checkpoint) run in that one hand-off and end in one commit. So the
stores work under asyncio and trio alike, and a call costs one thread round trip instead of
one per statement. A one-row read (:meth:`SqliteDatabase.read`) runs on the calling thread
instead, when the connection is free and SQLite can answer without waiting for a lock: a
hand-off's two thread wake-ups cost several times the read itself.

The connection runs in WAL mode with a busy timeout (the store's ``timeout_ms``; see
:func:`busy_timeout_ms`) and ``synchronous=FULL`` (a commit is on
disk when the call returns, also across a power cut; ``NORMAL`` would only survive a process
crash). A lock wait that outlasts the busy
timeout ("database is locked"/busy) raises :class:`~prism_core.CheckpointStoreUnavailableError`
(transient: the durable layer retries it), like the async engines' errors (see
:func:`~prism_store_sql._engine.is_transient`); every other ``sqlite3`` failure raises
:class:`~prism_core.CheckpointStoreError`. sqlite3 caches each statement's prepared form per
connection. The schema version row
is read once, when the connection opens; migrations run through SQLAlchemy on the same
connection, exactly the steps the async engines run.

The writer checkpoints the WAL itself, at SQLite's automatic threshold (1000 pages): the
commit that crosses it copies the WAL back into the database file, and the next write starts
the WAL again from its beginning. A WAL that is rewritten in place costs each commit's
``fsync`` about half of what a WAL that keeps growing does (a sync that must also record the
file's new size): 0.18 against 0.37 ms per turn commit measured on the development machine.
So the WAL is never left to grow past the threshold (a checkpoint beside the commits, on
another connection, rarely catches up with a busy writer, and the WAL then grows).

This module is the database: its connections' lifetime and the hand-offs (``run``, ``read``,
``write``). Its other rooms: opening the connections (:mod:`._sqlite_connection`), the
statements' text (:mod:`._sqlite_statements`), the commit batch (:mod:`._sqlite_batch`) and
the worker thread (:mod:`._sqlite_worker`); the names other modules use are re-exported here.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread
import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url

from prism_core.stores import CheckpointStoreError, echo

from ._engine import DEFAULT_TIMEOUT_MS, check_timeout_ms
from ._errors import SqlStoreConfigError
from ._schema import Tables, build_tables, check_table_prefix
from ._sqlite_batch import alone, commit_group, fail_all
from ._sqlite_connection import (
    SYNCHRONOUS_MODES,
    WAIT_CODES,
    WAL_CHECKPOINT_PAGES,
    Row,
    busy_timeout_ms,
    open_inline,
    open_reader,
    open_writer,
    read_sqlite_version,
    sqlite_error,
)
from ._sqlite_statements import CompiledStatement, compile_sqlite
from ._sqlite_worker import Worker, Write, running_loop

__all__ = (
    "DEFAULT_GROUP_COMMIT",
    "MAX_GROUP_COMMIT",
    "SYNCHRONOUS_MODES",
    "WAL_CHECKPOINT_PAGES",
    "CompiledStatement",
    "SqliteDatabase",
    "busy_timeout_ms",
    "compile_sqlite",
    "read_sqlite_version",
    "sqlite_error",
    "sqlite_path",
)

T = TypeVar("T")

#: How many queued writes one commit takes at most by default (``group_commit=``).
DEFAULT_GROUP_COMMIT = 64
#: The largest ``group_commit=`` accepted.
MAX_GROUP_COMMIT = 1024


def sqlite_path(url_or_engine: object) -> tuple[str, URL | str] | None:
    """``(path, url)`` when ``url_or_engine`` is a plain ``sqlite:`` URL (no ``+driver``),
    which the thread-driven backend serves; ``None`` for anything else. ``sqlite://`` is an
    in-memory database. ``url`` is the URL as given when it is a plain ``sqlite:///path``
    string (parsed when first needed, see :attr:`SqliteDatabase.url`)."""
    if not isinstance(url_or_engine, str | URL):
        return None
    if isinstance(url_or_engine, str):
        # The common form read directly: SQLAlchemy's URL parser compiles its pattern on
        # first use, about 1 ms of a fresh process's first store opening.
        head, _, path = url_or_engine.partition(":///")
        if head.lower() == "sqlite" and path and not any(c in path for c in "?%#"):
            return path, url_or_engine
    try:
        url = make_url(url_or_engine)
    except sa.exc.ArgumentError:
        return None
    if url.drivername.lower() != "sqlite":
        return None
    return (url.database or ":memory:"), url


class SqliteDatabase:
    """One SQLite connection shared by the stores built on it, driven from worker threads.

    The connection opens (and the schema version is checked, or migrated with
    ``create_schema=True``) on the first call, never at construction. Every store built on it
    holds a reference; the last ``release`` closes the connection.
    """

    def __init__(
        self,
        path: str,
        url: URL | str,
        tables: Tables | str,
        *,
        create_schema: bool,
        synchronous: str = "FULL",
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        group_commit: int = DEFAULT_GROUP_COMMIT,
    ) -> None:
        if type(group_commit) is not int or not 1 <= group_commit <= MAX_GROUP_COMMIT:
            raise SqlStoreConfigError(
                f"group_commit must be an int from 1 to {MAX_GROUP_COMMIT} (writes per "
                f"commit; 1 commits each write alone), got {echo(group_commit)}"
            )
        mode = synchronous.upper() if isinstance(synchronous, str) else synchronous
        if mode not in SYNCHRONOUS_MODES:
            raise SqlStoreConfigError(
                f"synchronous must be one of {', '.join(SYNCHRONOUS_MODES)}, "
                f"got {echo(synchronous)}"
            )
        self.path = path
        self._url = url
        if isinstance(tables, str):
            # A prefix: the tables are built when first needed (a migration, a list query).
            self.prefix: str = check_table_prefix(tables)
            self._tables: Tables | None = None
        else:
            self.prefix = tables.prefix
            self._tables = tables
        self.synchronous: str = mode
        self.busy_timeout_ms = busy_timeout_ms(check_timeout_ms(timeout_ms))
        self._create_schema = create_schema
        self._connection: sqlite3.Connection | None = None
        self._lock = threading.Lock()  # guards the connection across event loops
        self._limiter: anyio.CapacityLimiter | None = None
        self._read_limiter: anyio.CapacityLimiter | None = None
        self._token: object = None
        self._users = 0
        self._closed = False
        # Row types by result shape, made under the connection lock.
        self._row_classes: dict[tuple[str, ...], type[Row]] = {}
        self.group_commit = group_commit
        self._worker = Worker(batch=self._commit_group, max_batch=group_commit)
        self._writes_in_flight = 0  # writes queued or committing (counted by the callers)
        # A file database reads on a second connection of its own (WAL: readers never wait
        # for the writer), so a read does not queue behind commits; ``:memory:`` exists only
        # on the one connection.
        self._separate_reads = path != ":memory:" and not path.startswith("file::memory:")
        self._reader: sqlite3.Connection | None = None
        self._read_lock = threading.Lock()
        self._read_worker = Worker(name="prism-sqlite-read")

    @property
    def closed(self) -> bool:
        """``True`` once every store built on it was closed."""
        return self._closed

    @property
    def url(self) -> URL:
        """The database URL (parsed on first use)."""
        url = self._url
        if isinstance(url, str):
            url = self._url = make_url(url)
        return url

    @property
    def given_url(self) -> URL | str:
        """The URL as the store was given it (a plain ``sqlite:///`` string, or parsed)."""
        return self._url

    @property
    def create_schema(self) -> bool:
        """Whether the writing connection creates or upgrades the tables."""
        return self._create_schema

    def create_nothing(self) -> None:
        """Create neither the file nor the tables: refuse them missing when the connection
        opens (it opens on first use, so this holds when called before)."""
        self._create_schema = False

    @property
    def tables(self) -> Tables:
        """The SQLAlchemy tables of this database's prefix (built on first use)."""
        tables = self._tables
        if tables is None:
            tables = self._tables = build_tables(self.prefix)
        return tables

    def acquire(self) -> None:
        """Count one more store on this connection."""
        self._users += 1

    def _thread_limiter(self, *, reads: bool = False) -> anyio.CapacityLimiter:
        # A limiter belongs to one event loop; a host may run the stores from several in turn.
        token = anyio.lowlevel.current_token()
        if self._limiter is None or self._token != token:
            self._limiter = anyio.CapacityLimiter(1)
            self._read_limiter = anyio.CapacityLimiter(1)
            self._token = token
        limiter = self._read_limiter if reads else self._limiter
        assert limiter is not None
        return limiter

    async def run(self, action: str, operation: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``operation`` on the connection in one worker-thread hand-off.

        A ``sqlite3.Error`` becomes :class:`~prism_core.stores.CheckpointStoreError` naming
        ``action`` (:class:`~prism_core.CheckpointStoreUnavailableError` for a lock wait past
        the busy timeout); any failure rolls back an open transaction first, so nothing is
        half-written. A cancelled caller waits for the operation to finish (it is not
        abandoned midway), then sees the cancellation.
        """
        if self._closed:
            raise CheckpointStoreError(f"this SQLite store is closed (it cannot {action})")
        loop = running_loop()
        if loop is None:
            return await anyio.to_thread.run_sync(
                self._call, action, operation, limiter=self._thread_limiter()
            )
        # One thread hand-off and one wake-up of the loop, without the thread pool's own
        # scheduling steps; same order and cancellation rules as the pool path.
        await anyio.lowlevel.checkpoint_if_cancelled()
        future: asyncio.Future[T] = loop.create_future()
        self._worker.submit(future, lambda: self._call(action, operation))
        with anyio.CancelScope(shield=True):
            return await future
        raise AssertionError("unreachable")  # pragma: no cover - a shield swallows nothing

    async def write(
        self, action: str, body: Callable[[sqlite3.Connection], T], *, single: bool = False
    ) -> T:
        """Run ``body`` inside a write transaction and commit it; ``body``'s result once the
        commit is on disk.

        Under asyncio the writes queued while a commit is in flight share the next one
        (group commit, up to :attr:`group_commit` writes): one ``BEGIN IMMEDIATE``, each
        write's body under a savepoint of its own, one ``COMMIT``. A body that raises rolls
        back its own savepoint and raises to its own caller only, exactly as alone; a failed
        ``BEGIN`` or ``COMMIT`` (or a failure that ends the whole transaction) fails every
        write of the group with the same typed error, none of them written. A caller's call
        returns only after the commit that holds its write. Elsewhere (trio, no running
        loop) each write is its own transaction, as :meth:`run` runs it. ``single``: the
        body runs exactly one statement, which alone (a group of one, or not under asyncio)
        runs as its own transaction, with no ``BEGIN``/``COMMIT`` around it.
        """
        if self._closed:
            raise CheckpointStoreError(f"this SQLite store is closed (it cannot {action})")
        loop = running_loop()
        if loop is None:
            self._writes_in_flight += 1
            try:
                value = await self.run(
                    action, body if single else (lambda connection: alone(connection, body))
                )
            finally:
                self._writes_in_flight -= 1
            return value
        await anyio.lowlevel.checkpoint_if_cancelled()
        future: asyncio.Future[T] = loop.create_future()
        self._worker.submit_write(Write(future, action, body, single))
        self._writes_in_flight += 1
        try:
            with anyio.CancelScope(shield=True):
                return await future
        finally:
            self._writes_in_flight -= 1
        raise AssertionError("unreachable")  # pragma: no cover - a shield swallows nothing

    async def read_many(self, action: str, operation: Callable[[sqlite3.Connection], T]) -> T:
        """Run a read of any size (``operation`` must only read) in one worker-thread
        hand-off. On a file database, while writes are under way, it runs on the reading
        connection's own thread, so it does not wait for queued commits; otherwise like
        :meth:`run`."""
        if self._closed:
            raise CheckpointStoreError(f"this SQLite store is closed (it cannot {action})")
        if not self._separate_reads or self._connection is None or not self._writes_in_flight:
            # Before the first call the schema is unchecked: that call checks it. With no
            # write under way the writing connection serves (a process that only reads, or
            # opens its stores for one task, never opens a second connection).
            return await self.run(action, operation)
        loop = running_loop()
        if loop is None:
            return await anyio.to_thread.run_sync(
                self._read_call, action, operation, limiter=self._thread_limiter(reads=True)
            )
        await anyio.lowlevel.checkpoint_if_cancelled()
        future: asyncio.Future[T] = loop.create_future()
        self._read_worker.submit(future, lambda: self._read_call(action, operation))
        with anyio.CancelScope(shield=True):
            return await future
        raise AssertionError("unreachable")  # pragma: no cover - a shield swallows nothing

    def _read_call(self, action: str, operation: Callable[[sqlite3.Connection], T]) -> T:
        with self._read_lock:
            if self._closed:
                raise CheckpointStoreError(f"this SQLite store is closed (it cannot {action})")
            connection = self._reader
            try:
                if connection is None:
                    connection = self._reader = open_reader(self)
                # The reading connection rests at a zero busy timeout (the inline reads);
                # here, off the loop, a read waits as long as any call would.
                connection.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
                try:
                    return operation(connection)
                finally:
                    connection.execute("PRAGMA busy_timeout=0")
            except BaseException as error:
                if connection is not None and connection.in_transaction:
                    connection.rollback()
                if isinstance(error, sqlite3.Error):
                    raise sqlite_error(action, error) from error
                raise

    def _commit_group(self, group: list[Write]) -> list[tuple[bool, Any]]:
        """Run ``group``'s bodies in one transaction and commit it (the writer thread; see
        :mod:`._sqlite_batch`)."""
        with self._lock:
            if self._closed:
                return [
                    (
                        False,
                        CheckpointStoreError(f"this SQLite store is closed (it cannot {w.action})"),
                    )
                    for w in group
                ]
            connection = self._connection
            try:
                if connection is None:
                    connection = self._connection = open_writer(self)
            except BaseException as error:
                return fail_all(group, connection, error)
            return commit_group(connection, group)

    async def read(self, action: str, operation: Callable[[sqlite3.Connection], T]) -> T:
        """Run a short read (``operation`` must only read, and only a bounded amount) on the
        calling thread when it need not wait: the connection is open and free, and SQLite can
        start the read without a lock wait. Otherwise, like :meth:`run`.

        A read of one row takes a few microseconds, several times less than the two thread
        wake-ups of a hand-off; so a checkpoint load makes none. The read never waits on the
        event loop's thread: the connection's lock is only tried, and the read runs with a
        busy timeout of zero, so a lock held by another connection (SQLite answers "busy"
        at once) sends it to the worker thread, where it waits as long as :meth:`run` would.
        """
        # A yield first, as any awaited store call makes: a caller reading in a loop cannot
        # starve the other tasks, and a cancelled caller reads nothing.
        await anyio.lowlevel.checkpoint()
        if self._separate_reads:
            return await self._read_inline(action, operation)
        connection = self._connection
        if connection is not None and not self._closed and self._lock.acquire(blocking=False):
            try:
                if self._connection is connection and not connection.in_transaction:
                    done, value = self._read_now(action, connection, operation)
                    if done:
                        result: T = value
                        return result
            finally:
                self._lock.release()
        return await self.run(action, operation)

    async def _read_inline(self, action: str, operation: Callable[[sqlite3.Connection], T]) -> T:
        if self._connection is None and not self._closed:
            self._open_inline()
        # The writing connection when no write is under way (its page cache is current, and
        # a process that only continues one run never opens a second connection); else the
        # reading one, so reads and the writer thread never take turns on one connection.
        writer = self._connection
        if (
            writer is not None
            and not self._writes_in_flight
            and not self._closed
            and self._lock.acquire(blocking=False)
        ):
            try:
                if self._connection is writer and not writer.in_transaction:
                    done, value = self._read_now(action, writer, operation)
                    if done:
                        read: T = value
                        return read
            finally:
                self._lock.release()
        if (
            self._connection is not None
            and not self._closed
            and self._read_lock.acquire(blocking=False)
        ):
            try:
                connection = self._reader
                if connection is None and not self._closed:
                    try:
                        connection = self._reader = open_reader(self)
                    except sqlite3.Error:
                        connection = None  # the hand-off below meets it again
                if connection is not None and not connection.in_transaction:
                    done, value = self._read_now(action, connection, operation, waits=False)
                    if done:
                        result: T = value
                        return result
            finally:
                self._read_lock.release()
        return await self.read_many(action, operation)

    def _open_inline(self) -> None:
        """Open the writing connection on the calling thread when that needs no wait and no
        migration (see :func:`~._sqlite_connection.open_inline`)."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            if self._connection is None and not self._closed:
                self._connection = open_inline(self)
        finally:
            self._lock.release()

    def _read_now(
        self,
        action: str,
        connection: sqlite3.Connection,
        operation: Callable[[sqlite3.Connection], T],
        *,
        waits: bool = True,
    ) -> tuple[bool, Any]:
        """``(True, result)`` of ``operation`` run here with no lock wait, or ``(False,
        None)`` when SQLite would have had to wait (the caller then hands it off).
        ``waits``: the connection has a busy timeout, set to zero for this read."""
        try:
            if not waits:
                return True, operation(connection)
            connection.execute("PRAGMA busy_timeout=0")
            try:
                return True, operation(connection)
            finally:
                connection.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
        except sqlite3.Error as error:
            if connection.in_transaction:
                connection.rollback()
            if getattr(error, "sqlite_errorcode", 0) & 0xFF in WAIT_CODES:
                return False, None
            raise sqlite_error(action, error) from error

    def _call(self, action: str, operation: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            if self._closed:
                raise CheckpointStoreError(f"this SQLite store is closed (it cannot {action})")
            connection = self._connection
            try:
                if connection is None:
                    connection = self._connection = open_writer(self)
                return operation(connection)
            except BaseException as error:
                if connection is not None and connection.in_transaction:
                    connection.rollback()
                if isinstance(error, sqlite3.Error):
                    raise sqlite_error(action, error) from error
                raise

    def row(self, cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> Row:
        """The connections' row factory: a tuple whose columns are also attributes."""
        names = tuple(column[0] for column in cursor.description)
        cls = self._row_classes.get(names)
        if cls is None:
            positions = {name: i for i, name in enumerate(names)}
            cls = type("Row", (Row,), {"__slots__": (), "_names": positions})
            self._row_classes[names] = cls
        return cls(row)

    async def release(self) -> None:
        """One store on this connection closed; the last one closes the connection."""
        self._users -= 1
        if self._users > 0 or self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._close)
        self._worker.stop()
        self._read_worker.stop()

    def _close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None
        with self._read_lock:
            if self._reader is not None:
                self._reader.close()
                self._reader = None
