"""Shared commits on the SQL stores: session appends and checkpoint saves in one transaction.

The store side of :class:`prism_core.durable.StoreTransaction`. Writes are validated when they
are queued and run when the ``async with`` block ends: on SQLite in one worker-thread hand-off
(``BEGIN IMMEDIATE`` … ``COMMIT``), on a SQLAlchemy engine in one ``engine.begin()``
transaction (a durable turn's commit on PostgreSQL: one statement, see :mod:`._pg_commit`).
The first refusal rolls everything back and is raised from the block.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import attrs

from prism_core.durable import CheckpointRecord, CheckpointStoreError, SaveRequest, conflict
from prism_core.records import UNSET, SessionEntry

from ._checkpoints import _validated, save_params, saved_record
from ._direct import IntegrityRefused
from ._errors import SqlStoreConfigError
from ._pg_commit import turn_params
from ._sessions import append_params

if TYPE_CHECKING:
    from ._checkpoints import SqlCheckpointStore
    from ._sessions import SqlSessionStore
    from ._sqlite_stores import SqliteCheckpointStore, SqliteSessionStore

__all__ = ("EngineTransaction", "SqlTransaction", "SqliteTransaction")


@attrs.frozen
class _Append:
    entry: SessionEntry
    expected_leaf_id: Any
    params: dict[str, Any]


@attrs.frozen
class _Save:
    request: SaveRequest


class SqlTransaction:
    """Queued writes of one shared commit; subclasses run them against their backend."""

    def __init__(self) -> None:
        self._ops: list[_Append | _Save] = []
        self._state = "new"
        self._entries: tuple[SessionEntry, ...] = ()
        self._records: tuple[CheckpointRecord, ...] = ()

    @property
    def entries(self) -> tuple[SessionEntry, ...]:
        """The entries written, once committed (empty before)."""
        return self._entries

    @property
    def records(self) -> tuple[CheckpointRecord, ...]:
        """The checkpoint records written, once committed (empty before)."""
        return self._records

    def _check_open(self) -> None:
        if self._state != "open":
            raise SqlStoreConfigError(
                "queue writes inside 'async with transaction:'; this transaction is "
                + ("not entered yet" if self._state == "new" else "finished")
            )

    def append(self, entry: SessionEntry, *, expected_leaf_id: Any = UNSET) -> None:
        """Queue a session append (validated now, written at the end of the block)."""
        self._check_open()
        params = append_params(entry, expected_leaf_id)
        self._ops.append(_Append(entry, expected_leaf_id, params))

    def save(
        self,
        namespace: str,
        key: str,
        value: Any,
        *,
        version: int,
        expected_version: int | None = None,
        ownership: Mapping[str, str] | None = None,
        fencing_token: int | None = None,
        metadata: Mapping[str, str] | None = None,
        category: str | None = None,
    ) -> None:
        """Queue a checkpoint save (validated now, written at the end of the block)."""
        self._check_open()
        request = _validated(
            namespace,
            key,
            value,
            version=version,
            expected_version=expected_version,
            ownership=ownership,
            fencing_token=fencing_token,
            metadata=metadata,
            category=category,
        )
        self._ops.append(_Save(request))

    async def __aenter__(self) -> Self:
        if self._state != "new":
            raise SqlStoreConfigError("a transaction is entered once; start a new one")
        self._state = "open"
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        ops, self._ops = self._ops, []
        self._state = "done"
        if exc_type is not None or not ops:
            return
        now = time.time()
        created = await self._commit(ops, now)
        saves = [op.request for op in ops if isinstance(op, _Save)]
        self._records = tuple(saved_record(r, c, now) for r, c in zip(saves, created, strict=True))
        self._entries = tuple(op.entry for op in ops if isinstance(op, _Append))

    async def _commit(self, ops: list[_Append | _Save], now: float) -> list[float]:
        """Write ``ops`` in one transaction; the ``created_at`` of each save, in order."""
        raise NotImplementedError


class SqliteTransaction(SqlTransaction):
    """A shared commit on the thread-driven SQLite stores: one hand-off, one commit."""

    def __init__(self, checkpoints: SqliteCheckpointStore, sessions: SqliteSessionStore) -> None:
        super().__init__()
        self._checkpoints = checkpoints
        self._sessions = sessions

    async def _commit(self, ops: list[_Append | _Save], now: float) -> list[float]:
        checkpoints, sessions = self._checkpoints, self._sessions
        statements = [
            checkpoints.save_statement(op.request.expected_version)
            if isinstance(op, _Save)
            else None
            for op in ops
        ]
        saves = [
            statement.params(save_params(op.request, now))
            if isinstance(op, _Save) and statement is not None
            else None
            for op, statement in zip(ops, statements, strict=True)
        ]

        def commit(connection: sqlite3.Connection) -> list[float]:
            created: list[float] = []
            connection.execute("BEGIN IMMEDIATE")
            for op, statement, values in zip(ops, statements, saves, strict=True):
                if isinstance(op, _Append):
                    sessions.append_in(connection, op.entry, op.expected_leaf_id, dict(op.params))
                    continue
                assert statement is not None
                assert values is not None
                rows = connection.execute(statement.text, values).fetchall()
                if not rows:
                    raise conflict(op.request.namespace, op.request.key)
                created.append(rows[0][0])
            connection.execute("COMMIT")
            return created

        return await checkpoints.database.run("commit session entries and a checkpoint", commit)


class _Refused(Exception):
    """The one-statement commit failed on an entry (a taken id, a foreign parent) and wrote
    nothing."""


class EngineTransaction(SqlTransaction):
    """A shared commit on the SQLAlchemy stores sharing one engine: one transaction.

    On PostgreSQL a turn's commit (one save, then appends to one session without a head
    check) is one statement in autocommit (:mod:`._pg_commit`); anything else runs statement
    by statement in one transaction.
    """

    def __init__(self, checkpoints: SqlCheckpointStore, sessions: SqlSessionStore) -> None:
        super().__init__()
        self._checkpoints = checkpoints
        self._sessions = sessions

    async def _commit(self, ops: list[_Append | _Save], now: float) -> list[float]:
        save, appends = ops[0], ops[1:]
        if (
            self._checkpoints._switch_to_autocommit  # PostgreSQL
            and isinstance(save, _Save)
            and appends
            and all(
                isinstance(op, _Append)
                and op.expected_leaf_id is UNSET
                and op.entry.session_id == appends[0].entry.session_id  # type: ignore[union-attr]
                for op in appends
            )
        ):
            try:
                return [await self._commit_turn(save, appends, now)]  # type: ignore[arg-type]
            except _Refused:
                pass  # nothing written; the statements one by one name the refusal
        return await self._commit_each(ops, now)

    async def _commit_turn(self, save: _Save, appends: list[_Append], now: float) -> float:
        statement = self._checkpoints._turn_statement(save.request)
        params = turn_params(save_params(save.request, now), [op.params for op in appends])
        # One statement in autocommit: atomic on its own, one round trip.
        try:
            row = await self._checkpoints._first_row(
                "commit session entries and a checkpoint",
                statement,
                params,
                write=True,
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

    async def _commit_each(self, ops: list[_Append | _Save], now: float) -> list[float]:
        created: list[float] = []
        action = "commit session entries and a checkpoint"
        async with self._checkpoints._transaction(action) as connection:
            for op in ops:
                if isinstance(op, _Append):
                    await self._sessions.append_on(
                        connection, op.entry, op.expected_leaf_id, dict(op.params)
                    )
                    continue
                statement = self._checkpoints._save_statement(op.request)
                row = (await connection.execute(statement, save_params(op.request, now))).first()
                if row is None:
                    raise conflict(op.request.namespace, op.request.key)
                created.append(row.created_at)
        return created
