"""The statements of a PostgreSQL group commit: many writes in one statement, many
checkpoint loads in one query.

A group's writes (checkpoint saves, each with the entries of its turn when it is a turn's
shared commit) are sent as arrays, one element per write (``m``) and one per entry (``r``),
and written by one statement of data-modifying CTEs, autocommitted as one: one round trip,
one commit for the whole group. Its text does not depend on the group's size or mix, so
each connection prepares it once. Each write is exactly the statement it would run alone,
applied row by row:

- ``cu``, ``cc``, ``cs``: the saves with ``expected_version=n`` (``UPDATE … WHERE owner
  matches AND version = n AND version < new AND <fencing ok>``), ``0`` (``INSERT … ON
  CONFLICT DO NOTHING``) and none (``INSERT … ON CONFLICT DO UPDATE … WHERE <owner matches>
  AND <version above> AND <fencing ok>``), as in :mod:`._checkpoint_rows`; a refused save
  writes no row;
- ``hd``: the head of each written turn's session moved by its number of entries;
- ``ins``: the entries of the written turns, numbered after their session's old head. An
  entry whose parent is neither in its session nor an earlier entry of its turn gets no
  ``seq`` (``NULL``) and a taken id hits the primary key: either fails the whole statement
  with an integrity error, and the group is then written one write at a time.

It returns one row per written save (``namespace``, ``key``, ``created_at``) and the number
of entries inserted. Two writes of one group never touch the same row: no two share a
checkpoint key or a session (the group is made so, see :mod:`._pg_group`).

Every array is ``text[]`` (asyncpg encodes it with a built-in codec; any other array type
costs each new connection a catalog query); numbers go as their exact decimal text and are
cast back.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from ._schema import Tables

__all__ = (
    "GroupStatements",
    "SAVE_OPS",
    "group_statements",
    "load_params",
    "write_params",
)

#: The op code of a save in the group's arrays, by ``expected_version`` kind.
SAVE_OPS = {"create": "c", "update": "u", "upsert": "s"}

_MEMBER = (
    "op",
    "ns",
    "k",
    "owner",
    "ver",
    "exp",
    "tok",
    "cat",
    "val",
    "meta",
    "now",
    "st",
    "sess",
    "last_id",
    "n",
)
_ENTRY = ("sess", "pos", "id", "parent", "kind", "payload", "run", "ts")
_LOAD = ("ns", "k", "owner")


@attrs.frozen
class GroupStatements:
    """The group write and the batched load of one table prefix."""

    write: sa.Executable
    load: sa.Executable


def _arrays(name: str, columns: tuple[str, ...]) -> Any:
    arrays = [sa.bindparam(f"{name}_{c}", type_=postgresql.ARRAY(sa.Text())) for c in columns]
    return sa.func.unnest(*arrays).table_valued(*columns).render_derived(name=name)


def _op(code: str) -> Any:
    return sa.literal_column(f"'{code}'")


@functools.lru_cache(maxsize=64)
def group_statements(tables: Tables) -> GroupStatements:
    """The :class:`GroupStatements` of ``tables`` (built once per prefix in a process)."""
    t, entries, heads = tables.checkpoints, tables.session_entries, tables.session_heads
    big: sa.BigInteger = sa.BigInteger()
    double: sa.Double[float] = sa.Double()
    m = sa.select(_arrays("m", _MEMBER)).cte("m")

    def fencing_ok(token: Any) -> Any:
        # ``<= NULL`` is never true, so without a token only an unfenced record passes.
        return sa.or_(t.c.fencing_token.is_(None), t.c.fencing_token <= token)

    changes = {
        "version": sa.cast(m.c.ver, big),
        "fencing_token": sa.cast(m.c.tok, big),
        "category": m.c.cat,
        "value": m.c.val,
        "metadata": m.c.meta,
        "updated_at": sa.cast(m.c.now, double),
        "status": m.c.st,
    }
    written = (t.c.namespace, t.c.key, t.c.created_at)
    cu = (
        sa.update(t)
        .where(
            m.c.op == _op(SAVE_OPS["update"]),
            t.c.namespace == m.c.ns,
            t.c.key == m.c.k,
            t.c.owner == m.c.owner,
            t.c.version == sa.cast(m.c.exp, big),
            t.c.version < sa.cast(m.c.ver, big),
            fencing_ok(sa.cast(m.c.tok, big)),
        )
        .values(changes)
        .returning(*written)
        .cte("cu")
    )
    columns = ["namespace", "key", "owner", "created_at", *changes]
    rows = [m.c.ns, m.c.k, m.c.owner, sa.cast(m.c.now, double), *changes.values()]

    def insert(op: str) -> Any:
        return postgresql.insert(t).from_select(
            columns, sa.select(*rows).where(m.c.op == _op(SAVE_OPS[op]))
        )

    cc = (
        insert("create")
        .on_conflict_do_nothing(index_elements=[t.c.namespace, t.c.key])
        .returning(*written)
        .cte("cc")
    )
    upsert = insert("upsert")
    excluded = upsert.excluded
    cs = (
        upsert.on_conflict_do_update(
            index_elements=[t.c.namespace, t.c.key],
            set_={name: excluded[name] for name in changes},
            where=sa.and_(
                t.c.owner == excluded.owner,
                t.c.version < excluded.version,
                fencing_ok(excluded.fencing_token),
            ),
        )
        .returning(*written)
        .cte("cs")
    )
    w = sa.union_all(
        *(sa.select(c.c.namespace, c.c.key, c.c.created_at) for c in (cu, cc, cs))
    ).cte("w")

    h = heads.c
    new_head = postgresql.insert(heads).from_select(
        ["session_id", "head_id", "last_seq"],
        sa.select(m.c.sess, m.c.last_id, sa.cast(m.c.n, big))
        .select_from(m.join(w, sa.and_(w.c.namespace == m.c.ns, w.c.key == m.c.k)))
        .where(m.c.sess.is_not(None)),
    )
    hd = (
        new_head.on_conflict_do_update(
            index_elements=[h.session_id],
            set_={
                "head_id": new_head.excluded.head_id,
                "last_seq": h.last_seq + new_head.excluded.last_seq,
            },
        )
        .returning(h.session_id, h.last_seq)
        .cte("hd")
    )

    e = entries.c
    r = sa.select(_arrays("r", _ENTRY)).cte("r")
    earlier = r.alias("earlier")
    parent_ok = sa.or_(
        r.c.parent.is_(None),
        sa.exists().where(e.id == r.c.parent, e.session_id == r.c.sess),
        sa.exists().where(
            earlier.c.id == r.c.parent,
            earlier.c.sess == r.c.sess,
            sa.cast(earlier.c.pos, big) < sa.cast(r.c.pos, big),
        ),
    )
    seq = hd.c.last_seq - sa.cast(m.c.n, big) + sa.cast(r.c.pos, big)
    ins = (
        postgresql.insert(entries)
        .from_select(
            ["id", "session_id", "parent_id", "seq", "kind", "payload", "run_id", "timestamp"],
            sa.select(
                r.c.id,
                r.c.sess,
                r.c.parent,
                sa.case((parent_ok, seq), else_=sa.null()),
                r.c.kind,
                r.c.payload,
                r.c.run,
                sa.cast(r.c.ts, double),
            ).select_from(r.join(hd, hd.c.session_id == r.c.sess).join(m, m.c.sess == r.c.sess)),
        )
        .returning(e.id)
        .cte("ins")
    )
    write = sa.select(
        w.c.namespace,
        w.c.key,
        w.c.created_at,
        sa.select(sa.func.count()).select_from(ins).scalar_subquery().label("inserted"),
    )

    q = _arrays("q", _LOAD)
    load = sa.select(t).select_from(
        t.join(q, sa.and_(t.c.namespace == q.c.ns, t.c.key == q.c.k, t.c.owner == q.c.owner))
    )
    return GroupStatements(write=write, load=load)


def _number(value: int | float | None) -> str | None:
    # repr() is an int's digits and the shortest text that reads back as the same double.
    return None if value is None else repr(value)


def write_params(
    writes: Sequence[tuple[str, Mapping[str, Any], Sequence[Mapping[str, Any]]]],
) -> dict[str, list[str | None]]:
    """The bound arrays of :attr:`GroupStatements.write` for ``writes``: each an op code
    (:data:`SAVE_OPS`), the save's parameters (``save_params``) and its turn's appends
    (``append_params`` each; none for a plain save)."""
    saves = [save for _, save, _ in writes]
    turns = [appends for _, _, appends in writes]
    sessions = [appends[0]["session"] if appends else None for appends in turns]
    entries = [
        (session, position, append)
        for session, appends in zip(sessions, turns, strict=True)
        for position, append in enumerate(appends, 1)
    ]
    return {
        "m_op": [op for op, _, _ in writes],
        "m_ns": [s["ns"] for s in saves],
        "m_k": [s["k"] for s in saves],
        "m_owner": [s["owner_scope"] for s in saves],
        "m_ver": [repr(s["new_version"]) for s in saves],
        "m_exp": [_number(s["expected"]) for s in saves],
        "m_tok": [_number(s["token"]) for s in saves],
        "m_cat": [s["cat"] for s in saves],
        "m_val": [s["val"] for s in saves],
        "m_meta": [s["meta"] for s in saves],
        "m_now": [repr(float(s["now"])) for s in saves],
        "m_st": [s["st"] for s in saves],
        "m_sess": sessions,
        "m_last_id": [appends[-1]["entry_id"] if appends else None for appends in turns],
        "m_n": [repr(len(appends)) if appends else None for appends in turns],
        "r_sess": [session for session, _, _ in entries],
        "r_pos": [repr(position) for _, position, _ in entries],
        "r_id": [a["entry_id"] for _, _, a in entries],
        "r_parent": [a["parent"] for _, _, a in entries],
        "r_kind": [a["entry_kind"] for _, _, a in entries],
        "r_payload": [a["entry_payload"] for _, _, a in entries],
        "r_run": [a["entry_run"] for _, _, a in entries],
        "r_ts": [repr(float(a["entry_time"])) for _, _, a in entries],
    }


def load_params(loads: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """The bound arrays of :attr:`GroupStatements.load` for ``loads`` (each a load's
    parameters: ``ns``, ``k``, ``owner_scope``)."""
    return {
        "q_ns": [p["ns"] for p in loads],
        "q_k": [p["k"] for p in loads],
        "q_owner": [p["owner_scope"] for p in loads],
    }
