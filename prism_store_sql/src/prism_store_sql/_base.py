"""What both engine stores share: the engine they run on, schema readiness and ``aclose``.

The stores on a SQLAlchemy ``AsyncEngine`` (:mod:`._engine_stores`) build on it; the
thread-driven SQLite stores have no engine and do not.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Self

from sqlalchemy import Executable
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from prism_core.stores import CheckpointStoreError

from ._direct import DirectPostgres, IntegrityRefused, direct_postgres
from ._engine import EngineHandle, require_asyncio, translate_errors
from ._migrations import apply_migrations, require_schema
from ._schema import Tables

__all__ = ("EngineStoreBase", "SchemaCheck")


class SchemaCheck:
    """Whether one prefix's tables on one engine were checked (or migrated) yet. Stores that
    share an engine and a prefix share one, so a resume that reads both checks once."""

    def __init__(self) -> None:
        self.ready = False
        self.lock = asyncio.Lock()


class EngineStoreBase:
    """An engine (owned or borrowed), the tables of one prefix, and the schema check.

    The schema is checked (or migrated, with ``create_schema=True``) on first use, never at
    construction: building a store opens no connection.
    """

    def __init__(self, handle: EngineHandle, tables: Tables, *, create_schema: bool) -> None:
        self._handle = handle
        self._tables = tables
        self._create_schema = create_schema
        self._schema = SchemaCheck()
        self._closed = False
        # One statement needs no BEGIN/COMMIT of its own. asyncpg (and psycopg) switch a
        # connection to autocommit and back without a round trip, which spares both. On
        # SQLite each switch is a trip to aiosqlite's worker thread (two per call, more than
        # the COMMIT it saves), so there the statement runs in the transaction the driver
        # opens for a write (none for a read) and is committed right after.
        self._switch_to_autocommit = handle.backend == "postgresql"
        # On asyncpg the hot-path statements skip SQLAlchemy's execution layer (see _direct).
        self._direct: DirectPostgres | None = direct_postgres(
            handle.engine, generic_plans=handle.owned
        )

    @property
    def engine(self) -> AsyncEngine:
        """The SQLAlchemy engine this store runs on."""
        return self._handle.engine

    @property
    def creates_schema(self) -> bool:
        """Whether this store creates or upgrades its tables on first use."""
        return self._create_schema

    def create_nothing(self) -> None:
        """Refuse missing tables on first use instead of creating them; call it before the
        first use (the schema is checked once)."""
        self._create_schema = False

    @property
    def closed(self) -> bool:
        """``True`` once :meth:`aclose` was called."""
        return self._closed

    async def _prepare(self) -> AsyncEngine:
        require_asyncio()
        if self._closed:
            raise CheckpointStoreError(f"this {type(self).__name__} is closed")
        schema = self._schema
        if not schema.ready:
            async with schema.lock:
                if not schema.ready:
                    if self._create_schema:
                        await apply_migrations(self.engine, self._tables)
                    else:
                        await require_schema(self.engine, self._tables)
                    schema.ready = True
        return self.engine

    async def _first_row(
        self,
        action: str,
        statement: Executable,
        params: Mapping[str, Any],
        *,
        write: bool = False,
        refuse_integrity: bool = False,
    ) -> Sequence[Any] | None:
        """The first row of one self-contained statement (``None``: no row): straight to
        asyncpg on an asyncpg engine, else through SQLAlchemy on a read (or, with ``write``,
        a committed write) connection. With ``refuse_integrity`` a constraint violation
        raises :class:`~._direct.IntegrityRefused` on either path."""
        direct = self._direct
        if direct is not None:
            await self._prepare()
            return await direct.fetchrow(
                action, statement, params, refuse_integrity=refuse_integrity
            )
        async with self._write(action) if write else self._read(action) as connection:
            try:
                return (await connection.execute(statement, params)).first()
            except sa_exc.IntegrityError as error:
                if not refuse_integrity:
                    raise
                raise IntegrityRefused() from error

    async def _all_rows(
        self, action: str, statement: Executable, params: Mapping[str, Any]
    ) -> list[Sequence[Any]]:
        """Every row of one self-contained read, by the same path as :meth:`_first_row`."""
        direct = self._direct
        if direct is not None:
            await self._prepare()
            return await direct.fetch(action, statement, params)
        async with self._read(action) as connection:
            return list((await connection.execute(statement, params)).all())

    @asynccontextmanager
    async def _read(self, action: str) -> AsyncIterator[AsyncConnection]:
        """A connection for one self-contained read."""
        engine = await self._prepare()
        with translate_errors(action):
            async with engine.connect() as connection:
                if self._switch_to_autocommit:
                    connection = await connection.execution_options(isolation_level="AUTOCOMMIT")
                yield connection

    @asynccontextmanager
    async def _write(self, action: str) -> AsyncIterator[AsyncConnection]:
        """A connection for one self-contained write, committed when the block succeeds."""
        engine = await self._prepare()
        with translate_errors(action):
            async with engine.connect() as connection:
                if self._switch_to_autocommit:
                    connection = await connection.execution_options(isolation_level="AUTOCOMMIT")
                yield connection
                await connection.commit()

    @asynccontextmanager
    async def _transaction(self, action: str) -> AsyncIterator[AsyncConnection]:
        """A connection inside one transaction, committed when the block succeeds."""
        engine = await self._prepare()
        with translate_errors(action):
            async with engine.begin() as connection:
                yield connection

    async def aclose(self) -> None:
        """Dispose of the engine if this store created it; idempotent.

        An engine the host passed in stays open and usable.
        """
        if self._closed:
            return
        self._closed = True
        if self._handle.owned:
            await self._handle.engine.dispose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
