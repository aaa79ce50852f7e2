"""From a URL (or a host's engine) to a SQLAlchemy ``AsyncEngine``, and back to typed errors.

Plain ``sqlite:///run.db`` selects ``sqlite+aiosqlite`` and ``postgresql://…`` selects
``postgresql+asyncpg``; explicit async drivers (``+aiosqlite``, ``+asyncpg``, ``+psycopg``) are
kept. SQLite engines created here switch every connection to WAL mode with a busy timeout,
so concurrent writers in several processes wait for each other instead of failing.

Every engine created here bounds its calls by ``timeout_ms`` (default
:data:`DEFAULT_TIMEOUT_MS`): the connect timeout, PostgreSQL's ``statement_timeout`` and
``lock_timeout`` (server side) with a client-side command timeout slightly above it, the
pool's checkout wait, and SQLite's busy timeout. An engine the host passes in keeps the host's
settings. :func:`translate_errors` turns connection-level failures and timeouts into
:class:`~prism_core.CheckpointStoreUnavailableError` (transient: the durable layer retries
them) and every other database failure into :class:`~prism_core.CheckpointStoreError`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
from sqlalchemy import event, exc
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.util import await_only

from prism_core.stores import CheckpointStoreError, CheckpointStoreUnavailableError, echo

from ._errors import SqlStoreConfigError, SqlStoreDriverError

__all__ = (
    "BUSY_TIMEOUT_MS",
    "DEFAULT_TIMEOUT_MS",
    "TRANSIENT_SQLSTATES",
    "INSTALL_HINTS",
    "STORE_SCHEMES",
    "EngineHandle",
    "async_url",
    "open_engine",
    "public_url",
    "require_asyncio",
    "sql_scheme",
    "check_timeout_ms",
    "describe",
    "is_transient",
    "sqlite_file",
    "translate_errors",
)

#: The URL schemes (before any ``+driver``) these stores open.
STORE_SCHEMES: tuple[str, ...] = ("sqlite", "postgresql")

#: How long a SQLite connection waits for another writer's lock before failing.
BUSY_TIMEOUT_MS = 5000

#: The default bound on one store call (connect, statement, lock wait, pool checkout).
DEFAULT_TIMEOUT_MS = 10000

#: PostgreSQL error codes (SQLSTATE) of transient failures: connection exceptions (class
#: 08), administrator or crash shutdown and "cannot connect now" (57P01..57P03), a statement
#: cancelled by its timeout (57014), a lock wait timeout (55P03), too many connections
#: (53300), and serialization failures and deadlocks (40001, 40P01).
TRANSIENT_SQLSTATES: frozenset[str] = frozenset(
    {"57P01", "57P02", "57P03", "57014", "55P03", "53300", "40001", "40P01"}
)

#: What to install for each backend's default async driver.
INSTALL_HINTS: dict[str, str] = {
    "sqlite": "pip install 'prism-runtime[sql]'  (or: pip install 'prism-runtime-sql[sqlite]')",
    "postgresql": (
        "pip install 'prism-runtime[postgres]'  (or: pip install 'prism-runtime-sql[postgres]')"
    ),
}

_WAL_RETRY_PAUSE_S = 0.01

_DEFAULT_DRIVERS = {"sqlite": "aiosqlite", "postgresql": "asyncpg"}


def sql_scheme(url: str) -> str | None:
    """``"sqlite"`` or ``"postgresql"`` when these stores open ``url`` (``+driver`` allowed)."""
    head, sep, _ = url.partition(":")
    if not sep:
        return None
    base = head.split("+", 1)[0].lower()
    return base if base in STORE_SCHEMES else None


def async_url(url: str | URL) -> URL:
    """``url`` parsed, with the default async driver filled in when none is named.

    Raises :class:`SqlStoreConfigError` for anything that is not a SQLite or PostgreSQL URL.
    """
    try:
        parsed = make_url(url)
    except exc.ArgumentError as error:
        # The URL itself is not echoed: it may carry a password.
        raise SqlStoreConfigError(
            "not a database URL; expected sqlite:///path.db or postgresql://user@host/db"
        ) from error
    if parsed.drivername != parsed.drivername.lower():
        parsed = parsed.set(drivername=parsed.drivername.lower())
    backend = parsed.get_backend_name()
    if backend not in STORE_SCHEMES:
        raise SqlStoreConfigError(
            f"SQL stores open sqlite and postgresql URLs, not {echo(backend)} "
            "(expected sqlite:///path.db or postgresql://user@host/db)"
        )
    if parsed.drivername == backend:
        parsed = parsed.set(drivername=f"{backend}+{_DEFAULT_DRIVERS[backend]}")
    return parsed


def sqlite_file(url: URL) -> Path | None:
    """The database file of a SQLite ``url``; ``None`` for in-memory and non-SQLite URLs."""
    if url.get_backend_name() != "sqlite":
        return None
    database = url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


def public_url(url: URL) -> str:
    """``url`` as text with any password masked, for messages."""
    return url.render_as_string(hide_password=True)


def use_wal(
    execute: Callable[[str], object], busy_timeout_ms: int, pause: Callable[[float], object]
) -> None:
    """Switch a SQLite file to WAL (a property of the file: once set, it stays).

    Connections opening a fresh file together race to convert it, and the loser can be told
    "database is locked" without SQLite waiting on its busy handler; so the switch is retried
    (``pause`` between tries) for up to the busy timeout before the error is raised.
    """
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            execute("PRAGMA journal_mode=WAL")
            return
        except Exception as error:
            if "locked" not in str(error) or time.monotonic() >= deadline:
                raise
        pause(_WAL_RETRY_PAUSE_S)


def _sqlite_on_connect(busy_timeout_ms: int) -> Any:
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            # The busy timeout first: switching a fresh file to WAL needs a lock too.
            cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            # on_connect runs inside SQLAlchemy's greenlet: await_only pauses on the event
            # loop instead of blocking it.
            use_wal(
                cursor.execute,
                busy_timeout_ms,
                lambda seconds: await_only(asyncio.sleep(seconds)),
            )
        finally:
            cursor.close()

    return on_connect


def check_timeout_ms(value: Any) -> int:
    """``value`` if it is a positive integer of milliseconds, else :class:`SqlStoreConfigError`."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SqlStoreConfigError(f"timeout_ms must be a positive integer, got {echo(value)}")
    return value


def _timeout_args(parsed: URL, timeout_ms: int) -> dict[str, Any]:
    seconds = timeout_ms / 1000
    driver = parsed.get_driver_name()
    if driver == "asyncpg":
        return {
            "connect_args": {
                "timeout": seconds,
                # The client-side bound sits above the server's, so the server cancels first
                # and the connection survives.
                "command_timeout": seconds + 1,
                "server_settings": {
                    "statement_timeout": str(timeout_ms),
                    "lock_timeout": str(timeout_ms),
                },
            },
            "pool_timeout": seconds,
        }
    if driver == "psycopg":
        return {
            "connect_args": {
                "connect_timeout": max(1, round(seconds)),
                "options": f"-c statement_timeout={timeout_ms} -c lock_timeout={timeout_ms}",
            },
            "pool_timeout": seconds,
        }
    return {}


def _create_engine(url: str | URL, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> AsyncEngine:
    parsed = async_url(url)
    backend = parsed.get_backend_name()
    driver = parsed.get_driver_name()
    default = _DEFAULT_DRIVERS[backend]
    try:
        dialect = parsed.get_dialect(_is_async=True)
    except exc.NoSuchModuleError as error:
        raise SqlStoreConfigError(
            f"SQLAlchemy has no {echo(parsed.drivername)} dialect; use {backend}:// (the default "
            f"async driver) or {backend}+{default}://"
        ) from error
    if not dialect.is_async:
        raise SqlStoreConfigError(
            f"{echo(parsed.drivername)} is not an async driver; use {backend}:// or "
            f"{backend}+{default}://"
        )
    try:
        engine = create_async_engine(parsed, **_timeout_args(parsed, timeout_ms))
    except ImportError as error:
        hint = INSTALL_HINTS[backend] if driver == default else f"pip install {driver}"
        raise SqlStoreDriverError(
            f"the {echo(driver)} driver for {backend} is not installed; install it with: {hint}"
        ) from error
    if backend == "sqlite":
        busy = BUSY_TIMEOUT_MS if timeout_ms == DEFAULT_TIMEOUT_MS else timeout_ms
        event.listen(engine.sync_engine, "connect", _sqlite_on_connect(busy))
    return engine


@attrs.frozen
class EngineHandle:
    """An engine and whether this package created it (and so must dispose of it)."""

    engine: AsyncEngine
    owned: bool

    @property
    def backend(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self.engine.dialect.name


def open_engine(
    url_or_engine: str | URL | AsyncEngine, *, timeout_ms: int = DEFAULT_TIMEOUT_MS
) -> EngineHandle:
    """An engine for a URL (owned by the caller of this function) or a host's engine (borrowed).

    ``timeout_ms`` bounds every call of an engine created here (a host's engine keeps its own
    settings). Creating an engine opens no connection. Raises :class:`SqlStoreConfigError` or
    :class:`SqlStoreDriverError` for unusable URLs and missing drivers.
    """
    if isinstance(url_or_engine, AsyncEngine):
        backend = url_or_engine.dialect.name
        if backend not in STORE_SCHEMES:
            raise SqlStoreConfigError(
                f"SQL stores run on sqlite and postgresql engines, not {echo(backend)}"
            )
        return EngineHandle(url_or_engine, owned=False)
    if isinstance(url_or_engine, str | URL):
        return EngineHandle(_create_engine(url_or_engine, check_timeout_ms(timeout_ms)), owned=True)
    raise TypeError(
        f"expected a database URL or a SQLAlchemy AsyncEngine, got {type(url_or_engine).__name__}"
    )


def require_asyncio() -> None:
    """Raise :class:`SqlStoreDriverError` unless an asyncio event loop is running."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise SqlStoreDriverError(
            "SQL stores on a SQLAlchemy engine (postgresql://, sqlite+aiosqlite://, a host's "
            "AsyncEngine) run on asyncio only: SQLAlchemy's async engine, aiosqlite and asyncpg "
            "are asyncio libraries. Call them from asyncio (e.g. anyio.run(main, "
            "backend='asyncio')), or under trio use the SQLite store on a plain "
            "sqlite:///path.db URL, which runs on its own thread and works on both"
        ) from None


def is_transient(error: BaseException) -> bool:
    """Whether ``error`` (or the driver error behind it) is a connection-level failure or a
    timeout, which a retry may get past."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, exc.DBAPIError) and current.connection_invalidated:
            return True
        if isinstance(current, exc.DisconnectionError | exc.TimeoutError | OSError | TimeoutError):
            return True
        state = getattr(current, "sqlstate", None)
        if isinstance(state, str) and (state.startswith("08") or state in TRANSIENT_SQLSTATES):
            return True
        text = str(current).lower()
        if type(current).__name__ == "OperationalError" and (
            "database is locked" in text or "database is busy" in text
        ):
            return True
        if "connection is closed" in text or "connection was closed" in text:
            return True
        nxt = getattr(current, "orig", None)
        current = nxt if isinstance(nxt, BaseException) else current.__cause__
    return False


@contextmanager
def translate_errors(action: str) -> Iterator[None]:
    """Re-raise database and connection failures during ``action`` as ``CheckpointStoreError``
    (:class:`~prism_core.CheckpointStoreUnavailableError` when :func:`is_transient`).

    Every write runs in one statement or one transaction, so a failure here never leaves a
    half-written record behind (a write whose answer was lost may have been applied).
    """
    try:
        yield
    except (exc.SQLAlchemyError, OSError, TimeoutError) as error:
        kind = CheckpointStoreUnavailableError if is_transient(error) else CheckpointStoreError
        raise kind(f"SQL store failed to {action}: {describe(error)}") from error


def describe(error: BaseException) -> str:
    """``error`` as ``Type: message`` for a store error's text (the driver's error when wrapped)."""
    if isinstance(error, exc.StatementError) and error.orig is not None:
        return f"{type(error.orig).__name__}: {error.orig}"
    return f"{type(error).__name__}: {error}"
