"""The SQLAlchemy statements of the SQLite branch-and-run-tail read (see :mod:`._sqlite_branch`),
below the backends: :mod:`._sqlite_text` compiles them into the stored text the read runs."""

from __future__ import annotations

import sqlalchemy as sa

from ._schema import Tables

__all__ = ("branch_tail_statements",)


def branch_tail_statements(tables: Tables) -> dict[str, sa.Executable]:
    """The read's statements for ``tables`` (the recursive branch query is the session
    store's own)."""
    entries = tables.session_entries
    e = entries.c
    session = sa.bindparam("session", type_=e.session_id.type)
    seq = sa.bindparam("leaf_seq", type_=e.seq.type)
    return {
        "leaf_seq": sa.select(e.seq).where(
            e.id == sa.bindparam("leaf", type_=e.id.type), e.session_id == session
        ),
        "below": sa.select(entries)
        .where(e.session_id == session, e.seq <= seq)
        .order_by(e.seq.desc()),
        "after": sa.select(entries)
        .where(
            e.session_id == session,
            e.seq > seq,
            e.run_id == sa.bindparam("run", type_=e.run_id.type),
        )
        .order_by(e.seq),
    }
