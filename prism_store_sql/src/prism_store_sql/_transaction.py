"""Shared commits on the SQL stores: session appends and checkpoint saves in one transaction.

The store side of :class:`prism_core.stores.StoreTransaction`, on
:class:`~prism_core.stores.QueuedTransaction` (which keeps the queue, its states and its
refusals): a write is checked and its parameters bound when it is queued, and the queue runs
when the ``async with`` block ends: on SQLite in one worker-thread hand-off
(``BEGIN IMMEDIATE`` … ``COMMIT``), on a SQLAlchemy engine in one ``engine.begin()``
transaction (a durable turn's commit on PostgreSQL: one statement, see :mod:`._pg_commit`).
The first refusal rolls everything back and is raised from the block.

The transactions are handed the stores they work on and import no store module: what they
use of each store is the narrow protocol below.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from prism_core.stores import (
    UNSET,
    CheckpointRecord,
    CheckpointStoreError,
    LedgerWrite,
    QueuedAppend,
    QueuedSave,
    QueuedTransaction,
    QueuedWrite,
    SaveRequest,
    SessionEntry,
    conflict,
)

from ._checkpoint_rows import check_range, save_params, saved_record
from ._direct import IntegrityRefused
from ._pg_commit import turn_params
from ._pg_ledger import ledger_params
from ._session_rows import append_params
from ._sqlite import CompiledStatement, SqliteDatabase

__all__ = ("EngineTransaction", "SqlTransaction", "SqliteTransaction")


class SqlTransaction(QueuedTransaction):
    """Queued writes of one shared commit on the SQL stores; subclasses run them against
    their backend (see :class:`~prism_core.stores.QueuedTransaction` for the rules)."""

    def prepare_append(self, entry: SessionEntry, expected_leaf_id: Any) -> dict[str, Any]:
        """The append's bound parameters (``ValueError`` for a payload that is not JSON)."""
        return append_params(entry, expected_leaf_id)

    def prepare_save(self, request: SaveRequest) -> None:
        """Refuse numbers a ``BIGINT`` column cannot hold."""
        check_range(request)

    async def write(self, queue: Sequence[QueuedWrite]) -> list[CheckpointRecord]:
        """Write ``queue`` in one transaction; the record of each save, in order."""
        now = time.time()
        created = await self._commit(queue, now)
        saves = [op.request for op in queue if isinstance(op, QueuedSave)]
        return [saved_record(r, c, now) for r, c in zip(saves, created, strict=True)]

    async def _commit(self, queue: Sequence[QueuedWrite], now: float) -> list[float]:
        """Write ``queue`` in one transaction; the ``created_at`` of each save, in order."""
        raise NotImplementedError


class SqliteCheckpoints(Protocol):
    """What a SQLite shared commit uses of the checkpoint store."""

    @property
    def database(self) -> SqliteDatabase:
        """The connection both stores run on."""
        ...

    def save_statement(self, expected_version: int | None) -> CompiledStatement:
        """The compiled save statement for ``expected_version``."""
        ...

    def write_ledger_in(self, connection: sqlite3.Connection, ledger: LedgerWrite | None) -> None:
        """Write a save's ledger rows inside the transaction open on ``connection``."""
        ...


class SqliteSessions(Protocol):
    """What a SQLite shared commit uses of the session store."""

    def append_in(
        self,
        connection: sqlite3.Connection,
        entry: SessionEntry,
        expected_leaf_id: Any,
        params: dict[str, Any],
    ) -> None:
        """Append inside the transaction open on ``connection`` (worker thread only)."""
        ...


class SqliteTransaction(SqlTransaction):
    """A shared commit on the thread-driven SQLite stores: one hand-off, one commit
    (``sessions`` ``None``: the checkpoint store's saves alone)."""

    def __init__(self, checkpoints: SqliteCheckpoints, sessions: SqliteSessions | None) -> None:
        super().__init__(takes_entries=sessions is not None)
        self._checkpoints = checkpoints
        self._sessions = sessions

    async def _commit(self, queue: Sequence[QueuedWrite], now: float) -> list[float]:
        checkpoints, sessions = self._checkpoints, self._sessions
        statements = [
            checkpoints.save_statement(op.request.expected_version)
            if isinstance(op, QueuedSave)
            else None
            for op in queue
        ]
        saves = [
            statement.params(save_params(op.request, now))
            if isinstance(op, QueuedSave) and statement is not None
            else None
            for op, statement in zip(queue, statements, strict=True)
        ]

        def commit(connection: sqlite3.Connection) -> list[float]:
            created: list[float] = []
            for op, statement, values in zip(queue, statements, saves, strict=True):
                if isinstance(op, QueuedAppend):
                    assert sessions is not None  # appends are refused without one
                    sessions.append_in(connection, op.entry, op.expected_leaf_id, dict(op.prepared))
                    continue
                assert statement is not None
                assert values is not None
                rows = connection.execute(statement.text, values).fetchall()
                if not rows:
                    raise conflict(op.request.namespace, op.request.key)
                checkpoints.write_ledger_in(connection, op.request.ledger)
                created.append(rows[0][0])
            return created

        # One transaction, or part of a group commit with other runs' writes (see
        # SqliteDatabase.write): either way on disk before this returns.
        return await checkpoints.database.write("commit session entries and a checkpoint", commit)


class EngineCheckpoints(Protocol):
    """What an engine shared commit uses of the checkpoint store."""

    _switch_to_autocommit: bool

    def _save_statement(self, request: SaveRequest) -> sa.Executable: ...

    def _turn_statement(self, request: SaveRequest) -> sa.Executable: ...

    async def _write_row(
        self,
        action: str,
        statement: sa.Executable,
        params: Mapping[str, Any],
        request: SaveRequest,
        save: Mapping[str, Any],
        appends: Sequence[Mapping[str, Any]] = (),
        *,
        refuse_integrity: bool = False,
    ) -> Sequence[Any] | None: ...

    def _transaction(self, action: str) -> AbstractAsyncContextManager[AsyncConnection]: ...

    async def _write_ledger_on(
        self, connection: AsyncConnection, ledger: LedgerWrite | None
    ) -> None: ...


class EngineSessions(Protocol):
    """What an engine shared commit uses of the session store."""

    async def append_on(
        self,
        connection: AsyncConnection,
        entry: SessionEntry,
        expected_leaf_id: Any,
        params: dict[str, Any],
    ) -> None:
        """Append inside the transaction open on ``connection``."""
        ...


class _Refused(Exception):
    """The one-statement commit failed on an entry (a taken id, a foreign parent) and wrote
    nothing."""


class EngineTransaction(SqlTransaction):
    """A shared commit on the SQLAlchemy stores sharing one engine: one transaction.

    On PostgreSQL a turn's commit (one save, then appends to one session without a head
    check) is one statement in autocommit (:mod:`._pg_commit`); anything else runs statement
    by statement in one transaction (``sessions`` ``None``: the checkpoint store's saves
    alone).
    """

    def __init__(self, checkpoints: EngineCheckpoints, sessions: EngineSessions | None) -> None:
        super().__init__(takes_entries=sessions is not None)
        self._checkpoints = checkpoints
        self._sessions = sessions

    async def _commit(self, queue: Sequence[QueuedWrite], now: float) -> list[float]:
        save, appends = queue[0], queue[1:]
        if (
            self._checkpoints._switch_to_autocommit  # PostgreSQL
            and isinstance(save, QueuedSave)
            and appends
            and all(
                isinstance(op, QueuedAppend)
                and op.expected_leaf_id is UNSET
                and op.entry.session_id == appends[0].entry.session_id  # type: ignore[union-attr]
                for op in appends
            )
        ):
            try:
                return [await self._commit_turn(save, appends, now)]  # type: ignore[arg-type]
            except _Refused:
                pass  # nothing written; the statements one by one name the refusal
        return await self._commit_each(queue, now)

    async def _commit_turn(
        self, save: QueuedSave, appends: Sequence[QueuedAppend], now: float
    ) -> float:
        statement = self._checkpoints._turn_statement(save.request)
        saved = save_params(save.request, now)
        prepared = [op.prepared for op in appends]
        params = turn_params(saved, prepared)
        if save.request.ledger:
            params.update(ledger_params(save.request.ledger))
        # One statement in autocommit: atomic on its own, one round trip; or part of a group
        # commit with other runs' turns (see EngineCheckpointStore._write_row).
        try:
            row = await self._checkpoints._write_row(
                "commit session entries and a checkpoint",
                statement,
                params,
                save.request,
                saved,
                prepared,
                refuse_integrity=True,
            )
        except IntegrityRefused as exc:
            raise _Refused() from exc
        if row is None:  # pragma: no cover - the outer SELECT always returns one row
            raise CheckpointStoreError("a shared commit returned no row")
        created, inserted = row[0], row[1]
        if created is None:
            raise conflict(save.request.namespace, save.request.key)
        if inserted != len(appends):  # pragma: no cover - each row inserts or fails
            raise CheckpointStoreError("a shared commit wrote fewer entries than queued")
        return float(created)

    async def _commit_each(self, queue: Sequence[QueuedWrite], now: float) -> list[float]:
        created: list[float] = []
        action = "commit session entries and a checkpoint"
        async with self._checkpoints._transaction(action) as connection:
            for op in queue:
                if isinstance(op, QueuedAppend):
                    assert self._sessions is not None  # appends are refused without one
                    await self._sessions.append_on(
                        connection, op.entry, op.expected_leaf_id, dict(op.prepared)
                    )
                    continue
                statement = self._checkpoints._save_statement(op.request)
                row = (await connection.execute(statement, save_params(op.request, now))).first()
                if row is None:
                    raise conflict(op.request.namespace, op.request.key)
                await self._checkpoints._write_ledger_on(connection, op.request.ledger)
                created.append(row.created_at)
        return created
