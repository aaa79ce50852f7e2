"""A PostgreSQL session append in one statement: the head move and the entry's insert.

Without a durable run, every entry is its own append (the kernel appends as it goes). As a
transaction that is four round trips on PostgreSQL (``BEGIN``, the head move, the insert,
``COMMIT``) and SQLAlchemy's execution layer around each; a durable turn commits its
entries in one statement (:mod:`._pg_commit`). This is the same shape for one entry, sent in
autocommit on the raw asyncpg connection (:mod:`._direct`): one round trip, one commit, all
or nothing because it is one statement.

- ``hd``: the head statement of the append's ``expected_leaf_id`` (upsert, create or move,
  as in :mod:`._session_rows`), ``RETURNING last_seq``; no row back when the head is not
  the expected leaf, and then nothing below it is written;
- ``ins``: the entry, numbered with the head's new ``last_seq``. An entry whose parent is
  not an entry of the session gets no ``seq`` (``NULL``) and a taken id hits the primary
  key: either fails the statement with an integrity error and writes nothing (the head move
  included), and the caller names the refusal with one read.

The statement returns the head's new ``last_seq`` (``NULL``: the head moved, nothing
written).
"""

from __future__ import annotations

import functools
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from ._schema import Tables

__all__ = ("append_statement",)


@functools.lru_cache(maxsize=128)
def append_statement(head: str, tables: Tables) -> sa.Executable:
    """The one-statement append for the head statement named ``head`` (``upsert_head``,
    ``create_head`` or ``move_head``, see :func:`~._session_rows.head_statement`), bound by
    :func:`~._session_rows.append_params`; one of each per prefix in a process."""
    entries, heads = tables.session_entries, tables.session_heads
    e, h = entries.c, heads.c

    def param(name: str, column: sa.Column[Any]) -> sa.BindParameter[Any]:
        return sa.bindparam(name, type_=column.type)

    entry_id, session = param("entry_id", e.id), param("session", e.session_id)
    parent, leaf = param("parent", e.parent_id), param("leaf", h.head_id)
    new_head = postgresql.insert(heads).values(session_id=session, head_id=entry_id, last_seq=1)
    moved: Any
    if head == "upsert_head":
        moved = new_head.on_conflict_do_update(
            index_elements=[h.session_id],
            set_={"head_id": new_head.excluded.head_id, "last_seq": h.last_seq + 1},
        )
    elif head == "create_head":
        moved = new_head.on_conflict_do_nothing(index_elements=[h.session_id])
    elif head == "move_head":
        moved = (
            sa.update(heads)
            .where(h.session_id == session, h.head_id == leaf)
            .values(head_id=entry_id, last_seq=h.last_seq + 1)
        )
    else:
        raise ValueError(f"unknown head statement {head!r}")
    hd = moved.returning(h.last_seq).cte("hd")
    parent_ok = sa.or_(parent.is_(None), sa.exists().where(e.id == parent, e.session_id == session))
    ins = (
        postgresql.insert(entries)
        .from_select(
            ["id", "session_id", "parent_id", "seq", "kind", "payload", "run_id", "timestamp"],
            sa.select(
                entry_id,
                session,
                parent,
                sa.case((parent_ok, hd.c.last_seq), else_=sa.null()),
                param("entry_kind", e.kind),
                param("entry_payload", e.payload),
                param("entry_run", e.run_id),
                param("entry_time", e.timestamp),
            ).select_from(hd),
        )
        .returning(e.id)
        .cte("ins")
    )
    return sa.select(
        sa.select(hd.c.last_seq).scalar_subquery().label("last_seq"),
        sa.select(sa.func.count()).select_from(ins).scalar_subquery().label("inserted"),
    )
