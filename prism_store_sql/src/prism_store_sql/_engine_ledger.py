"""The effect ledger on the engine stores (PostgreSQL, explicit async URLs, a host's engine).

A save that carries ledger rows writes them in its own commit: on PostgreSQL inside its one
statement (:mod:`._pg_ledger`), sent alone rather than in a group commit (a group's statement
carries no ledger rows); elsewhere statement by statement in one transaction
(:func:`write_ledger_on`). The ledger's reads, marks and erasures are the methods of
:class:`EngineLedger`, which the engine checkpoint store mixes in. It must not decide what a
run writes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from prism_core.stores import (
    CheckpointRecord,
    DecisionPage,
    DecisionQuery,
    EffectPage,
    EffectQuery,
    LedgerWrite,
    SaveRequest,
    conflict,
    erased_decision,
    erased_effect,
    normalise_ownership,
    owner_key,
)

from ._base import EngineStoreBase
from ._checkpoint_rows import check_range, save_params, saved_record
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
from ._pg_ledger import ledger_params, ledger_save_statement

__all__ = ("EngineLedger", "write_ledger_on")


async def write_ledger_on(
    connection: AsyncConnection, sql: LedgerStatements, ledger: LedgerWrite | None
) -> None:
    """Write ``ledger``'s rows inside the transaction open on ``connection``."""
    if not ledger:
        return
    for effect in ledger.effects:
        params = effect_params(effect)
        await connection.execute(sql.upsert_effect, params)
        if effect.terms:
            await connection.execute(sql.add_term, term_params(effect, params))
    if ledger.decisions:
        await connection.execute(sql.add_decision, [decision_params(d) for d in ledger.decisions])


class EngineLedger(EngineStoreBase):
    """The engine checkpoint store's ledger methods (:class:`~._engine_stores.
    EngineCheckpointStore` builds on it)."""

    def _save_statement(self, request: SaveRequest) -> sa.Executable:
        """The save statement of ``request`` (the checkpoint store's)."""
        raise NotImplementedError

    @property
    def _ledger_sql(self) -> LedgerStatements:
        dialect = "postgresql" if self._switch_to_autocommit else "sqlite"
        return ledger_statements(self._tables, dialect)

    async def _write_ledger_on(
        self, connection: AsyncConnection, ledger: LedgerWrite | None
    ) -> None:
        """Write a save's ledger rows inside the transaction open on ``connection``."""
        await write_ledger_on(connection, self._ledger_sql, ledger)

    async def _save_with_ledger(self, request: SaveRequest) -> CheckpointRecord:
        """The save of ``request`` and its ledger rows, in one commit."""
        assert request.ledger is not None
        check_range(request)
        now = time.time()
        params = save_params(request, now)
        created: Any = None
        if self._switch_to_autocommit:
            statement = ledger_save_statement(self._save_statement(request), self._tables)
            values = {**params, **ledger_params(request.ledger)}
            row = await self._first_row("save a checkpoint", statement, values, write=True)
            created = row[0] if row is not None else None
        else:
            async with self._transaction("save a checkpoint") as connection:
                found = (await connection.execute(self._save_statement(request), params)).first()
                if found is not None:
                    created = found[0]
                    await self._write_ledger_on(connection, request.ledger)
        if created is None:
            raise conflict(request.namespace, request.key)
        return saved_record(request, float(created), now)

    async def _query_rows(
        self, action: str, statement: sa.Executable, params: Mapping[str, Any]
    ) -> list[Sequence[Any]]:
        """Every row of a ledger query. On PostgreSQL the query is planned for its values
        (``plan_cache_mode`` for its transaction only): a connection of these stores runs its
        turn statements on generic plans, and a generic plan of a filter cannot know that
        ``in_doubt`` is rare or that an hour is a short window."""
        if not self._switch_to_autocommit:
            return await self._all_rows(action, statement, params)
        async with self._transaction(action) as connection:
            if (connection.dialect.server_version_info or (0,)) >= (12,):
                await connection.execute(sa.text("SET LOCAL plan_cache_mode = force_custom_plan"))
            return list((await connection.execute(statement, params)).all())

    async def query_effects(self, query: EffectQuery) -> EffectPage:
        """The effect rows ``query`` matches (see :class:`~prism_core.stores.EffectLedger`)."""
        statement, params = effect_query(self._tables, query)
        rows = await self._query_rows("list effects", statement, params)
        return effect_page(rows, query.limit)

    async def query_decisions(self, query: DecisionQuery) -> DecisionPage:
        """The decision rows ``query`` matches, in the order they were written."""
        statement, params = decision_query(self._tables, query)
        rows = await self._query_rows("list decisions", statement, params)
        return decision_page(rows, query.limit)

    async def mark_in_doubt(
        self, run_id: str, tool_call_ids: Sequence[str], *, ownership: Mapping[str, str] | None
    ) -> int:
        """Move the named calls of ``run_id`` from ``dispatched`` to ``in_doubt``."""
        owner = owner_key(normalise_ownership(ownership))
        moved = 0
        async with self._transaction("mark effects in doubt") as connection:
            for call_id in dict.fromkeys(tool_call_ids):
                params = {"e_run": run_id, "e_call": call_id, "e_owner": owner}
                result = await connection.execute(self._ledger_sql.mark_in_doubt, params)
                moved += len(result.all())
        return moved

    async def erase_session(self, session_id: str, *, ownership: Mapping[str, str] | None) -> int:
        """Rewrite the session's effect and decision rows in their erased form and drop
        their argument terms, in one transaction."""
        sql = self._ledger_sql
        key = {"owner": owner_key(normalise_ownership(ownership)), "session": session_id}
        changed = 0
        async with self._transaction("erase a session's ledger rows") as connection:
            for seq, _status, text in (await connection.execute(sql.session_effects, key)).all():
                row = {"row": seq}
                await connection.execute(
                    sql.set_effect_record, {**row, "text": erased_effect(text)}
                )
                await connection.execute(sql.drop_arg_terms, row)
                changed += 1
            for seq, text in (await connection.execute(sql.session_decisions, key)).all():
                await connection.execute(
                    sql.set_decision_record, {"row": seq, "text": erased_decision(text)}
                )
                changed += 1
        return changed

    async def scrub_freed_space(self) -> None:
        """On SQLite, rewrite the database file (``VACUUM``) and truncate its WAL. On
        PostgreSQL nothing: the server's own ``VACUUM`` reclaims the old row versions (see
        docs/operations.md)."""
        if self._switch_to_autocommit:
            return
        async with self._read("scrub the database file") as connection:
            # VACUUM runs outside any transaction.
            connection = await connection.execution_options(isolation_level="AUTOCOMMIT")
            await connection.exec_driver_sql("VACUUM")
            await connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
