"""The effect ledger's rows on both SQL backends: statements, bound parameters, queries and
the pages decoded from rows (the rules are ``prism_core.stores.EffectLedger``'s).

A save that carries ledger rows (``SaveRequest.ledger``) writes them in its own transaction,
after its checkpoint statement and only when that wrote a row: each effect is one upsert on
``(run_id, call_id)`` that keeps the row's ``seq`` (its place in the order), plus one insert
per index term; each decision one insert that keeps the first write. A list query starts from
the most selective index it has: a term's ``(term, seq)`` rows when it filters by approver
or argument, else the ``(owner, column, seq)`` index of an equality, and reads rows in
``seq`` order. The engine store runs these statements through SQLAlchemy (on PostgreSQL a
save's rows ride its one statement, see :mod:`._pg_ledger`), the SQLite store compiles them
to ``sqlite3`` text; neither is imported here.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import attrs
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from prism_core.codec import loads
from prism_core.stores import (
    CORRUPT_CHECKPOINT_CODE,
    CheckpointStoreError,
    DecisionPage,
    DecisionQuery,
    EffectPage,
    EffectQuery,
    LedgerDecision,
    LedgerEffect,
    effect_from_json,
    encode_ledger_cursor,
    owner_key,
)

from ._schema import Tables

__all__ = (
    "LedgerStatements",
    "decision_page",
    "decision_params",
    "decision_query",
    "effect_page",
    "effect_params",
    "effect_query",
    "ledger_statements",
    "term_params",
)

#: Every argument term starts with this (``prism_core.stores.effect_terms``); an erasure drops
#: them and keeps the approvers' terms.
ARG_TERMS = ("arg:", "arg;")


@attrs.frozen
class LedgerStatements:
    """The ledger's fixed statements for one prefix and dialect (built once per process)."""

    upsert_effect: sa.Executable
    add_term: sa.Executable
    add_decision: sa.Executable
    mark_in_doubt: sa.Executable
    session_effects: sa.Executable
    set_effect_record: sa.Executable
    drop_arg_terms: sa.Executable
    session_decisions: sa.Executable
    set_decision_record: sa.Executable
    delete_entries: sa.Executable
    delete_head: sa.Executable


@functools.lru_cache(maxsize=128)
def ledger_statements(tables: Tables, dialect: str) -> LedgerStatements:
    """The :class:`LedgerStatements` of ``tables`` for ``dialect`` (``"postgresql"`` or
    ``"sqlite"``)."""
    p = sa.bindparam
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    effects, terms, decisions = tables.effects, tables.effect_terms, tables.decisions
    e, d = effects.c, decisions.c
    new_effect = insert(effects).values(
        run_id=p("e_run"),
        call_id=p("e_call"),
        session_id=p("e_session"),
        owner=p("e_owner"),
        tool_name=p("e_tool"),
        idempotency_key=p("e_key"),
        status=p("e_status"),
        started_at=p("e_started"),
        record=p("e_record"),
    )
    changed = ("session_id", "tool_name", "idempotency_key", "status", "started_at", "record")
    upsert_effect = new_effect.on_conflict_do_update(
        index_elements=[e.run_id, e.call_id],
        set_={name: new_effect.excluded[name] for name in changed},
        # A row is rewritten only by its own owner's runs.
        where=e.owner == new_effect.excluded.owner,
    )
    of_call = sa.and_(e.run_id == p("e_run"), e.call_id == p("e_call"), e.owner == p("e_owner"))
    add_term = (
        insert(terms)
        .from_select(["term", "seq"], sa.select(p("t_term", type_=sa.Text()), e.seq).where(of_call))
        .on_conflict_do_nothing(index_elements=[terms.c.term, terms.c.seq])
    )
    add_decision = (
        insert(decisions)
        .values(
            run_id=p("d_run"),
            position=p("d_position"),
            session_id=p("d_session"),
            owner=p("d_owner"),
            decided_at=p("d_decided"),
            record=p("d_record"),
        )
        .on_conflict_do_nothing(index_elements=[d.run_id, d.position])
    )
    entries, heads = tables.session_entries, tables.session_heads
    return LedgerStatements(
        upsert_effect=upsert_effect,
        add_term=add_term,
        add_decision=add_decision,
        mark_in_doubt=sa.update(effects)
        .where(of_call, e.status == "dispatched")
        .values(status="in_doubt")
        .returning(e.seq),
        session_effects=sa.select(e.seq, e.status, e.record)
        .where(e.owner == p("owner"), e.session_id == p("session"))
        .order_by(e.seq),
        set_effect_record=sa.update(effects).where(e.seq == p("row")).values(record=p("text")),
        drop_arg_terms=sa.delete(terms).where(
            terms.c.seq == p("row"), terms.c.term >= ARG_TERMS[0], terms.c.term < ARG_TERMS[1]
        ),
        session_decisions=sa.select(d.seq, d.record)
        .where(d.owner == p("owner"), d.session_id == p("session"))
        .order_by(d.seq),
        set_decision_record=sa.update(decisions).where(d.seq == p("row")).values(record=p("text")),
        delete_entries=sa.delete(entries).where(entries.c.session_id == p("session")),
        delete_head=sa.delete(heads).where(heads.c.session_id == p("session")),
    )


def effect_params(effect: LedgerEffect) -> dict[str, Any]:
    """The bound parameters of :attr:`LedgerStatements.upsert_effect` for ``effect``."""
    record = effect.record
    return {
        "e_run": record.run_id,
        "e_call": record.tool_call_id,
        "e_session": record.session_id,
        "e_owner": owner_key(record.ownership),
        "e_tool": record.tool_name,
        "e_key": record.idempotency_key,
        "e_status": record.status,
        "e_started": record.started_at,
        "e_record": effect.text,
    }


def term_params(effect: LedgerEffect, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The bound parameters of :attr:`LedgerStatements.add_term`, one per term of ``effect``
    (``params``: its :func:`effect_params`)."""
    of_call = {"e_run": params["e_run"], "e_call": params["e_call"], "e_owner": params["e_owner"]}
    return [{**of_call, "t_term": term} for term in effect.terms]


def decision_params(decision: LedgerDecision) -> dict[str, Any]:
    """The bound parameters of :attr:`LedgerStatements.add_decision`."""
    return {
        "d_run": decision.run_id,
        "d_position": decision.position,
        "d_session": decision.session_id,
        "d_owner": owner_key(decision.ownership),
        "d_decided": decision.decided_at,
        "d_record": decision.text,
    }


_EQUALITIES = ("tool_name", "status", "run_id", "idempotency_key", "session_id")


@functools.lru_cache(maxsize=512)
def _effect_query(tables: Tables, shape: tuple[Any, ...]) -> sa.Select[Any]:
    equalities, terms, since, until, after = shape
    p = sa.bindparam
    effects = tables.effects
    e = effects.c
    source: Any = effects
    order: Any = e.seq
    conditions: list[Any] = [e.owner == p("owner")]
    if terms:
        # Driven by the first term's (term, seq) rows, in seq order.
        first = tables.effect_terms.alias("t0")
        source = first.join(effects, effects.c.seq == first.c.seq)
        conditions.append(first.c.term == p("term0"))
        order = first.c.seq
        if after:
            conditions.append(first.c.seq > p("after"))
        for index in range(1, terms):
            other = tables.effect_terms.alias(f"t{index}")
            source = source.join(
                other, sa.and_(other.c.seq == first.c.seq, other.c.term == p(f"term{index}"))
            )
    elif after:
        conditions.append(e.seq > p("after"))
    for name in equalities:
        conditions.append(e[name] == p(f"eq_{name}"))
    if since:
        # The rows that start inside the window come after the first of them (by seq) that
        # does: that seq, read from the started index, makes the rows in order one range of
        # the seq index rather than a filter over every older row (a recent window is the
        # common one). ``seq + 0``: an aggregate the planner cannot turn into a seq walk.
        w = effects.alias("w").c
        first_seq = sa.select(sa.func.min(w.seq + sa.literal_column("0"))).where(
            w.owner == p("owner"), w.started_at >= p("since")
        )
        conditions.append(e.started_at >= p("since"))
        conditions.append(order >= first_seq.scalar_subquery())
    if until:
        conditions.append(e.started_at < p("until"))
    return (
        sa.select(e.seq, e.status, e.record)
        .select_from(source)
        .where(*conditions)
        .order_by(order)
        .limit(p("lim"))
    )


def effect_query(tables: Tables, query: EffectQuery) -> tuple[sa.Select[Any], dict[str, Any]]:
    """The statement that answers ``query`` (one per shape of query in a process) and its
    bound parameters; it selects up to ``limit + 1`` rows (the extra one means "more")."""
    equalities = tuple(name for name in _EQUALITIES if getattr(query, name) is not None)
    shape = (
        equalities,
        len(query.terms),
        query.since is not None,
        query.until is not None,
        query.after is not None,
    )
    params: dict[str, Any] = {"owner": owner_key(query.owner), "lim": query.limit + 1}
    for name in equalities:
        params[f"eq_{name}"] = getattr(query, name)
    for index, term in enumerate(query.terms):
        params[f"term{index}"] = term
    if query.since is not None:
        params["since"] = query.since
    if query.until is not None:
        params["until"] = query.until
    if query.after is not None:
        params["after"] = query.after
    return _effect_query(tables, shape), params


def _corrupt(what: str, row: Any, problem: str) -> CheckpointStoreError:
    return CheckpointStoreError(
        f"ledger {what} row {row} cannot be read: {problem}", code=CORRUPT_CHECKPOINT_CODE
    )


def effect_page(rows: Sequence[Any], limit: int) -> EffectPage:
    """One page from up to ``limit + 1`` rows of ``(seq, status, record)``."""
    shown = rows[:limit]
    records = []
    for seq, status, text in shown:
        try:
            records.append(effect_from_json(loads(text), status=status))
        except ValueError as exc:
            raise _corrupt("effect", seq, str(exc)) from exc
    cursor = encode_ledger_cursor("e", int(shown[-1][0])) if len(rows) > limit else None
    return EffectPage(tuple(records), cursor)


@functools.lru_cache(maxsize=64)
def _decision_query(tables: Tables, shape: tuple[bool, bool, bool]) -> sa.Select[Any]:
    since, session, after = shape
    p = sa.bindparam
    d = tables.decisions.c
    conditions: list[Any] = [d.owner == p("owner")]
    if since:
        conditions.append(d.decided_at >= p("since"))
    if session:
        conditions.append(d.session_id == p("session"))
    if after:
        conditions.append(d.seq > p("after"))
    return sa.select(d.seq, d.record).where(*conditions).order_by(d.seq).limit(p("lim"))


def decision_query(tables: Tables, query: DecisionQuery) -> tuple[sa.Select[Any], dict[str, Any]]:
    """The statement that answers a decision query and its bound parameters."""
    shape = (query.since is not None, query.session_id is not None, query.after is not None)
    params: dict[str, Any] = {"owner": owner_key(query.owner), "lim": query.limit + 1}
    if query.since is not None:
        params["since"] = query.since
    if query.session_id is not None:
        params["session"] = query.session_id
    if query.after is not None:
        params["after"] = query.after
    return _decision_query(tables, shape), params


def decision_page(rows: Sequence[Any], limit: int) -> DecisionPage:
    """One page from up to ``limit + 1`` rows of ``(seq, record)``."""
    shown = rows[:limit]
    decoded = []
    for seq, text in shown:
        try:
            data = loads(text)
        except ValueError as exc:
            raise _corrupt("decision", seq, "it is not JSON") from exc
        if not isinstance(data, dict):
            raise _corrupt("decision", seq, "it is not a JSON object")
        decoded.append(data)
    cursor = encode_ledger_cursor("d", int(shown[-1][0])) if len(rows) > limit else None
    return DecisionPage(tuple(decoded), cursor)
