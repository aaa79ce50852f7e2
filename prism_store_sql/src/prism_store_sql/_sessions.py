"""The SQL ``SessionStore``: ``<prefix>session_entries`` and ``<prefix>session_heads``.

An append is one transaction whose *first* statement moves the head row conditionally, so
the ``expected_leaf_id`` check and the head move are one atomic step that also takes the
session's write lock (the head row's lock on PostgreSQL, the database write lock on SQLite)
before anything is read:

- no ``expected_leaf_id``: upsert the head (``last_seq + 1``);
- ``expected_leaf_id=None``: insert the head row if absent (the session must be empty);
- ``expected_leaf_id=x``: ``UPDATE … WHERE head_id = x``.

No row back is a :class:`~prism_core.sessions.SessionConflictError`. Then the new id and the
parent are checked in one read, and the entry row is inserted with the head's new ``seq``.
A branch read is one recursive query from the leaf up to the root.
"""

from __future__ import annotations

import builtins
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from prism_core.codec import dumps, loads, structure, unstructure
from prism_core.sessions import UNSET, SessionConflictError, SessionEntry, SessionEntryNotFoundError

from ._base import SqlStoreBase
from ._engine import open_engine
from ._schema import DEFAULT_TABLE_PREFIX, build_tables

__all__ = ("SqlSessionStore", "create_sql_session_store")

# SessionEntry fields with their own columns; every other field goes into the JSON payload.
_COLUMNS = ("id", "session_id", "parent_id", "kind", "run_id", "timestamp")


def _payload_json(entry: SessionEntry) -> str:
    data = unstructure(entry)
    payload = {name: value for name, value in data.items() if name not in _COLUMNS}
    try:
        return dumps(payload).decode("utf-8")
    except (TypeError, ValueError) as exc:
        raise ValueError(f"session entry {entry.id!r} cannot be stored as JSON: {exc}") from exc


def _entry(row: sa.Row[Any]) -> SessionEntry:
    data = loads(row.payload)
    data.update(
        id=row.id,
        session_id=row.session_id,
        parent_id=row.parent_id,
        kind=row.kind,
        run_id=row.run_id,
        timestamp=row.timestamp,
    )
    return structure(data, SessionEntry)


class SqlSessionStore(SqlStoreBase):
    """Session entries on SQLite or PostgreSQL (asyncio only).

    Build it with :func:`create_sql_session_store`. The head of a session is the entry
    appended last; appends to one session are serialised by the database.
    """

    def _insert(self) -> Any:
        return postgresql.insert if self.engine.dialect.name == "postgresql" else sqlite.insert

    async def _move_head(
        self, connection: AsyncConnection, entry: SessionEntry, expected_leaf_id: Any
    ) -> int | None:
        heads = self._tables.session_heads
        statement: sa.Executable
        if expected_leaf_id is UNSET:
            insert = self._insert()(heads).values(
                session_id=entry.session_id, head_id=entry.id, last_seq=1
            )
            statement = insert.on_conflict_do_update(
                index_elements=[heads.c.session_id],
                set_={"head_id": insert.excluded.head_id, "last_seq": heads.c.last_seq + 1},
            ).returning(heads.c.last_seq)
        elif expected_leaf_id is None:
            statement = (
                self._insert()(heads)
                .values(session_id=entry.session_id, head_id=entry.id, last_seq=1)
                .on_conflict_do_nothing(index_elements=[heads.c.session_id])
                .returning(heads.c.last_seq)
            )
        elif isinstance(expected_leaf_id, str):
            statement = (
                sa.update(heads)
                .where(heads.c.session_id == entry.session_id, heads.c.head_id == expected_leaf_id)
                .values(head_id=entry.id, last_seq=heads.c.last_seq + 1)
                .returning(heads.c.last_seq)
            )
        else:
            # Like the memory store: a leaf that is not an id never matches the head.
            return None
        seq = (await connection.execute(statement)).scalar()
        return int(seq) if seq is not None else None

    async def append(self, entry: SessionEntry, *, expected_leaf_id: Any = UNSET) -> SessionEntry:
        """Append ``entry``; its ``parent_id`` must be ``None`` or an entry of the same session.

        Raises :class:`~prism_core.sessions.SessionConflictError` when the session's head is
        no longer ``expected_leaf_id`` or the entry id exists, and
        :class:`~prism_core.sessions.SessionEntryNotFoundError` for a parent outside the
        session. Nothing is written when it raises.
        """
        if not isinstance(entry, SessionEntry):
            raise TypeError(f"append expects a SessionEntry, got {type(entry).__name__}")
        payload = _payload_json(entry)
        entries = self._tables.session_entries
        async with self._transaction("append a session entry") as connection:
            seq = await self._move_head(connection, entry, expected_leaf_id)
            if seq is None:
                raise SessionConflictError(
                    f"session {entry.session_id!r} moved: its head is no longer the expected leaf"
                )
            wanted = [entry.id] if entry.parent_id is None else [entry.id, entry.parent_id]
            found = {
                row.id: row.session_id
                for row in await connection.execute(
                    sa.select(entries.c.id, entries.c.session_id).where(entries.c.id.in_(wanted))
                )
            }
            if entry.id in found:
                raise SessionConflictError(f"entry id {entry.id!r} already exists")
            if entry.parent_id is not None and found.get(entry.parent_id) != entry.session_id:
                raise SessionEntryNotFoundError(
                    f"parent entry {entry.parent_id!r} is not in session {entry.session_id!r}"
                )
            try:
                await connection.execute(
                    sa.insert(entries).values(
                        id=entry.id,
                        session_id=entry.session_id,
                        parent_id=entry.parent_id,
                        seq=seq,
                        kind=entry.kind,
                        payload=payload,
                        run_id=entry.run_id,
                        timestamp=entry.timestamp,
                    )
                )
            except sa.exc.IntegrityError as exc:
                # Another transaction inserted the same id after our read.
                raise SessionConflictError(f"entry id {entry.id!r} already exists") from exc
        return entry

    async def list(self, session_id: str) -> builtins.list[SessionEntry]:
        """Every entry of the session, in append order."""
        entries = self._tables.session_entries
        statement = (
            sa.select(entries).where(entries.c.session_id == session_id).order_by(entries.c.seq)
        )
        async with self._read("list session entries") as connection:
            rows = (await connection.execute(statement)).all()
        return [_entry(row) for row in rows]

    async def get(self, entry_id: str) -> SessionEntry | None:
        """One entry by id, or ``None``."""
        entries = self._tables.session_entries
        async with self._read("read a session entry") as connection:
            statement = sa.select(entries).where(entries.c.id == entry_id)
            row = (await connection.execute(statement)).first()
        return _entry(row) if row is not None else None

    async def read_branch_path(
        self, session_id: str, leaf_id: str | None
    ) -> builtins.list[SessionEntry]:
        """Root-to-leaf entries of the branch ending at ``leaf_id``, in one recursive query.

        Raises :class:`~prism_core.sessions.SessionEntryNotFoundError` when the session has
        no such entry.
        """
        if leaf_id is None:
            return []
        entries = self._tables.session_entries
        parent = entries.alias("parent")
        branch = (
            sa.select(entries.c.id, entries.c.parent_id, sa.literal(0, sa.Integer).label("depth"))
            .where(entries.c.id == leaf_id, entries.c.session_id == session_id)
            .cte("branch", recursive=True)
        )
        branch = branch.union_all(
            sa.select(parent.c.id, parent.c.parent_id, branch.c.depth + 1).where(
                parent.c.id == branch.c.parent_id, parent.c.session_id == session_id
            )
        )
        statement = (
            sa.select(entries)
            .join(branch, entries.c.id == branch.c.id)
            .order_by(branch.c.depth.desc())
        )
        async with self._read("read a session branch") as connection:
            rows = (await connection.execute(statement)).all()
        if not rows:
            raise SessionEntryNotFoundError(f"session {session_id!r} has no entry {leaf_id!r}")
        if rows[0].parent_id is not None:
            raise SessionEntryNotFoundError(
                f"session {session_id!r} has no entry {rows[0].parent_id!r}"
            )
        return [_entry(row) for row in rows]


def create_sql_session_store(
    url_or_engine: str | URL | AsyncEngine,
    *,
    create_schema: bool = True,
    table_prefix: str = DEFAULT_TABLE_PREFIX,
) -> SqlSessionStore:
    """A session store on SQLite or PostgreSQL.

    Accepts the same URLs and engines as
    :func:`~prism_store_sql.create_sql_checkpoint_store`, never disposes of an engine it was
    handed, and creates (``create_schema=True``) or requires the tables on first use.
    """
    tables = build_tables(table_prefix)
    return SqlSessionStore(open_engine(url_or_engine), tables, create_schema=create_schema)
