"""The session rows both SQL backends write and read: ``<prefix>session_entries`` and
``<prefix>session_heads`` statements, append parameters, entries decoded from rows, and the
refusals an append's outcome names.

An append is one transaction whose *first* statement moves the head row conditionally, so
the ``expected_leaf_id`` check and the head move are one atomic step that also takes the
session's write lock (the head row's lock on PostgreSQL, the database write lock on SQLite)
before anything is read:

- no ``expected_leaf_id``: upsert the head (``last_seq + 1``);
- ``expected_leaf_id=None``: insert the head row if absent (the session must be empty);
- ``expected_leaf_id=x``: ``UPDATE … WHERE head_id = x``.

No row back is a :class:`~prism_core.stores.SessionConflictError`. Then one
``INSERT … SELECT … WHERE <parent is an entry of the session> ON CONFLICT (id) DO NOTHING``
writes the entry with the head's new ``seq``; only when it inserts nothing does a second read
tell a taken id (a conflict) from a foreign or missing parent. An append is thus two
statements on the happy path. A branch read is one recursive query from the leaf up to the
root.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Sequence
from typing import Any

import attrs
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from prism_core.codec import dumps, unstructure
from prism_core.stores import (
    UNSET,
    BranchAndRunTail,
    SessionConflictError,
    SessionEntry,
    SessionEntryNotFoundError,
    decode_entry_columns,
    echo,
)

from ._schema import Tables

__all__ = (
    "SessionStatements",
    "append_params",
    "branch_and_tail",
    "branch_rows",
    "decode_entry",
    "head_moved",
    "head_statement",
    "not_inserted",
    "run_tail_result",
    "session_statements",
)

# SessionEntry fields with their own columns; every other field goes into the JSON payload.
_COLUMNS = ("id", "session_id", "parent_id", "kind", "run_id", "timestamp")


def _payload_json(entry: SessionEntry) -> str:
    data = unstructure(entry)
    payload = {name: value for name, value in data.items() if name not in _COLUMNS}
    try:
        return dumps(payload).decode("utf-8")
    except (TypeError, ValueError) as exc:
        raise ValueError(f"session entry {echo(entry.id)} cannot be stored as JSON: {exc}") from exc


def decode_entry(row: Sequence[Any]) -> SessionEntry:
    """The entry of one ``<prefix>session_entries`` row."""
    # Positions, not names: every read selects the entry columns first, in table order
    # (id, session_id, parent_id, seq, kind, payload, run_id, timestamp).
    return decode_entry_columns(row[5], row[0], row[1], row[2], row[4], row[6], row[7])


def append_params(entry: SessionEntry, expected_leaf_id: Any) -> dict[str, Any]:
    """The bound parameters of an append of ``entry``; raises ``TypeError`` for a non-entry
    and ``ValueError`` for a payload that is not JSON (before any I/O)."""
    if not isinstance(entry, SessionEntry):
        raise TypeError(f"append expects a SessionEntry, got {type(entry).__name__}")
    return {
        "entry_id": entry.id,
        "session": entry.session_id,
        "parent": entry.parent_id,
        "leaf": expected_leaf_id if isinstance(expected_leaf_id, str) else None,
        "entry_kind": entry.kind,
        "entry_payload": _payload_json(entry),
        "entry_run": entry.run_id,
        "entry_time": entry.timestamp,
    }


def head_statement(expected_leaf_id: Any) -> str | None:
    """The name of the head statement for ``expected_leaf_id`` (a
    :class:`SessionStatements` field), or ``None`` when no head can match it."""
    if expected_leaf_id is UNSET:
        return "upsert_head"
    if expected_leaf_id is None:
        return "create_head"
    if isinstance(expected_leaf_id, str):
        return "move_head"
    # Like the memory store: a leaf that is not an id never matches the head.
    return None


def head_moved(entry: SessionEntry) -> SessionConflictError:
    """The error for an append whose expected leaf is no longer the head."""
    return SessionConflictError(
        f"session {echo(entry.session_id)} moved: its head is no longer the expected leaf"
    )


def not_inserted(
    entry: SessionEntry, *, taken: bool
) -> SessionConflictError | SessionEntryNotFoundError:
    """The error for an entry row that was not inserted: its id is ``taken``, or its parent
    is not an entry of the session."""
    if taken:
        return SessionConflictError(f"entry id {echo(entry.id)} already exists")
    return SessionEntryNotFoundError(
        f"parent entry {echo(entry.parent_id)} is not in session {echo(entry.session_id)}"
    )


def branch_rows(
    rows: builtins.list[Any], session_id: str, leaf_id: str
) -> builtins.list[SessionEntry]:
    """The entries of a branch read's rows (root first); raises
    :class:`~prism_core.stores.SessionEntryNotFoundError` when the rows do not reach from
    the root to ``leaf_id``."""
    if not rows:
        raise SessionEntryNotFoundError(f"session {echo(session_id)} has no entry {echo(leaf_id)}")
    # By position, like ``decode_entry``: the rows may be plain tuples.
    root_parent = rows[0][2]
    if root_parent is not None:
        raise SessionEntryNotFoundError(
            f"session {echo(session_id)} has no entry {echo(root_parent)}"
        )
    return _decode_rows(rows)


def _decode_rows(rows: builtins.list[Any]) -> builtins.list[SessionEntry]:
    # ``decode_entry`` inlined: a branch read decodes every row of a transcript.
    decode = decode_entry_columns
    return [decode(row[5], row[0], row[1], row[2], row[4], row[6], row[7]) for row in rows]


def run_tail_result(
    rows: builtins.list[Any], session_id: str, leaf_id: str | None
) -> BranchAndRunTail:
    """The answer of a ``run_tail`` read: its branch rows (``part``, the ninth column, 0),
    then the run's rows."""
    split = next((i for i, row in enumerate(rows) if row[8] == 1), len(rows))
    return branch_and_tail(rows[:split], rows[split:], session_id, leaf_id)


def branch_and_tail(
    path: builtins.list[Any], tail: builtins.list[Any], session_id: str, leaf_id: str | None
) -> BranchAndRunTail:
    """The answer for a branch's rows (root first; checked by :func:`branch_rows`) and the
    run's later rows."""
    branch = [] if leaf_id is None else branch_rows(path, session_id, leaf_id)
    return BranchAndRunTail(path=branch, tail=_decode_rows(tail))


@attrs.frozen
class SessionStatements:
    """The session store's statements with bound parameters, built once per tables and
    dialect in a process (the stores on one prefix share them).

    Parameter names differ from column names: an ``INSERT`` would take a parameter named
    after a column as that column's value.
    """

    upsert_head: sa.Executable  # no expected_leaf_id
    create_head: sa.Executable  # expected_leaf_id=None
    move_head: sa.Executable  # expected_leaf_id=<id>
    insert_entry: sa.Executable
    entry_exists: sa.Executable
    list: sa.Executable
    get: sa.Executable
    branch: sa.Executable
    run_tail: sa.Executable  # the branch, then the run's entries after the leaf


@functools.lru_cache(maxsize=128)
def session_statements(tables: Tables, dialect: str) -> SessionStatements:
    """The :class:`SessionStatements` of ``tables`` for ``dialect`` (``"postgresql"`` or
    ``"sqlite"``)."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    entries, heads = tables.session_entries, tables.session_heads
    e, h = entries.c, heads.c

    def param(name: str, column: sa.Column[Any]) -> sa.BindParameter[Any]:
        return sa.bindparam(name, type_=column.type)

    entry_id, session = param("entry_id", e.id), param("session", e.session_id)
    parent, leaf = param("parent", e.parent_id), param("leaf", h.head_id)

    new_head = insert(heads).values(session_id=session, head_id=entry_id, last_seq=1)
    # The parent check rides in the INSERT: no row is inserted when the parent is not an
    # entry of this session, or (ON CONFLICT) when the id is taken.
    row = sa.select(
        entry_id,
        session,
        parent,
        param("next_seq", e.seq),
        param("entry_kind", e.kind),
        param("entry_payload", e.payload),
        param("entry_run", e.run_id),
        param("entry_time", e.timestamp),
    ).where(sa.or_(parent.is_(None), sa.exists().where(e.id == parent, e.session_id == session)))
    names = ["id", "session_id", "parent_id", "seq", "kind", "payload", "run_id", "timestamp"]

    alias = entries.alias("parent")
    branch = (
        sa.select(e.id, e.parent_id, sa.literal(0, sa.Integer).label("depth"))
        .where(e.id == leaf, e.session_id == session)
        .cte("branch", recursive=True)
    )
    # Each step looks up one parent by primary key, in a subquery run once per ancestor. As
    # a join (with or without the session in it), PostgreSQL may plan a scan of the whole
    # session or table per ancestor when the table has no statistics yet: 20 ms for a
    # 400-turn branch instead of 5. A parent is always in its child's session (the append
    # checks it); the rows are kept to the session once, after the walk, and a missing
    # parent ends the walk there (the caller names it).
    parent_of = (
        sa.select(alias.c.parent_id).where(alias.c.id == branch.c.parent_id).scalar_subquery()
    )
    branch = branch.union_all(
        sa.select(branch.c.parent_id, parent_of, branch.c.depth + 1).where(
            branch.c.parent_id.is_not(None)
        )
    )
    branch_path = (
        sa.select(
            entries, sa.literal(0, sa.Integer).label("part"), (0 - branch.c.depth).label("position")
        )
        .join(branch, e.id == branch.c.id)
        .where(e.session_id == session)
    )
    leaf_seq = sa.select(e.seq).where(e.id == leaf, e.session_id == session).scalar_subquery()
    # Entries of the run appended after the leaf: the (session_id, seq) index bounds the scan.
    tail_rows = sa.select(
        entries, sa.literal(1, sa.Integer).label("part"), e.seq.label("position")
    ).where(
        e.session_id == session,
        e.seq > sa.func.coalesce(leaf_seq, 0),
        e.run_id == sa.bindparam("run", type_=e.run_id.type),
    )
    run_tail = sa.union_all(branch_path, tail_rows).order_by(
        sa.literal_column("part"), sa.literal_column("position")
    )
    return SessionStatements(
        upsert_head=new_head.on_conflict_do_update(
            index_elements=[h.session_id],
            set_={"head_id": new_head.excluded.head_id, "last_seq": h.last_seq + 1},
        ).returning(h.last_seq),
        create_head=new_head.on_conflict_do_nothing(index_elements=[h.session_id]).returning(
            h.last_seq
        ),
        move_head=sa.update(heads)
        .where(h.session_id == session, h.head_id == leaf)
        .values(head_id=entry_id, last_seq=h.last_seq + 1)
        .returning(h.last_seq),
        insert_entry=insert(entries)
        .from_select(names, row)
        .on_conflict_do_nothing(index_elements=[e.id])
        .returning(e.id),
        entry_exists=sa.select(e.id).where(e.id == entry_id),
        list=sa.select(entries).where(e.session_id == session).order_by(e.seq),
        get=sa.select(entries).where(e.id == entry_id),
        branch=sa.select(entries)
        .join(branch, e.id == branch.c.id)
        .where(e.session_id == session)
        .order_by(branch.c.depth.desc()),
        run_tail=run_tail,
    )
