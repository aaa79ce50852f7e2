"""The SQLAlchemy statements of the SQLite branch-and-run-tail read (see :mod:`._sqlite_branch`),
below the backends: :mod:`._sqlite_text` compiles them into the stored text the read runs."""

from __future__ import annotations

import sqlalchemy as sa

from ._schema import Tables

__all__ = ("BRANCH_READ_COLUMNS", "branch_tail_statements")

#: The columns the read selects, in this order: the session is the one read, and ``seq``
#: only orders the rows.
BRANCH_READ_COLUMNS = ("id", "parent_id", "kind", "payload", "run_id", "timestamp")


def branch_tail_statements(tables: Tables) -> dict[str, sa.Executable]:
    """The read's statements for ``tables`` (the recursive branch query is the session
    store's own)."""
    entries = tables.session_entries
    e = entries.c
    columns = [e[name] for name in BRANCH_READ_COLUMNS]
    session = sa.bindparam("session", type_=e.session_id.type)
    leaf = sa.bindparam("leaf", type_=e.id.type)
    run = sa.bindparam("run", type_=e.run_id.type)
    seq = sa.bindparam("leaf_seq", type_=e.seq.type)
    found = entries.alias("leaf")
    leaf_seq = (
        sa.select(found.c.seq)
        .where(found.c.id == leaf, found.c.session_id == session)
        .scalar_subquery()
    )
    return {
        "leaf_seq": sa.select(e.seq).where(e.id == leaf, e.session_id == session),
        # Newest first: the run's rows after the leaf, then the leaf and every row below it.
        "from_leaf": sa.select(*columns)
        .where(e.session_id == session, sa.or_(e.run_id == run, e.seq <= leaf_seq))
        .order_by(e.seq.desc()),
        "after": sa.select(*columns)
        .where(e.session_id == session, e.seq > seq, e.run_id == run)
        .order_by(e.seq),
    }
