"""The SQL stores on a SQLAlchemy ``AsyncEngine``: PostgreSQL (asyncpg), explicit async URLs
(``sqlite+aiosqlite://``) and a host's engine; asyncio only.

Each call runs the rows modules' statements (:mod:`._checkpoint_rows`, :mod:`._session_rows`)
on a connection of the engine: a save is one conditional statement, an append the head move
and the insert in one transaction. On asyncpg the hot-path statements go straight to the
driver (see :mod:`._direct`), and concurrent writes and loads of one checkpoint store share
statements (group commit, see :mod:`._pg_group`). Build them with the factories of
:mod:`._open`.
"""

from __future__ import annotations

import builtins
import logging
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from prism_core.stores import (
    UNSET,
    BranchAndRunTail,
    CheckpointPage,
    CheckpointRecord,
    CheckpointStamp,
    RunWatch,
    SaveRequest,
    SessionEntry,
    check_name,
    check_status,
    conflict,
    list_arguments,
)

from ._base import EngineStoreBase
from ._checkpoint_rows import (
    check_range,
    checkpoint_statements,
    decode_record,
    owner_scope,
    page_of,
    record_params,
    renew_params,
    save_params,
    saved_record,
)
from ._direct import IntegrityRefused
from ._engine import EngineHandle
from ._engine_ledger import EngineLedger
from ._ledger_sql import ledger_statements
from ._pg_append import append_statement
from ._pg_commit import turn_statement
from ._pg_group import GroupCommit, GroupedLoad, GroupedWrite, save_op
from ._schema import Tables
from ._session_rows import (
    append_params,
    branch_rows,
    decode_entry,
    head_moved,
    head_statement,
    not_inserted,
    run_tail_result,
    session_statements,
)
from ._store_types import SqlCheckpointStore, SqlSessionStore
from ._transaction import EngineTransaction
from ._wakeups import sql_wakeups

__all__ = ("EngineCheckpointStore", "EngineSessionStore")

logger = logging.getLogger(__package__ or __name__)


class EngineCheckpointStore(EngineLedger, SqlCheckpointStore):
    """A :class:`~prism_store_sql.SqlCheckpointStore` on a SQLAlchemy engine (asyncio), with
    its effect ledger (:class:`~._engine_ledger.EngineLedger`)."""

    def __init__(
        self,
        handle: EngineHandle,
        tables: Tables,
        *,
        create_schema: bool,
        group_commit: int = 1,
    ) -> None:
        super().__init__(handle, tables, create_schema=create_schema)
        self._sql = checkpoint_statements(tables.checkpoints, handle.backend)
        direct = self._direct
        #: Concurrent writes (and loads) share statements, up to ``group_commit`` of them
        #: (asyncpg only; ``1``: each alone).
        self._group = (
            GroupCommit(direct, tables, group_commit)
            if direct is not None and group_commit > 1
            else None
        )

    async def load(
        self, namespace: str, key: str, *, ownership: Mapping[str, str] | None = None
    ) -> CheckpointRecord | None:
        """The record, or ``None`` when absent or owned by someone else."""
        owner, params = record_params(namespace, key, ownership)
        action = "load a checkpoint"
        group = self._group
        if group is None:
            row = await self._first_row(action, self._sql.load, params)
        else:
            await self._prepare()
            row = await group.load(GroupedLoad(action, self._sql.load, params))
        return decode_record(row, owner) if row is not None else None

    async def load_stamp(
        self, namespace: str, key: str, *, ownership: Mapping[str, str] | None = None
    ) -> CheckpointStamp | None:
        """The record's version and fencing token, or ``None`` when absent or owned by
        someone else (see :class:`~prism_core.stores.CheckpointStampReader`): two columns
        of one row, nothing decoded."""
        _, params = record_params(namespace, key, ownership)
        action = "read a checkpoint's version"
        group = self._group
        if group is None:
            row = await self._first_row(action, self._sql.stamp, params)
        else:
            await self._prepare()
            row = await group.load(GroupedLoad(action, self._sql.stamp, params, stamp=True))
        return None if row is None else CheckpointStamp(row[0], row[1])

    def _save_statement(self, request: SaveRequest) -> sa.Executable:
        return self._sql.save(request.expected_version)

    def _turn_statement(self, request: SaveRequest) -> sa.Executable:
        """The one-statement commit of ``request`` and a turn's appends (PostgreSQL; built
        once per kind of save and prefix in a process, so each is compiled once)."""
        return turn_statement(
            self._save_statement(request), self._tables, ledger=bool(request.ledger)
        )

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
    ) -> Sequence[Any] | None:
        """The row of the one write ``statement`` (with ``params``): a save of ``request``
        (``save``: its ``save_params``) and the ``appends`` of its turn; in a group commit
        with other runs' writes when a write is in flight (see :mod:`._pg_group`), else
        alone. With ``refuse_integrity`` a constraint violation raises
        :class:`~._direct.IntegrityRefused`."""
        group = self._group
        if group is None or request.ledger:
            # A group's statement carries no ledger rows: such a write goes alone.
            return await self._first_row(
                action, statement, params, write=True, refuse_integrity=refuse_integrity
            )
        await self._prepare()
        write = GroupedWrite(
            action,
            statement,
            params,
            op=save_op(request.expected_version),
            save=save,
            appends=appends,
            refuse_integrity=refuse_integrity,
        )
        return await group.write(write)

    def shared_transaction(self, sessions: object) -> EngineTransaction | None:
        """One transaction over this store and ``sessions`` (see
        :func:`prism_core.stores.shared_transaction`), or ``None`` unless ``sessions`` is a
        SQL session store on the same engine and table prefix."""
        if (
            isinstance(sessions, EngineSessionStore)
            and sessions.engine is self.engine
            and sessions.table_prefix == self.table_prefix
        ):
            return EngineTransaction(self, sessions)
        return None

    def checkpoint_transaction(self) -> EngineTransaction:
        """One transaction over several saves of this store (see
        :class:`prism_core.stores.CheckpointBatchStore`)."""
        return EngineTransaction(self, None)

    async def save_request(self, request: SaveRequest) -> CheckpointRecord:
        """Write the record in one conditional statement or raise ``CheckpointConflictError``.

        Raises :class:`~prism_core.stores.InvalidCheckpointError` for a number a ``BIGINT``
        cannot hold (before any I/O) and :class:`~prism_core.stores.CheckpointStoreError`
        when the database fails; a failed save writes nothing.
        """
        if request.ledger:
            return await self._save_with_ledger(request)
        check_range(request)
        now = time.time()
        params = save_params(request, now)
        row = await self._write_row(
            "save a checkpoint", self._save_statement(request), params, request, params
        )
        if row is None:
            logger.debug(
                "checkpoint save %s/%s lost its conditional write", request.namespace, request.key
            )
            raise conflict(request.namespace, request.key)
        return saved_record(request, row[0], now)

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
        """Replace the value of the record at exactly ``version`` in one conditional
        statement, keeping its version (see :class:`~prism_core.stores.LeaseRenewalStore`);
        ``CheckpointConflictError`` otherwise."""
        request, params = renew_params(
            namespace,
            key,
            value,
            version=version,
            ownership=ownership,
            fencing_token=fencing_token,
        )
        row = await self._first_row("renew a lease", self._sql.renew, params, write=True)
        if row is None:
            raise conflict(request.namespace, request.key)

    async def delete(
        self, namespace: str, key: str, *, ownership: Mapping[str, str] | None = None
    ) -> bool:
        """Delete the record; ``False`` when absent or owned by someone else."""
        _, params = record_params(namespace, key, ownership)
        async with self._write("delete a checkpoint") as connection:
            row = (await connection.execute(self._sql.delete, params)).first()
        return row is not None

    async def list(
        self,
        namespace: str | None = None,
        *,
        ownership: Mapping[str, str] | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> CheckpointPage:
        """Records visible to ``ownership`` (in ``namespace`` when given), in key order."""
        owner, after = list_arguments(namespace, ownership, limit, cursor)
        table = self._tables.checkpoints
        statement = sa.select(table).where(table.c.owner == owner_scope(owner))
        if namespace is not None:
            statement = statement.where(table.c.namespace == namespace)
        if after is not None:
            statement = statement.where(
                sa.tuple_(table.c.namespace, table.c.key) > sa.tuple_(*after)
            )
        statement = statement.order_by(table.c.namespace, table.c.key).limit(limit + 1)
        async with self._read("list checkpoints") as connection:
            rows = (await connection.execute(statement)).all()
        return page_of(rows, owner, limit)

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
        ``status``, in key order, read through the ``(namespace, owner, status, key)`` index."""
        owner, after = list_arguments(check_name(namespace, "namespace"), ownership, limit, cursor)
        check_status(status)
        table = self._tables.checkpoints
        statement = sa.select(table).where(
            table.c.namespace == namespace,
            table.c.owner == owner_scope(owner),
            table.c.status == status,
        )
        if after is not None:
            statement = statement.where(
                sa.tuple_(table.c.namespace, table.c.key) > sa.tuple_(*after)
            )
        statement = statement.order_by(table.c.namespace, table.c.key).limit(limit + 1)
        async with self._read("list checkpoints by status") as connection:
            rows = (await connection.execute(statement)).all()
        return page_of(rows, owner, limit)

    async def notify_runs(self) -> None:
        """Wake the workers watching this database and table prefix, in any process (see
        :class:`~prism_core.stores.RunWakeups` and :mod:`prism_store_sql._wakeups`)."""
        await sql_wakeups(self).notify_runs()

    def watch_runs(self) -> AbstractAsyncContextManager[RunWatch]:
        """Watch this database's and table prefix's run notifications (see
        :mod:`prism_store_sql._wakeups`)."""
        return sql_wakeups(self).watch_runs()


class EngineSessionStore(EngineStoreBase, SqlSessionStore):
    """A :class:`~prism_store_sql.SqlSessionStore` on a SQLAlchemy engine (asyncio)."""

    def __init__(self, handle: EngineHandle, tables: Tables, *, create_schema: bool) -> None:
        super().__init__(handle, tables, create_schema=create_schema)
        self._sql = session_statements(tables, handle.backend)

    async def append(self, entry: SessionEntry, *, expected_leaf_id: Any = UNSET) -> SessionEntry:
        """Append ``entry``; its ``parent_id`` must be ``None`` or an entry of the same session.

        Raises :class:`~prism_core.stores.SessionConflictError` when the session's head is
        no longer ``expected_leaf_id`` or the entry id exists, and
        :class:`~prism_core.stores.SessionEntryNotFoundError` for a parent outside the
        session. Nothing is written when it raises.
        """
        params = append_params(entry, expected_leaf_id)
        head = head_statement(expected_leaf_id)
        if self._direct is not None and head is not None:
            await self._append_direct(entry, head, params)
            return entry
        async with self._transaction("append a session entry") as connection:
            await self.append_on(connection, entry, expected_leaf_id, params)
        return entry

    async def _append_direct(self, entry: SessionEntry, head: str, params: dict[str, Any]) -> None:
        """The append as one autocommitted statement on asyncpg (see :mod:`._pg_append`)."""
        action = "append a session entry"
        statement = append_statement(head, self._tables)
        try:
            row = await self._first_row(action, statement, params, refuse_integrity=True)
        except IntegrityRefused as refused:
            taken = await self._first_row(action, self._sql.entry_exists, params)
            raise not_inserted(entry, taken=taken is not None) from refused.__cause__
        if row is None or row[0] is None:
            raise head_moved(entry)

    async def append_on(
        self,
        connection: AsyncConnection,
        entry: SessionEntry,
        expected_leaf_id: Any,
        params: dict[str, Any],
    ) -> None:
        """Append inside the transaction open on ``connection`` (``params`` from
        :func:`~._session_rows.append_params`); raises like :meth:`append` and leaves the
        rollback to the transaction's owner."""
        head = head_statement(expected_leaf_id)
        seq = (
            None
            if head is None
            else (await connection.execute(getattr(self._sql, head), params)).scalar()
        )
        if seq is None:
            raise head_moved(entry)
        params["next_seq"] = seq
        try:
            inserted = (await connection.execute(self._sql.insert_entry, params)).first()
        except sa.exc.IntegrityError as exc:
            raise not_inserted(entry, taken=True) from exc
        if inserted is None:
            taken = (await connection.execute(self._sql.entry_exists, params)).first()
            raise not_inserted(entry, taken=taken is not None)

    async def list(self, session_id: str) -> builtins.list[SessionEntry]:
        """Every entry of the session, in append order."""
        async with self._read("list session entries") as connection:
            rows = (await connection.execute(self._sql.list, {"session": session_id})).all()
        return [decode_entry(row) for row in rows]

    async def delete_session(self, session_id: str) -> int:
        """Delete every entry of ``session_id`` and its head, in one transaction; the number
        of entries deleted (see :class:`~prism_core.stores.SessionDeleter`)."""
        sql = ledger_statements(self._tables, self._handle.backend)
        params = {"session": session_id}
        async with self._transaction("delete a session") as connection:
            deleted = (await connection.execute(sql.delete_entries, params)).rowcount
            await connection.execute(sql.delete_head, params)
        return max(deleted, 0)

    async def get(self, entry_id: str) -> SessionEntry | None:
        """One entry by id, or ``None``."""
        async with self._read("read a session entry") as connection:
            row = (await connection.execute(self._sql.get, {"entry_id": entry_id})).first()
        return decode_entry(row) if row is not None else None

    async def read_branch_path(
        self, session_id: str, leaf_id: str | None
    ) -> builtins.list[SessionEntry]:
        """Root-to-leaf entries of the branch ending at ``leaf_id``, in one recursive query.

        Raises :class:`~prism_core.stores.SessionEntryNotFoundError` when the session has
        no such entry.
        """
        if leaf_id is None:
            return []
        params = {"leaf": leaf_id, "session": session_id}
        rows = await self._all_rows("read a session branch", self._sql.branch, params)
        return branch_rows(rows, session_id, leaf_id)

    async def read_branch_and_run_tail(
        self, session_id: str, leaf_id: str | None, run_id: str
    ) -> BranchAndRunTail:
        """The branch ending at ``leaf_id`` and the entries of ``run_id`` appended after it,
        in one query (see :class:`~prism_core.stores.BranchAndRunTailReader`)."""
        params = {"leaf": leaf_id, "session": session_id, "run": run_id}
        action = "read a session branch and a run's entries"
        rows = await self._all_rows(action, self._sql.run_tail, params)
        return run_tail_result(rows, session_id, leaf_id)
