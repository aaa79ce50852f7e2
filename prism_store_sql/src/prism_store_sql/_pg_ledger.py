"""The effect ledger's rows in a PostgreSQL save's one statement.

A save that carries ledger rows (``SaveRequest.ledger``) stays one statement and one round
trip: its rows are data-modifying CTEs beside the save's ``cp`` (see :mod:`._pg_commit`), fed
from arrays and written only when ``cp`` wrote its row, all in the statement's one commit:

- ``eff``: the effect rows, an upsert on ``(run_id, call_id)`` that keeps each row's ``seq``
  (rewritten only by the same owner), ``RETURNING seq, run_id, call_id``;
- ``trm``: the index terms of those rows, joined to ``eff`` for their ``seq``;
- ``dec``: the decision rows, each kept as first written.

Every array is ``text[]`` (the numbers as exact decimal text, cast back), as in
:mod:`._pg_group_sql`. It must not decide what a run writes.
"""

from __future__ import annotations

import functools
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from prism_core.stores import LedgerWrite

from ._ledger_sql import decision_params, effect_params
from ._schema import Tables

__all__ = ("ledger_params", "ledger_save_statement", "with_ledger")

_EFFECT = ("run_id", "call_id", "session_id", "owner", "tool_name", "key", "status", "started")
_EFFECT_ARRAYS = ("e_runs", "e_calls", "e_sessions", "e_owners", "e_tools", "e_keys")
_DECISION = ("run_id", "position", "session_id", "owner", "decided_at", "record")


def _rows(name: str, arrays: tuple[str, ...], columns: tuple[str, ...]) -> Any:
    params = [sa.bindparam(array, type_=postgresql.ARRAY(sa.Text())) for array in arrays]
    return sa.func.unnest(*params).table_valued(*columns).render_derived(name=name)


def with_ledger(statement: sa.Select[Any], cp: Any, tables: Tables) -> sa.Select[Any]:
    """``statement`` with the ledger CTEs that write when ``cp`` (the save) wrote a row."""
    e, terms, d = tables.effects, tables.effect_terms, tables.decisions
    written = sa.exists(sa.select(cp.c.created_at))
    rows = _rows(
        "er",
        (*_EFFECT_ARRAYS, "e_statuses", "e_started", "e_records"),
        (*_EFFECT, "record"),
    )
    new_effects = postgresql.insert(e).from_select(
        [
            "run_id",
            "call_id",
            "session_id",
            "owner",
            "tool_name",
            "idempotency_key",
            "status",
            "started_at",
            "record",
        ],
        sa.select(
            rows.c.run_id,
            rows.c.call_id,
            rows.c.session_id,
            rows.c.owner,
            rows.c.tool_name,
            rows.c.key,
            rows.c.status,
            sa.cast(rows.c.started, sa.Double()),
            rows.c.record,
        )
        .select_from(rows)
        .where(written),
    )
    changed = ("session_id", "tool_name", "idempotency_key", "status", "started_at", "record")
    eff = (
        new_effects.on_conflict_do_update(
            index_elements=[e.c.run_id, e.c.call_id],
            set_={name: new_effects.excluded[name] for name in changed},
            where=e.c.owner == new_effects.excluded.owner,
        )
        .returning(e.c.seq, e.c.run_id, e.c.call_id)
        .cte("eff")
    )
    term_rows = _rows("tr", ("t_runs", "t_calls", "t_terms"), ("run_id", "call_id", "term"))
    trm = (
        postgresql.insert(terms)
        .from_select(
            ["term", "seq"],
            sa.select(term_rows.c.term, eff.c.seq).select_from(
                term_rows.join(
                    eff,
                    sa.and_(
                        eff.c.run_id == term_rows.c.run_id, eff.c.call_id == term_rows.c.call_id
                    ),
                )
            ),
        )
        .on_conflict_do_nothing(index_elements=[terms.c.term, terms.c.seq])
        .cte("trm")
    )
    decision_rows = _rows(
        "dr",
        ("d_runs", "d_positions", "d_sessions", "d_owners", "d_decided", "d_records"),
        _DECISION,
    )
    dec = (
        postgresql.insert(d)
        .from_select(
            list(_DECISION),
            sa.select(
                decision_rows.c.run_id,
                sa.cast(decision_rows.c.position, sa.BigInteger()),
                decision_rows.c.session_id,
                decision_rows.c.owner,
                sa.cast(decision_rows.c.decided_at, sa.Double()),
                decision_rows.c.record,
            )
            .select_from(decision_rows)
            .where(written),
        )
        .on_conflict_do_nothing(index_elements=[d.c.run_id, d.c.position])
        .cte("dec")
    )
    return statement.add_cte(eff, trm, dec)


@functools.lru_cache(maxsize=256)
def ledger_save_statement(save: sa.Executable, tables: Tables) -> sa.Executable:
    """The one statement of ``save`` (a save statement ``RETURNING created_at``) with its
    ledger rows; it returns the save's ``created_at`` (``NULL``: refused, nothing written)."""
    cp = save.cte("cp")  # type: ignore[attr-defined]
    statement = sa.select(sa.select(cp.c.created_at).scalar_subquery().label("created_at"))
    return with_ledger(statement, cp, tables)


def _number(value: float | int) -> str:
    # repr() is the shortest text that reads back as the same double.
    return repr(float(value)) if isinstance(value, float) else str(value)


def ledger_params(ledger: LedgerWrite) -> dict[str, list[str]]:
    """The arrays :func:`with_ledger` reads, for ``ledger``'s rows."""
    effects = [effect_params(effect) for effect in ledger.effects]
    terms = [
        (params["e_run"], params["e_call"], term)
        for effect, params in zip(ledger.effects, effects, strict=True)
        for term in effect.terms
    ]
    decisions = [decision_params(decision) for decision in ledger.decisions]
    return {
        "e_runs": [p["e_run"] for p in effects],
        "e_calls": [p["e_call"] for p in effects],
        "e_sessions": [p["e_session"] for p in effects],
        "e_owners": [p["e_owner"] for p in effects],
        "e_tools": [p["e_tool"] for p in effects],
        "e_keys": [p["e_key"] for p in effects],
        "e_statuses": [p["e_status"] for p in effects],
        "e_started": [_number(p["e_started"]) for p in effects],
        "e_records": [p["e_record"] for p in effects],
        "t_runs": [t[0] for t in terms],
        "t_calls": [t[1] for t in terms],
        "t_terms": [t[2] for t in terms],
        "d_runs": [p["d_run"] for p in decisions],
        "d_positions": [str(p["d_position"]) for p in decisions],
        "d_sessions": [p["d_session"] for p in decisions],
        "d_owners": [p["d_owner"] for p in decisions],
        "d_decided": [_number(p["d_decided"]) for p in decisions],
        "d_records": [p["d_record"] for p in decisions],
    }
