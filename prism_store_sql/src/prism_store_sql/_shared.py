"""``open_sql_stores(url)``: a checkpoint store and a session store on one connection.

On SQLite both stores run on one ``sqlite3`` connection (one worker thread at a time); on an
engine they share the engine. Either way they can commit together
(:meth:`SqlStores.transaction`).
"""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType
from typing import Any, Self

import attrs
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from ._checkpoints import SqlCheckpointStore
from ._engine import open_engine
from ._errors import SqlStoreConfigError
from ._schema import DEFAULT_TABLE_PREFIX, build_tables
from ._sessions import SqlSessionStore, create_sql_session_store
from ._sqlite import SqliteDatabase, sqlite_path
from ._transaction import SqlTransaction

__all__ = ("SqlStores", "open_sql_stores")


@attrs.frozen
class SqlStores:
    """A checkpoint store and a session store sharing one connection (or engine).

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

    def __iter__(self) -> Iterator[Any]:
        return iter((self.checkpoints, self.sessions))

    async def aclose(self) -> None:
        """Close both stores; idempotent."""
        await self.sessions.aclose()
        await self.checkpoints.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def open_sql_stores(
    url_or_engine: str | URL | AsyncEngine,
    *,
    create_schema: bool = True,
    table_prefix: str = DEFAULT_TABLE_PREFIX,
    synchronous: str = "FULL",
) -> SqlStores:
    """Both SQL stores on one connection, able to commit together.

    ``url_or_engine`` takes what :func:`~prism_store_sql.create_sql_checkpoint_store` takes.
    A plain ``sqlite:///path.db`` URL gives one stdlib ``sqlite3`` connection shared by both
    stores (asyncio and trio); ``synchronous`` is its ``PRAGMA synchronous`` (``FULL`` by
    default: a commit survives a power cut; ``NORMAL`` survives a process crash only and
    commits faster). Other URLs and engines share one SQLAlchemy engine (asyncio only) and
    take no ``synchronous``. Opens no connection until the first call.
    """
    tables = build_tables(table_prefix)
    target = sqlite_path(url_or_engine)
    if target is not None:
        from ._sqlite_stores import SqliteCheckpointStore

        path, url = target
        database = SqliteDatabase(
            path, url, tables, create_schema=create_schema, synchronous=synchronous
        )
        checkpoints: SqlCheckpointStore = SqliteCheckpointStore(database)
    else:
        if synchronous != "FULL":
            raise SqlStoreConfigError(
                "synchronous= applies to plain sqlite:/// URLs only (the thread-driven SQLite "
                "backend); leave it out for other databases"
            )
        checkpoints = SqlCheckpointStore(
            open_engine(url_or_engine), tables, create_schema=create_schema
        )
    return SqlStores(checkpoints, create_sql_session_store(checkpoints))
