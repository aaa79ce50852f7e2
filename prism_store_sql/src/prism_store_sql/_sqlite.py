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
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import queue
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
    migrate_connection,
    schema_missing_error,
)
from ._schema import Tables

__all__ = (
    "SYNCHRONOUS_MODES",
    "CompiledStatement",
    "SqliteDatabase",
    "busy_timeout_ms",
    "compile_sqlite",
    "read_sqlite_version",
    "sqlite_path",
)

T = TypeVar("T")

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

    def __init__(self, statement: sa.Executable) -> None:
        self._statement = statement
        self._text: str | None = None
        self._defaults: dict[str, Any] = {}

    @property
    def text(self) -> str:
        """The statement's SQLite text."""
        text = self._text
        if text is None:
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


def sqlite_path(url_or_engine: object) -> tuple[str, URL] | None:
    """``(path, url)`` when ``url_or_engine`` is a plain ``sqlite:`` URL (no ``+driver``),
    which the thread-driven backend serves; ``None`` for anything else. ``sqlite://`` is an
    in-memory database."""
    if not isinstance(url_or_engine, str | URL):
        return None
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


class _Worker:
    """The thread that runs one database's operations for asyncio callers, in order."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def submit(self, future: asyncio.Future[Any], call: Callable[[], Any]) -> None:
        # Not alive: never started, or this is a forked child, which has no copy of it.
        if self._thread is None or not self._thread.is_alive():
            self._queue = queue.SimpleQueue()
            self._thread = threading.Thread(
                target=_serve, args=(self._queue,), name="prism-sqlite", daemon=True
            )
            self._thread.start()
        self._queue.put((future, call))

    def stop(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread = None


def _serve(calls: queue.SimpleQueue[Any]) -> None:
    while True:
        item = calls.get()
        if item is None:
            return
        future, call = item
        try:
            outcome: tuple[bool, Any] = (True, call())
        except BaseException as error:
            outcome = (False, error)
        # A closed event loop refuses the answer: nobody waits for it any more.
        with contextlib.suppress(RuntimeError):
            future.get_loop().call_soon_threadsafe(_settle, future, outcome)


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if future.done():
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class SqliteDatabase:
    """One SQLite connection shared by the stores built on it, driven from worker threads.

    The connection opens (and the schema version is checked, or migrated with
    ``create_schema=True``) on the first call, never at construction. Every store built on it
    holds a reference; the last ``release`` closes the connection.
    """

    def __init__(
        self,
        path: str,
        url: URL,
        tables: Tables,
        *,
        create_schema: bool,
        synchronous: str = "FULL",
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
    ) -> None:
        mode = synchronous.upper() if isinstance(synchronous, str) else synchronous
        if mode not in SYNCHRONOUS_MODES:
            raise SqlStoreConfigError(
                f"synchronous must be one of {', '.join(SYNCHRONOUS_MODES)}, "
                f"got {echo(synchronous)}"
            )
        self.path = path
        self.url = url
        self.tables = tables
        self.synchronous: str = mode
        self.busy_timeout_ms = busy_timeout_ms(check_timeout_ms(timeout_ms))
        self._create_schema = create_schema
        self._connection: sqlite3.Connection | None = None
        self._lock = threading.Lock()  # guards the connection across event loops
        self._limiter: anyio.CapacityLimiter | None = None
        self._token: object = None
        self._users = 0
        self._closed = False
        # Row types by result shape, made under the connection lock.
        self._row_classes: dict[tuple[str, ...], type[_Row]] = {}
        self._worker = _Worker()

    @property
    def closed(self) -> bool:
        """``True`` once every store built on it was closed."""
        return self._closed

    def acquire(self) -> None:
        """Count one more store on this connection."""
        self._users += 1

    def _thread_limiter(self) -> anyio.CapacityLimiter:
        # A limiter belongs to one event loop; a host may run the stores from several in turn.
        token = anyio.lowlevel.current_token()
        if self._limiter is None or self._token != token:
            self._limiter = anyio.CapacityLimiter(1)
            self._token = token
        return self._limiter

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
        loop = _running_loop()
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

    def _read_now(
        self,
        action: str,
        connection: sqlite3.Connection,
        operation: Callable[[sqlite3.Connection], T],
    ) -> tuple[bool, Any]:
        """``(True, result)`` of ``operation`` run here with no lock wait, or ``(False,
        None)`` when SQLite would have had to wait (the caller then hands it off)."""
        try:
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
        check_sqlite_directory(self.url)
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
        found = _recorded_version(connection, self.tables)
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

    def _close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None


def _recorded_version(connection: sqlite3.Connection, tables: Tables) -> int:
    name = tables.schema_version.name
    exists = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
    ).fetchone()
    if exists is None:
        return 0
    row = connection.execute(f'SELECT max(version) FROM "{name}"').fetchone()
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
            return _recorded_version(connection, tables)
        except sqlite3.Error as error:
            raise sqlite_error("read the schema version", error) from error
        finally:
            connection.close()

    return await anyio.to_thread.run_sync(read)
