"""``SqlCheckpointStore`` and ``SqlSessionStore``: the types both SQL backends are.

The two backends are siblings below these types, each on its own driver: the engine stores
(:mod:`._engine_stores`: SQLAlchemy's async engine, PostgreSQL and explicit async URLs) and the
thread-driven SQLite stores (:mod:`._sqlite_stores`: one stdlib ``sqlite3`` connection). Both
write and read the same rows (:mod:`._checkpoint_rows`, :mod:`._session_rows`);
``isinstance(store, SqlCheckpointStore)`` holds for either. These types hold no I/O.
"""

from __future__ import annotations

import abc
import builtins
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self

from sqlalchemy.ext.asyncio import AsyncEngine

from prism_core.stores import (
    UNSET,
    BranchAndRunTail,
    CheckpointPage,
    CheckpointStoreBase,
    SessionEntry,
)

from ._schema import Tables
from ._transaction import SqlTransaction

__all__ = ("SqlCheckpointStore", "SqlSessionStore")


class _SqlStore(abc.ABC):
    """The tables of one prefix, and what a host may ask of either backend's store."""

    _tables: Tables

    @property
    def table_prefix(self) -> str:
        """The prefix of this store's table names."""
        return self._tables.prefix

    @property
    def tables(self) -> Tables:
        """The table definitions of this store's prefix."""
        return self._tables

    @property
    @abc.abstractmethod
    def engine(self) -> AsyncEngine:
        """The SQLAlchemy engine this store runs on (the thread-driven SQLite stores have
        none and raise :class:`~prism_store_sql.SqlStoreConfigError`)."""

    @property
    @abc.abstractmethod
    def closed(self) -> bool:
        """``True`` once ``aclose()`` was called."""


class SqlCheckpointStore(_SqlStore, CheckpointStoreBase):
    """Checkpoints in ``<prefix>checkpoints`` on SQLite or PostgreSQL.

    Build it with :func:`~prism_store_sql.create_sql_checkpoint_store` or
    :func:`~prism_store_sql.open_sql_stores`. Values, metadata and the owner scope are stored
    as canonical JSON text. It also lists by status, renews leases in place and commits
    together with a session store on its connection (or engine).
    """

    @abc.abstractmethod
    def shared_transaction(self, sessions: object) -> SqlTransaction | None:
        """One transaction over this store and ``sessions`` (see
        :func:`prism_core.stores.shared_transaction`), or ``None`` unless ``sessions`` is a
        SQL session store on the same connection (or engine) and table prefix."""

    @abc.abstractmethod
    def checkpoint_transaction(self) -> SqlTransaction:
        """One transaction over several saves of this store (see
        :class:`prism_core.stores.CheckpointBatchStore`)."""

    @abc.abstractmethod
    async def list_by_status(
        self,
        namespace: str,
        status: str,
        *,
        ownership: Mapping[str, str] | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> CheckpointPage:
        """Records of exactly ``ownership`` in ``namespace`` whose value's status is
        ``status``, in key order (see :class:`~prism_core.stores.CheckpointStatusIndex`)."""

    @abc.abstractmethod
    async def renew_lease(
        self,
        namespace: str,
        key: str,
        value: Any,
        *,
        version: int,
        ownership: Mapping[str, str] | None = None,
        fencing_token: int | None = None,
    ) -> None:
        """Replace the value of the record at exactly ``version``, keeping its version (see
        :class:`~prism_core.stores.LeaseRenewalStore`)."""


class SqlSessionStore(_SqlStore):
    """Session entries on SQLite or PostgreSQL; the head of a session is the entry appended
    last, and appends to one session are serialised by the database.

    Build it with :func:`~prism_store_sql.create_sql_session_store` or
    :func:`~prism_store_sql.open_sql_stores`.
    """

    @abc.abstractmethod
    async def append(self, entry: SessionEntry, *, expected_leaf_id: Any = UNSET) -> SessionEntry:
        """Append ``entry``; its ``parent_id`` must be ``None`` or an entry of the same session
        (see :class:`~prism_core.stores.SessionStore`)."""

    @abc.abstractmethod
    async def list(self, session_id: str) -> builtins.list[SessionEntry]:
        """Every entry of the session, in append order."""

    @abc.abstractmethod
    async def get(self, entry_id: str) -> SessionEntry | None:
        """One entry by id, or ``None``."""

    @abc.abstractmethod
    async def read_branch_path(
        self, session_id: str, leaf_id: str | None
    ) -> builtins.list[SessionEntry]:
        """Root-to-leaf entries of the branch ending at ``leaf_id``."""

    @abc.abstractmethod
    async def read_branch_and_run_tail(
        self, session_id: str, leaf_id: str | None, run_id: str
    ) -> BranchAndRunTail:
        """The branch ending at ``leaf_id`` and the entries of ``run_id`` appended after it
        (see :class:`~prism_core.stores.BranchAndRunTailReader`)."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Release what the store opened; idempotent."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
