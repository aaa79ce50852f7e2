"""From a URL (or a host's engine) to a SQLAlchemy ``AsyncEngine``, and back to typed errors.

Plain ``sqlite:///run.db`` selects ``sqlite+aiosqlite`` and ``postgresql://…`` selects
``postgresql+asyncpg``; explicit async drivers (``+aiosqlite``, ``+asyncpg``, ``+psycopg``) are
kept. SQLite engines created here switch every connection to WAL mode with a busy timeout,
so concurrent writers in several processes wait for each other instead of failing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
from sqlalchemy import event, exc
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from prism_core._echo import echo
from prism_core.durable import CheckpointStoreError

from ._errors import SqlStoreConfigError, SqlStoreDriverError

__all__ = (
    "BUSY_TIMEOUT_MS",
    "INSTALL_HINTS",
    "STORE_SCHEMES",
    "EngineHandle",
    "async_url",
    "open_engine",
    "public_url",
    "require_asyncio",
    "sql_scheme",
    "sqlite_file",
    "translate_errors",
)

#: The URL schemes (before any ``+driver``) these stores open.
STORE_SCHEMES: tuple[str, ...] = ("sqlite", "postgresql")

#: How long a SQLite connection waits for another writer's lock before failing.
BUSY_TIMEOUT_MS = 5000

#: What to install for each backend's default async driver.
INSTALL_HINTS: dict[str, str] = {
    "sqlite": "pip install 'prism-runtime[sql]'  (or: pip install 'prism-runtime-sql[sqlite]')",
    "postgresql": (
        "pip install 'prism-runtime[postgres]'  (or: pip install 'prism-runtime-sql[postgres]')"
    ),
}

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


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        # The busy timeout first: switching a fresh file to WAL needs a lock too.
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode=WAL")
    finally:
        cursor.close()


def _create_engine(url: str | URL) -> AsyncEngine:
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
        engine = create_async_engine(parsed)
    except ImportError as error:
        hint = INSTALL_HINTS[backend] if driver == default else f"pip install {driver}"
        raise SqlStoreDriverError(
            f"the {echo(driver)} driver for {backend} is not installed; install it with: {hint}"
        ) from error
    if backend == "sqlite":
        event.listen(engine.sync_engine, "connect", _sqlite_on_connect)
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


def open_engine(url_or_engine: str | URL | AsyncEngine) -> EngineHandle:
    """An engine for a URL (owned by the caller of this function) or a host's engine (borrowed).

    Creating an engine opens no connection. Raises :class:`SqlStoreConfigError` or
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
        return EngineHandle(_create_engine(url_or_engine), owned=True)
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


@contextmanager
def translate_errors(action: str) -> Iterator[None]:
    """Re-raise database and connection failures during ``action`` as ``CheckpointStoreError``.

    Every write runs in one statement or one transaction, so a failure here never leaves a
    half-written record behind.
    """
    try:
        yield
    except (exc.SQLAlchemyError, OSError) as error:
        raise CheckpointStoreError(f"SQL store failed to {action}: {_describe(error)}") from error


def _describe(error: BaseException) -> str:
    if isinstance(error, exc.StatementError) and error.orig is not None:
        return f"{type(error.orig).__name__}: {error.orig}"
    return f"{type(error).__name__}: {error}"
