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
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread
import sqlalchemy as sa
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import StaticPool

from prism_core.stores import CheckpointStoreError, CheckpointStoreUnavailableError, echo

from ._engine import (
    BUSY_TIMEOUT_MS,
    DEFAULT_TIMEOUT_MS,
    check_timeout_ms,
    is_transient,
    sqlite_file,
    use_wal,
)
from ._errors import SqlStoreConfigError
from ._migrations import (
    SCHEMA_VERSION,
    check_sqlite_directory,
    check_sqlite_file_directory,
    migrate_connection,
    schema_missing_error,
)
from ._schema import Tables, build_tables, check_table_prefix
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
    "sqlite_path",
)

T = TypeVar("T")

#: The writer's automatic WAL checkpoint threshold, in pages (see the module's docstring).
WAL_CHECKPOINT_PAGES = 1000

#: How many queued writes one commit takes at most by default (``group_commit=``).
DEFAULT_GROUP_COMMIT = 64
#: The largest ``group_commit=`` accepted.
MAX_GROUP_COMMIT = 1024

#: The values ``synchronous=`` accepts (SQLite's ``PRAGMA synchronous``).
SYNCHRONOUS_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")

_DIALECT = sqlite_dialect.dialect(paramstyle="named")

#: SQLite's primary result codes for "another connection holds a lock" (SQLITE_BUSY,
#: SQLITE_LOCKED): an inline read that meets one is handed to the worker thread to wait.
_WAIT_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


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


class CompiledStatement:
    """A SQLAlchemy statement compiled to SQLite text with ``:name`` parameters, once, on
    first use: a store builds all its statements when it is made, and a short-lived process
    (a cold resume) uses only a few of them."""

    __slots__ = ("_defaults", "_statement", "_text")

    def __init__(self, statement: sa.Executable | None) -> None:
        self._statement = statement
        self._text: str | None = None
        self._defaults: dict[str, Any] = {}

    @classmethod
    def from_text(cls, text: str, defaults: Mapping[str, Any]) -> CompiledStatement:
        """A statement already compiled: its text and literal parameters (see
        :mod:`prism_store_sql._sqlite_text`)."""
        compiled = cls(None)
        compiled._defaults = dict(defaults)
        compiled._text = text
        return compiled

    @property
    def text(self) -> str:
        """The statement's SQLite text."""
        text = self._text
        if text is None:
            assert self._statement is not None
            compiled = self._statement.compile(  # type: ignore[attr-defined]
                dialect=_DIALECT, compile_kwargs={"render_postcompile": True}
            )
            # Literal values in the statement (e.g. a CTE's depth 0) are parameters too.
            self._defaults = {
                name: value for name, value in compiled.params.items() if value is not None
            }
            # Set last: a thread that sees the text sees the defaults too (two threads
            # compiling at once both compute the same values).
            text = self._text = compiled.string
        return text

    @property
    def defaults(self) -> dict[str, Any]:
        """The statement's literal parameters, by name."""
        if self._text is None:
            self.text  # noqa: B018 - compiles
        return self._defaults

    def params(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """``values`` plus the statement's literal parameters."""
        defaults = self.defaults
        return {**defaults, **values} if defaults else dict(values)


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


@functools.lru_cache(maxsize=1024)
def compile_sqlite(statement: sa.Executable) -> CompiledStatement:
    """``statement`` as SQLite text (see :class:`CompiledStatement`): one per statement in a
    process, so stores sharing a statement (one prefix's, see
    :func:`~prism_store_sql._schema.build_tables`) compile it once."""
    return CompiledStatement(statement)


class _Row(tuple[Any, ...]):
    """A result row whose columns are also attributes (like SQLAlchemy's ``Row``)."""

    __slots__ = ()
    _names: dict[str, int] = {}  # noqa: RUF012 - replaced per result shape

    def __getattr__(self, name: str) -> Any:
        try:
            return self[self._names[name]]
        except KeyError:
            raise AttributeError(name) from None


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
        self._row_classes: dict[tuple[str, ...], type[_Row]] = {}
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
                    action, body if single else (lambda connection: _alone(connection, body))
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
                    connection = self._reader = self._open_reader()
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
        """Run ``group``'s bodies in one transaction and commit it (the writer thread)."""
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
                    connection = self._connection = self._open()
                if len(group) == 1 and group[0].single:
                    # One statement alone: its own transaction (autocommit), one commit.
                    return [(True, group[0].body(connection))]
                connection.execute("BEGIN IMMEDIATE")
            except BaseException as error:
                return _fail_all(group, connection, error)
            if len(group) > 1:
                # First without savepoints (two statements fewer per write): refusals are
                # rare. When a write fails, everything is rolled back and the group runs
                # again with a savepoint per write, so each failure stays its own.
                outcomes = self._run_group(connection, group, isolated=False)
                if outcomes is None:
                    try:
                        connection.execute("BEGIN IMMEDIATE")
                    except BaseException as error:
                        return _fail_all(group, connection, error)
                    outcomes = self._run_group(connection, group, isolated=True)
            else:
                outcomes = self._run_group(connection, group, isolated=True)
            assert outcomes is not None
        return outcomes

    def _run_group(
        self, connection: sqlite3.Connection, group: list[Write], *, isolated: bool
    ) -> list[tuple[bool, Any]] | None:
        """Each write's outcome, the transaction begun on ``connection`` committed (or rolled
        back when nothing is left to write). Not ``isolated`` (no savepoints): ``None`` when
        a write failed, everything rolled back."""
        outcomes: list[tuple[bool, Any]] = []
        savepoints = isolated and len(group) > 1
        written = 0
        for write in group:
            try:
                if savepoints:
                    connection.execute("SAVEPOINT prism_write")
                value = write.body(connection)
                if savepoints:
                    connection.execute("RELEASE prism_write")
            except BaseException as error:
                if not connection.in_transaction:
                    # SQLite ended the transaction itself (I/O error, disk full): the
                    # writes before this one are gone too.
                    return _fail_all(group, connection, error)
                try:
                    if savepoints:
                        connection.execute("ROLLBACK TO prism_write")
                        connection.execute("RELEASE prism_write")
                    else:
                        connection.rollback()
                except BaseException as undo:  # pragma: no cover - rollback failing
                    return _fail_all(group, connection, undo)
                if not isolated:
                    return None
                outcomes.append((False, _typed(write.action, error)))
                continue
            outcomes.append((True, value))
            written += 1
        if not connection.in_transaction:
            return outcomes  # one write alone, rolled back
        try:
            if written:
                connection.execute("COMMIT")
            else:
                connection.rollback()
        except BaseException as error:
            return _fail_all(group, connection, error)
        return outcomes

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
                        connection = self._reader = self._open_reader()
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
        migration: the file is in WAL mode, SQLite answers without a lock wait (busy timeout
        zero) and the schema is current. Otherwise leave it to the first hand-off, which
        waits, switches to WAL, migrates or refuses as usual. A short-lived process (a cold
        ``continue``) then makes its first read with no thread hop."""
        if not self._lock.acquire(blocking=False):
            return
        connection: sqlite3.Connection | None = None
        try:
            if self._connection is not None or self._closed:
                return
            if not os.path.exists(self.path):
                # sqlite3 would create the file: creating it (or refusing to, under
                # create=False) is the hand-off's job.
                return
            if isinstance(self._url, str):
                check_sqlite_file_directory(self.path)
            else:
                check_sqlite_directory(self._url)
            connection = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, cached_statements=64
            )
            connection.execute("PRAGMA busy_timeout=0")
            mode = connection.execute("PRAGMA journal_mode").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                return
            connection.execute(f"PRAGMA synchronous={self.synchronous}")
            connection.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
            if _recorded_version(connection, f"{self.prefix}schema_version") != SCHEMA_VERSION:
                return
            connection.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
            connection.row_factory = self._row
            self._connection, connection = connection, None
        except (sqlite3.Error, CheckpointStoreError):
            return  # the hand-off meets it again, and reports it
        finally:
            if connection is not None:
                connection.close()
            self._lock.release()

    def _open_reader(self) -> sqlite3.Connection:
        """The reading connection (opened after the writer's, which checked the schema)."""
        connection = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, cached_statements=64
        )
        try:
            connection.execute("PRAGMA busy_timeout=0")
            connection.execute("PRAGMA query_only=1")
        except BaseException:
            connection.close()
            raise
        connection.row_factory = self._row
        return connection

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
            if getattr(error, "sqlite_errorcode", 0) & 0xFF in _WAIT_CODES:
                return False, None
            raise sqlite_error(action, error) from error

    def _call(self, action: str, operation: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            if self._closed:
                raise CheckpointStoreError(f"this SQLite store is closed (it cannot {action})")
            connection = self._connection
            try:
                if connection is None:
                    connection = self._connection = self._open()
                return operation(connection)
            except BaseException as error:
                if connection is not None and connection.in_transaction:
                    connection.rollback()
                if isinstance(error, sqlite3.Error):
                    raise sqlite_error(action, error) from error
                raise

    def _open(self) -> sqlite3.Connection:
        if not self._create_schema:
            # Without create_schema the store writes nothing until its tables are found:
            # neither a file that is not there nor, before the check, the switch to WAL.
            path = sqlite_file(self.url)
            if path is not None and not path.exists():
                raise schema_missing_error(self.url, self.tables, 0)
        if isinstance(self._url, str):
            check_sqlite_file_directory(self.path)
        else:
            check_sqlite_directory(self._url)
        connection = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, cached_statements=64
        )
        try:
            # The busy timeout first: switching a fresh file to WAL needs a lock too.
            connection.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
            if not self._create_schema:
                self._check_schema(connection)
            use_wal(
                lambda sql: connection.execute(sql).fetchall(), self.busy_timeout_ms, time.sleep
            )
            connection.execute(f"PRAGMA synchronous={self.synchronous}")
            connection.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
            if self._create_schema:
                self._check_schema(connection)
        except BaseException:
            connection.close()
            raise
        connection.row_factory = self._row
        return connection

    def _row(self, cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> _Row:
        names = tuple(column[0] for column in cursor.description)
        cls = self._row_classes.get(names)
        if cls is None:
            positions = {name: i for i, name in enumerate(names)}
            cls = type("Row", (_Row,), {"__slots__": (), "_names": positions})
            self._row_classes[names] = cls
        return cls(row)

    def _check_schema(self, connection: sqlite3.Connection) -> None:
        # One read of the version row (its primary key), nothing from sqlite_master: a
        # version recorded by a newer release must be refused even when no table changed.
        found = _recorded_version(connection, f"{self.prefix}schema_version")
        if found == SCHEMA_VERSION:
            return
        if not self._create_schema or found > SCHEMA_VERSION:
            raise schema_missing_error(self.url, self.tables, found)
        # The same runner as the async engines, on this very connection (a ``:memory:``
        # database exists only there).
        engine = sa.create_engine("sqlite://", creator=lambda: connection, poolclass=StaticPool)
        with engine.connect() as sa_connection:
            migrate_connection(sa_connection, self.tables, self.url)

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


def _typed(action: str, error: BaseException) -> BaseException:
    return sqlite_error(action, error) if isinstance(error, sqlite3.Error) else error


def _alone(connection: sqlite3.Connection, body: Callable[[sqlite3.Connection], T]) -> T:
    """``body`` in a transaction of its own (:meth:`SqliteDatabase.run` rolls back on
    failure)."""
    connection.execute("BEGIN IMMEDIATE")
    value = body(connection)
    connection.execute("COMMIT")
    return value


def _fail_all(
    group: list[Write], connection: sqlite3.Connection | None, error: BaseException
) -> list[tuple[bool, Any]]:
    """Every write of ``group`` failed with ``error`` (typed, one exception each), the
    transaction rolled back: none of them is written."""
    if connection is not None and connection.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            connection.rollback()
    outcomes: list[tuple[bool, Any]] = []
    for write in group:
        if isinstance(error, sqlite3.Error):
            typed: BaseException = sqlite_error(write.action, error)
            typed.__cause__ = error
        elif isinstance(error, CheckpointStoreError) and len(group) > 1:
            typed = type(error)(str(error))
            typed.__cause__ = error
        else:
            typed = error
        outcomes.append((False, typed))
    return outcomes


def _recorded_version(connection: sqlite3.Connection, name: str) -> int:
    # The version table read directly (no look through sqlite_master): missing means 0.
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
            return _recorded_version(connection, tables.schema_version.name)
        except sqlite3.Error as error:
            raise sqlite_error("read the schema version", error) from error
        finally:
            connection.close()

    return await anyio.to_thread.run_sync(read)
