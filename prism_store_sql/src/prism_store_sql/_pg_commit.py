"""A PostgreSQL shared commit in one statement: a checkpoint save and a turn's appends.

The shared commit of a durable turn (one save, then entries appended to one session without
a head check) is one ``INSERT``/``UPDATE`` of the checkpoint, one head move and one multi-row
insert of the entries. On PostgreSQL they run as data-modifying CTEs of one statement, sent
in autocommit: one round trip and one commit, and all or nothing because it is one statement.

- ``cp``: the save (the same create / update / upsert as a plain save), ``RETURNING
  created_at``; nothing below it is written when it writes nothing (a refused save);
- ``hd``: the head moved by the number of entries, only when ``cp`` wrote a row;
- ``ins``: the entries (from arrays, ``unnest … WITH ORDINALITY``), numbered after the old
  head. An entry whose parent is neither in the session nor an earlier entry of the batch
  gets no ``seq`` (``NULL``), and a taken id hits the primary key: either way the statement
  fails with an integrity error and writes nothing, and the caller names the refusal by
  running the writes one by one.

The statement returns the save's ``created_at`` (``NULL``: refused, nothing written). A save
that carries ledger rows writes them in the same statement (:mod:`._pg_ledger`).
"""

from __future__ import annotations

import functools
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from ._pg_ledger import with_ledger
from ._schema import Tables

__all__ = ("turn_statement", "turn_params")


@functools.lru_cache(maxsize=256)
def turn_statement(save: sa.Executable, tables: Tables, ledger: bool = False) -> sa.Executable:
    """The one-statement commit of ``save`` (a save statement ``RETURNING created_at``) and
    the appends bound by :func:`turn_params`, with the save's ledger rows when ``ledger``
    (bound by :func:`~._pg_ledger.ledger_params`); one of each per save statement in a
    process."""
    entries, heads = tables.session_entries, tables.session_heads
    e, h = entries.c, heads.c
    session = sa.bindparam("session", type_=e.session_id.type)
    count = sa.bindparam("count", type_=sa.BigInteger())

    def batch(name: str) -> Any:
        # Every array is text[]: asyncpg has a built-in codec for text[] but not float8[],
        # and a type without one costs each new connection a catalog introspection query
        # (8-11 ms) on its first turn commit. The times go as exact decimal text and are cast.
        names = ("ids", "parents", "kinds", "payloads", "runs", "times")
        arrays = [sa.bindparam(n, type_=postgresql.ARRAY(sa.Text())) for n in names]
        return (
            sa.func.unnest(*arrays)
            .table_valued("id", "parent_id", "kind", "payload", "run_id", "ts", with_ordinality="k")
            .render_derived(name=name)
        )

    cp = save.cte("cp")  # type: ignore[attr-defined]
    new_head = postgresql.insert(heads).from_select(
        ["session_id", "head_id", "last_seq"],
        sa.select(session, sa.bindparam("last_id", type_=h.head_id.type), count).select_from(cp),
    )
    hd = (
        new_head.on_conflict_do_update(
            index_elements=[h.session_id],
            set_={"head_id": new_head.excluded.head_id, "last_seq": h.last_seq + count},
        )
        .returning(h.last_seq)
        .cte("hd")
    )
    rows, earlier = batch("batch"), batch("earlier")
    parent_ok = sa.or_(
        rows.c.parent_id.is_(None),
        sa.exists().where(e.id == rows.c.parent_id, e.session_id == session),
        sa.exists().where(earlier.c.id == rows.c.parent_id, earlier.c.k < rows.c.k),
    )
    ins = (
        postgresql.insert(entries)
        .from_select(
            ["id", "session_id", "parent_id", "seq", "kind", "payload", "run_id", "timestamp"],
            sa.select(
                rows.c.id,
                session,
                rows.c.parent_id,
                sa.case((parent_ok, hd.c.last_seq - count + rows.c.k), else_=sa.null()),
                rows.c.kind,
                rows.c.payload,
                rows.c.run_id,
                sa.cast(rows.c.ts, sa.Double()),
            ).select_from(rows.join(hd, sa.true())),
        )
        .returning(e.id)
        .cte("ins")
    )
    statement = sa.select(
        sa.select(cp.c.created_at).scalar_subquery().label("created_at"),
        sa.select(sa.func.count()).select_from(ins).scalar_subquery().label("inserted"),
    )
    return with_ledger(statement, cp, tables) if ledger else statement


def turn_params(save: dict[str, Any], appends: list[dict[str, Any]]) -> dict[str, Any]:
    """The bound parameters of :func:`turn_statement`: the save's, and the appends' (each
    from ``append_params``) as arrays."""
    return {
        **save,
        "session": appends[0]["session"],
        "last_id": appends[-1]["entry_id"],
        "count": len(appends),
        "ids": [a["entry_id"] for a in appends],
        "parents": [a["parent"] for a in appends],
        "kinds": [a["entry_kind"] for a in appends],
        "payloads": [a["entry_payload"] for a in appends],
        "runs": [a["entry_run"] for a in appends],
        # repr() is the shortest text that reads back as the same double.
        "times": [repr(float(a["entry_time"])) for a in appends],
    }
