"""The SQL stores on the thread-driven SQLite backend (``sqlite:///path.db``).

The siblings of the engine stores (:mod:`._engine_stores`): the same tables, statements and
rules (:mod:`._checkpoint_rows`, :mod:`._session_rows`), the statements compiled once to
SQLite text and run on one stdlib ``sqlite3`` connection (see :mod:`prism_store_sql._sqlite`).
Every call is one hand-off to a worker thread, except a one-row read (a checkpoint load, an
entry by id), which runs inline when the connection is free and needs no lock wait; an
append's head move and insert run in that one hand-off and one commit.
"""

from __future__ import annotations

import builtins
import sqlite3
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from prism_core.stores import (
    UNSET,
    BranchAndRunTail,
    CheckpointPage,
    CheckpointRecord,
    CheckpointStamp,
    DecisionPage,
    DecisionQuery,
    EffectPage,
    EffectQuery,
    LedgerWrite,
    PrefetchedBranchAndRunTail,
    RunWatch,
    SaveRequest,
    SessionEntry,
    check_name,
    check_status,
    conflict,
    list_arguments,
)

from ._checkpoint_rows import (
    check_range,
    decode_record,
    owner_scope,
    page_of,
    record_params,
    renew_params,
    save_params,
    saved_record,
)
from ._errors import SqlStoreConfigError
from ._schema import Tables
from ._session_rows import (
    append_params,
    branch_rows,
    decode_entry,
    head_moved,
    head_statement,
    not_inserted,
)
from ._sqlite import CompiledStatement, SqliteDatabase, compile_sqlite
from ._sqlite_branch import BranchTailStatements, decode_rows, read_rows, tuple_cursor
from ._sqlite_ledger import SqliteLedger
from ._sqlite_text import stored_statement
from ._store_types import SqlCheckpointStore, SqlSessionStore
from ._transaction import SqliteTransaction
from ._wakeups import sql_wakeups

__all__ = ("SqliteCheckpointStore", "SqliteSessionStore")


def _no_engine() -> SqlStoreConfigError:
    return SqlStoreConfigError(
        "this SQLite store runs on its own sqlite3 connection and has no SQLAlchemy engine; "
        "open it with a sqlite+aiosqlite:/// URL (or pass an AsyncEngine) for one"
    )


class _SqliteStore:
    """What both thread-driven stores share: the database, the closed flag and ``aclose``."""

    _db: SqliteDatabase
    _closed: bool

    @property
    def table_prefix(self) -> str:
        """The prefix of this store's table names."""
        return self._db.prefix

    @property
    def tables(self) -> Tables:
        """The table definitions of this store's prefix (built on first use: the hot
        statements are stored text, see :mod:`prism_store_sql._sqlite_text`)."""
        return self._db.tables

    @property
    def database(self) -> SqliteDatabase:
        """The connection this store runs on (shared with the stores built on it)."""
        return self._db

    @property
    def engine(self) -> AsyncEngine:
        """Not available: this store has a ``sqlite3`` connection, not an engine."""
        raise _no_engine()

    @property
    def closed(self) -> bool:
        """``True`` once :meth:`aclose` was called."""
        return self._closed

    def create_nothing(self) -> None:
        """Refuse a missing file or missing tables on first use instead of creating them
        (for every store on this connection); call it before the first use."""
        self._db.create_nothing()

    async def aclose(self) -> None:
        """Close this store; the connection closes with the last store on it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        await self._db.release()


class SqliteCheckpointStore(_SqliteStore, SqlCheckpointStore):
    """Checkpoints in ``<prefix>checkpoints`` of a SQLite file, on asyncio and trio.

    Build it with :func:`~prism_store_sql.create_sql_checkpoint_store` (``sqlite:///`` URL)
    or :func:`~prism_store_sql.open_sql_stores`.
    """

    def __init__(self, database: SqliteDatabase) -> None:
        # There is no engine; the database checks the schema when its connection opens.
        database.acquire()
        self._db = database
        self._closed = False
        # Stored text (see _sqlite_text): no SQLAlchemy objects are built for these.
        prefix = database.prefix
        self._load = stored_statement(prefix, "checkpoints.load")
        self._stamp = stored_statement(prefix, "checkpoints.stamp")
        self._create = stored_statement(prefix, "checkpoints.create")
        self._update = stored_statement(prefix, "checkpoints.update")
        self._upsert = stored_statement(prefix, "checkpoints.upsert")
        self._renew = stored_statement(prefix, "checkpoints.renew")
        self._delete = stored_statement(prefix, "checkpoints.delete")
        self._lists: dict[tuple[bool, bool], CompiledStatement] = {}
        self._by_status: dict[bool, CompiledStatement] = {}
        self._ledger = SqliteLedger(database)

    def save_statement(self, expected_version: int | None) -> CompiledStatement:
        """The compiled save statement for ``expected_version`` (``None``, ``0`` or ``n``)."""
        if expected_version is None:
            return self._upsert
        return self._create if expected_version == 0 else self._update

    def write_ledger_in(self, connection: sqlite3.Connection, ledger: LedgerWrite | None) -> None:
        """Write a save's ledger rows inside the transaction open on ``connection``."""
        self._ledger.write_in(connection, ledger)

    async def query_effects(self, query: EffectQuery) -> EffectPage:
        """The effect rows ``query`` matches (see :class:`~prism_core.stores.EffectLedger`)."""
        return await self._ledger.query_effects(query)

    async def query_decisions(self, query: DecisionQuery) -> DecisionPage:
        """The decision rows ``query`` matches, in the order they were written."""
        return await self._ledger.query_decisions(query)

    async def mark_in_doubt(
        self, run_id: str, tool_call_ids: Sequence[str], *, ownership: Mapping[str, str] | None
    ) -> int:
        """Move the named calls of ``run_id`` from ``dispatched`` to ``in_doubt``."""
        return await self._ledger.mark_in_doubt(run_id, tool_call_ids, ownership)

    async def erase_session(self, session_id: str, *, ownership: Mapping[str, str] | None) -> int:
        """Rewrite the session's effect and decision rows in their erased form."""
        return await self._ledger.erase_session(session_id, ownership)

    async def scrub_freed_space(self) -> None:
        """Rewrite the database file and truncate its WAL (see
        :class:`~prism_core.stores.FreedSpaceScrubber`)."""
        await self._ledger.scrub()

    def shared_transaction(self, sessions: object) -> SqliteTransaction | None:
        """One transaction over this store and ``sessions`` (one hand-off, one commit; see
        :func:`prism_core.stores.shared_transaction`), or ``None`` unless ``sessions`` is a
        SQLite session store on this very connection."""
        if (
            isinstance(sessions, SqliteSessionStore)
            and sessions.database is self._db
            and not (sessions.closed or self._closed)
        ):
            return SqliteTransaction(self, sessions)
        return None

    def checkpoint_transaction(self) -> SqliteTransaction:
        """One transaction over several saves of this store (one hand-off, one commit; see
        :class:`prism_core.stores.CheckpointBatchStore`)."""
        return SqliteTransaction(self, None)

    async def load(
        self, namespace: str, key: str, *, ownership: Mapping[str, str] | None = None
    ) -> CheckpointRecord | None:
        """The record, or ``None`` when absent or owned by someone else."""
        owner, params = record_params(namespace, key, ownership)
        text, values = self._load.text, self._load.params(params)

        def load(connection: sqlite3.Connection) -> Any:
            return tuple_cursor(connection).execute(text, values).fetchone()

        # One row by primary key: read inline when the connection is free (see
        # SqliteDatabase.read), as a run's pre-dispatch ownership check does every turn.
        row = await self._db.read("load a checkpoint", load)
        return decode_record(row, owner) if row is not None else None

    async def load_stamp(
        self, namespace: str, key: str, *, ownership: Mapping[str, str] | None = None
    ) -> CheckpointStamp | None:
        """The record's version and fencing token, or ``None`` when absent or owned by
        someone else (see :class:`~prism_core.stores.CheckpointStampReader`): two columns
        of one row, nothing decoded."""
        _, params = record_params(namespace, key, ownership)
        text, values = self._stamp.text, self._stamp.params(params)

        def stamp(connection: sqlite3.Connection) -> Any:
            return connection.execute(text, values).fetchone()

        row = await self._db.read("read a checkpoint's version", stamp)
        return None if row is None else CheckpointStamp(row[0], row[1])

    async def load_with_run_branch(
        self,
        namespace: str,
        key: str,
        *,
        ownership: Mapping[str, str] | None = None,
        sessions: object,
    ) -> tuple[CheckpointRecord | None, PrefetchedBranchAndRunTail | None]:
        """:meth:`load`, and in the same hand-off the branch and run tail the record's value
        names, read from ``sessions`` when it is a SQLite session store on this connection
        (see :class:`~prism_core.stores.CheckpointAndBranchLoader`); the
        read is ``None`` otherwise, or when it fails (the caller then reads as usual)."""
        if not (
            isinstance(sessions, SqliteSessionStore)
            and sessions.database is self._db
            and not sessions.closed
        ):
            return await self.load(namespace, key, ownership=ownership), None
        owner, params = record_params(namespace, key, ownership)
        text, values = self._load.text, self._load.params(params)
        statements = sessions._branch_tail

        def load(connection: sqlite3.Connection) -> tuple[Any, Any, Any]:
            row = tuple_cursor(connection).execute(text, values).fetchone()
            if row is None:
                return None, None, None
            record = decode_record(row, owner)
            ids = _run_branch_ids(record.value)
            if ids is None:
                return record, None, None
            try:
                return record, ids, read_rows(connection, statements, *ids)
            except sqlite3.Error:
                # The resume's own read meets this failure again, at its own step.
                if connection.in_transaction:
                    connection.rollback()
                return record, None, None

        # Inline when the reading connection is free (see SqliteDatabase.read): the branch is
        # a run's own transcript, and decoding it on the loop right after costs more than
        # reading it; a hand-off would add two thread wake-ups to every continue.
        record, ids, rows = await self._db.read("load a checkpoint", load)
        if ids is None:
            return record, None
        session_id, leaf_id, run_id = ids
        path, tail = rows
        return record, PrefetchedBranchAndRunTail(
            store=sessions,
            session_id=session_id,
            leaf_id=leaf_id,
            run_id=run_id,
            decode=lambda: decode_rows(path, tail, session_id, leaf_id),
        )

    async def save_request(self, request: SaveRequest) -> CheckpointRecord:
        """Write the record in one conditional statement (one commit) or raise
        ``CheckpointConflictError``; the rules of the engine store's save."""
        check_range(request)
        now = time.time()
        compiled = self.save_statement(request.expected_version)
        text, values = compiled.text, compiled.params(save_params(request, now))
        ledger = request.ledger

        def save(connection: sqlite3.Connection) -> Any:
            # fetchall: the statement (and so its autocommit) completes inside the hand-off.
            rows = connection.execute(text, values).fetchall()
            if rows and ledger:
                self._ledger.write_in(connection, ledger)
            return rows[0][0] if rows else None

        # A save with ledger rows is several statements: one transaction, still one commit.
        created_at = await self._db.write("save a checkpoint", save, single=not ledger)
        if created_at is None:
            raise conflict(request.namespace, request.key)
        return saved_record(request, created_at, now)

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
        """Replace the value of the record at exactly ``version`` (one statement, one commit),
        keeping its version; the rules of :meth:`SqlCheckpointStore.renew_lease`."""
        req, params = renew_params(
            namespace,
            key,
            value,
            version=version,
            ownership=ownership,
            fencing_token=fencing_token,
        )
        text, values = self._renew.text, self._renew.params(params)

        def renew(connection: sqlite3.Connection) -> bool:
            return bool(connection.execute(text, values).fetchall())

        if not await self._db.write("renew a lease", renew, single=True):
            raise conflict(req.namespace, req.key)

    async def delete(
        self, namespace: str, key: str, *, ownership: Mapping[str, str] | None = None
    ) -> bool:
        """Delete the record; ``False`` when absent or owned by someone else."""
        _, params = record_params(namespace, key, ownership)
        text, values = self._delete.text, self._delete.params(params)

        def delete(connection: sqlite3.Connection) -> bool:
            return bool(connection.execute(text, values).fetchall())

        return await self._db.write("delete a checkpoint", delete, single=True)

    def _list_statement(self, by_namespace: bool, after: bool) -> CompiledStatement:
        compiled = self._lists.get((by_namespace, after))
        if compiled is None:
            table = self._db.tables.checkpoints
            p = sa.bindparam
            statement = sa.select(table).where(table.c.owner == p("owner_scope"))
            if by_namespace:
                statement = statement.where(table.c.namespace == p("ns"))
            if after:
                statement = statement.where(
                    sa.tuple_(table.c.namespace, table.c.key)
                    > sa.tuple_(p("after_ns", type_=sa.Text()), p("after_k", type_=sa.Text()))
                )
            statement = statement.order_by(table.c.namespace, table.c.key).limit(p("lim"))
            compiled = self._lists[(by_namespace, after)] = compile_sqlite(statement)
        return compiled

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
        compiled = self._list_statement(namespace is not None, after is not None)
        params: dict[str, Any] = {"owner_scope": owner_scope(owner), "lim": limit + 1}
        if namespace is not None:
            params["ns"] = namespace
        if after is not None:
            params["after_ns"], params["after_k"] = after
        text, values = compiled.text, compiled.params(params)

        def fetch(connection: sqlite3.Connection) -> builtins.list[Any]:
            return connection.execute(text, values).fetchall()

        rows = await self._db.read_many("list checkpoints", fetch)
        return page_of(rows, owner, limit)

    def _status_statement(self, after: bool) -> CompiledStatement:
        compiled = self._by_status.get(after)
        if compiled is None:
            table = self._db.tables.checkpoints
            p = sa.bindparam
            statement = sa.select(table).where(
                table.c.namespace == p("ns"),
                table.c.owner == p("owner_scope"),
                table.c.status == p("st"),
            )
            if after:
                statement = statement.where(
                    sa.tuple_(table.c.namespace, table.c.key)
                    > sa.tuple_(p("after_ns", type_=sa.Text()), p("after_k", type_=sa.Text()))
                )
            statement = statement.order_by(table.c.namespace, table.c.key).limit(p("lim"))
            compiled = self._by_status[after] = compile_sqlite(statement)
        return compiled

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
        compiled = self._status_statement(after is not None)
        params: dict[str, Any] = {
            "ns": namespace,
            "owner_scope": owner_scope(owner),
            "st": status,
            "lim": limit + 1,
        }
        if after is not None:
            params["after_ns"], params["after_k"] = after
        text, values = compiled.text, compiled.params(params)

        def fetch(connection: sqlite3.Connection) -> builtins.list[Any]:
            return connection.execute(text, values).fetchall()

        rows = await self._db.read_many("list checkpoints by status", fetch)
        return page_of(rows, owner, limit)

    async def notify_runs(self) -> None:
        """Wake the workers watching this database and table prefix, in any process (see
        :class:`~prism_core.stores.RunWakeups` and :mod:`prism_store_sql._wakeups`)."""
        await sql_wakeups(self).notify_runs()

    def watch_runs(self) -> AbstractAsyncContextManager[RunWatch]:
        """Watch this database's and table prefix's run notifications (see
        :mod:`prism_store_sql._wakeups`)."""
        return sql_wakeups(self).watch_runs()


class SqliteSessionStore(_SqliteStore, SqlSessionStore):
    """Session entries in a SQLite file, on asyncio and trio; an append is one hand-off and
    one commit. Build it with :func:`~prism_store_sql.create_sql_session_store`."""

    def __init__(self, database: SqliteDatabase) -> None:
        database.acquire()
        self._db = database
        self._closed = False
        prefix = database.prefix
        self._heads = {
            name: stored_statement(prefix, f"sessions.{name}")
            for name in ("upsert_head", "create_head", "move_head")
        }
        self._insert_entry = stored_statement(prefix, "sessions.insert_entry")
        self._entry_exists = stored_statement(prefix, "sessions.entry_exists")
        self._list = stored_statement(prefix, "sessions.list")
        self._get = stored_statement(prefix, "sessions.get")
        self._branch = stored_statement(prefix, "sessions.branch")
        self._branch_tail = BranchTailStatements.for_prefix(prefix)
        self._ledger = SqliteLedger(database)

    async def delete_session(self, session_id: str) -> int:
        """Delete every entry of ``session_id`` (see :class:`~prism_core.stores.SessionDeleter`)."""
        return await self._ledger.delete_session(session_id)

    def append_in(
        self,
        connection: sqlite3.Connection,
        entry: SessionEntry,
        expected_leaf_id: Any,
        params: dict[str, Any],
    ) -> None:
        """Append inside the transaction open on ``connection`` (worker thread only)."""
        name = head_statement(expected_leaf_id)
        head = None if name is None else self._heads[name]
        rows = [] if head is None else connection.execute(head.text, head.params(params)).fetchall()
        if not rows:
            raise head_moved(entry)
        params["next_seq"] = rows[0][0]
        insert = self._insert_entry
        try:
            inserted = connection.execute(insert.text, insert.params(params)).fetchall()
        except sqlite3.IntegrityError as exc:
            raise not_inserted(entry, taken=True) from exc
        if not inserted:
            exists = self._entry_exists
            taken = connection.execute(exists.text, exists.params(params)).fetchone()
            raise not_inserted(entry, taken=taken is not None)

    async def append(self, entry: SessionEntry, *, expected_leaf_id: Any = UNSET) -> SessionEntry:
        """Append ``entry`` in one transaction; the rules of :meth:`SqlSessionStore.append`."""
        params = append_params(entry, expected_leaf_id)

        def append(connection: sqlite3.Connection) -> None:
            self.append_in(connection, entry, expected_leaf_id, params)

        await self._db.write("append a session entry", append)
        return entry

    async def list(self, session_id: str) -> builtins.list[SessionEntry]:
        """Every entry of the session, in append order."""
        text, params = self._list.text, self._list.params({"session": session_id})

        def fetch(connection: sqlite3.Connection) -> builtins.list[Any]:
            return tuple_cursor(connection).execute(text, params).fetchall()

        return [
            decode_entry(row) for row in await self._db.read_many("list session entries", fetch)
        ]

    async def get(self, entry_id: str) -> SessionEntry | None:
        """One entry by id, or ``None``."""
        text, params = self._get.text, self._get.params({"entry_id": entry_id})

        def fetch(connection: sqlite3.Connection) -> Any:
            return tuple_cursor(connection).execute(text, params).fetchone()

        row = await self._db.read("read a session entry", fetch)
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
        text = self._branch.text
        params = self._branch.params({"leaf": leaf_id, "session": session_id})

        def fetch(connection: sqlite3.Connection) -> builtins.list[Any]:
            return tuple_cursor(connection).execute(text, params).fetchall()

        rows = await self._db.read_many("read a session branch", fetch)
        return branch_rows(rows, session_id, leaf_id)

    async def read_branch_and_run_tail(
        self, session_id: str, leaf_id: str | None, run_id: str
    ) -> BranchAndRunTail:
        """The branch ending at ``leaf_id`` and the entries of ``run_id`` appended after it,
        in one hand-off and one read transaction, through the ``seq`` index (see
        :mod:`prism_store_sql._sqlite_branch` and
        :class:`~prism_core.stores.BranchAndRunTailReader`)."""
        sql = self._branch_tail

        def fetch(connection: sqlite3.Connection) -> tuple[builtins.list[Any], builtins.list[Any]]:
            return read_rows(connection, sql, session_id, leaf_id, run_id)

        path, tail = await self._db.read_many("read a session branch and a run's entries", fetch)
        return decode_rows(path, tail, session_id, leaf_id)


def _run_branch_ids(value: Any) -> tuple[str, str | None, str] | None:
    """``(session_id, leaf_id, run_id)`` of a run's checkpoint value, or ``None`` when they
    are not text (the resume refuses such a value before it reads the session)."""
    if type(value) is not dict:
        return None
    session_id, leaf_id, run_id = value.get("session_id"), value.get("leaf_id"), value.get("run_id")
    if (
        type(session_id) is str
        and type(run_id) is str
        and (leaf_id is None or type(leaf_id) is str)
    ):
        return session_id, leaf_id, run_id
    return None
