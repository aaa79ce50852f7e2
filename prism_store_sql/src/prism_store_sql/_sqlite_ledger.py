"""The effect ledger on the thread-driven SQLite backend: the rows a save carries, written in
its hand-off and commit, and the ledger's reads, marks and erasures.

The statements are :mod:`._ledger_sql`'s, compiled to ``sqlite3`` text (the write path's are
stored, see :mod:`._sqlite_text`). A save's rows are written by :meth:`SqliteLedger.write_in`
inside the transaction that writes the checkpoint, after it wrote its row. An erasure's
rewrite is one transaction; :meth:`SqliteLedger.scrub` then rewrites the database file
(``VACUUM``) and truncates the WAL, so no page of the file keeps what was deleted or
overwritten. It must not decide what a run writes.
"""

from __future__ import annotations

import builtins
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from prism_core.stores import (
    DecisionPage,
    DecisionQuery,
    EffectPage,
    EffectQuery,
    LedgerWrite,
    erased_decision,
    erased_effect,
    normalise_ownership,
    owner_key,
)

from ._ledger_sql import (
    LedgerStatements,
    decision_page,
    decision_params,
    decision_query,
    effect_page,
    effect_params,
    effect_query,
    ledger_statements,
    term_params,
)
from ._sqlite import CompiledStatement, SqliteDatabase, compile_sqlite
from ._sqlite_text import stored_statement

__all__ = ("SqliteLedger",)


class SqliteLedger:
    """The ledger of the SQLite stores on one database."""

    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database
        prefix = database.prefix
        self._upsert = stored_statement(prefix, "ledger.upsert_effect")
        self._term = stored_statement(prefix, "ledger.add_term")
        self._decision = stored_statement(prefix, "ledger.add_decision")

    def _sql(self) -> LedgerStatements:
        return ledger_statements(self._db.tables, "sqlite")

    def _compiled(self, name: str) -> CompiledStatement:
        return compile_sqlite(getattr(self._sql(), name))

    def write_in(self, connection: sqlite3.Connection, ledger: LedgerWrite | None) -> None:
        """Write ``ledger``'s rows inside the transaction open on ``connection`` (worker
        thread only; the checkpoint they ride was just written)."""
        if not ledger:
            return
        upsert, term, decision = self._upsert, self._term, self._decision
        for effect in ledger.effects:
            params = effect_params(effect)
            connection.execute(upsert.text, upsert.params(params))
            if effect.terms:
                connection.executemany(
                    term.text, [term.params(values) for values in term_params(effect, params)]
                )
        if ledger.decisions:
            connection.executemany(
                decision.text, [decision.params(decision_params(d)) for d in ledger.decisions]
            )

    async def query_effects(self, query: EffectQuery) -> EffectPage:
        """The effect rows ``query`` matches, in row order."""
        statement, params = effect_query(self._db.tables, query)
        compiled = compile_sqlite(statement)
        text, values = compiled.text, compiled.params(params)

        def fetch(connection: sqlite3.Connection) -> builtins.list[Any]:
            return connection.execute(text, values).fetchall()

        rows = await self._db.read_many("list effects", fetch)
        return effect_page(rows, query.limit)

    async def query_decisions(self, query: DecisionQuery) -> DecisionPage:
        """The decision rows ``query`` matches, in row order."""
        statement, params = decision_query(self._db.tables, query)
        compiled = compile_sqlite(statement)
        text, values = compiled.text, compiled.params(params)

        def fetch(connection: sqlite3.Connection) -> builtins.list[Any]:
            return connection.execute(text, values).fetchall()

        rows = await self._db.read_many("list decisions", fetch)
        return decision_page(rows, query.limit)

    async def mark_in_doubt(
        self, run_id: str, tool_call_ids: Sequence[str], ownership: Mapping[str, str] | None
    ) -> int:
        """Move the named ``dispatched`` calls of ``run_id`` to ``in_doubt`` (one commit)."""
        mark = self._compiled("mark_in_doubt")
        owner = owner_key(normalise_ownership(ownership))
        values = [
            mark.params({"e_run": run_id, "e_call": call_id, "e_owner": owner})
            for call_id in dict.fromkeys(tool_call_ids)
        ]

        def write(connection: sqlite3.Connection) -> int:
            return sum(len(connection.execute(mark.text, v).fetchall()) for v in values)

        return await self._db.write("mark effects in doubt", write)

    async def erase_session(self, session_id: str, ownership: Mapping[str, str] | None) -> int:
        """Rewrite the session's rows in their erased form and drop their argument terms,
        in one transaction; the number of rows rewritten."""
        names = (
            "session_effects",
            "set_effect_record",
            "drop_arg_terms",
            "session_decisions",
            "set_decision_record",
        )
        effects, set_effect, drop_terms, decisions, set_decision = (
            self._compiled(name) for name in names
        )
        key = {"owner": owner_key(normalise_ownership(ownership)), "session": session_id}

        def write(connection: sqlite3.Connection) -> int:
            changed = 0
            for seq, _status, text in connection.execute(
                effects.text, effects.params(key)
            ).fetchall():
                row = {"row": seq}
                connection.execute(
                    set_effect.text, set_effect.params({**row, "text": erased_effect(text)})
                )
                connection.execute(drop_terms.text, drop_terms.params(row))
                changed += 1
            for seq, text in connection.execute(decisions.text, decisions.params(key)).fetchall():
                connection.execute(
                    set_decision.text,
                    set_decision.params({"row": seq, "text": erased_decision(text)}),
                )
                changed += 1
            return changed

        return await self._db.write("erase a session's ledger rows", write)

    async def delete_session(self, session_id: str) -> int:
        """Delete every entry of ``session_id`` and its head (one commit); the number of
        entries deleted."""
        entries, head = self._compiled("delete_entries"), self._compiled("delete_head")
        values = {"session": session_id}

        def write(connection: sqlite3.Connection) -> int:
            deleted = connection.execute(entries.text, entries.params(values)).rowcount
            connection.execute(head.text, head.params(values))
            return max(deleted, 0)

        return await self._db.write("delete a session", write)

    async def scrub(self) -> None:
        """Rewrite the database file (``VACUUM``) and truncate its WAL, so deleted and
        overwritten rows are gone from the file's free pages and from the log."""

        def scrub(connection: sqlite3.Connection) -> None:
            connection.execute("VACUUM")
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

        await self._db.run("scrub the database file", scrub)
