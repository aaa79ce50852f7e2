"""The effect ledger on Redis: the rows a save carries as its script's last argument, and the
ledger's reads, marks and erasures (the rules are ``prism_core.stores.EffectLedger``'s; the
key layout and the Lua are :mod:`._ledger_scripts`').

A save's rows travel as one JSON argument of the save's own script (``CHECKPOINT_SAVE`` or
``SHARED_COMMIT``), which writes them after the checkpoint, in the same atomic step: no round
trip is added. A list is one script call that examines a bounded number of rows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from prism_core.codec import dumps, loads
from prism_core.stores import (
    CORRUPT_CHECKPOINT_CODE,
    CheckpointStoreError,
    DecisionPage,
    DecisionQuery,
    EffectPage,
    EffectQuery,
    LedgerWrite,
    effect_from_json,
    effect_terms,
    encode_ledger_cursor,
    erased_decision,
    erased_effect,
    normalise_ownership,
    owner_key,
)

from . import _ledger_scripts
from ._client import RedisConnection, run_script, text

__all__ = ("QUERY_BUDGET", "RedisLedger", "ledger_payload")

#: The most rows one list call examines (a page may be short, with a cursor, past it).
QUERY_BUDGET = 20000


def ledger_payload(ledger: LedgerWrite | None) -> str:
    """The JSON argument the save scripts read (``''`` for no rows)."""
    if not ledger:
        return ""
    effects = []
    for effect in ledger.effects:
        record = effect.record
        effects.append(
            [
                record.run_id,
                record.tool_call_id,
                record.session_id,
                owner_key(record.ownership),
                record.tool_name,
                record.idempotency_key,
                record.status,
                repr(float(record.started_at)),
                effect.text,
                list(effect.terms),
            ]
        )
    decisions = [
        [
            d.run_id,
            str(d.position),
            d.session_id,
            owner_key(d.ownership),
            repr(float(d.decided_at)),
            d.text,
        ]
        for d in ledger.decisions
    ]
    return dumps({"e": effects, "d": decisions}).decode("utf-8")


def _index(base: str, owner: str, kind: str, value: str) -> str:
    """The index set of one owner, kind and value, as the scripts name it."""
    digest = hashlib.sha1(f"{owner}\x00{kind}\x00{value}".encode(), usedforsecurity=False)
    return f"{base}efx:{digest.hexdigest()}"


def _corrupt(what: str, seq: Any, problem: str) -> CheckpointStoreError:
    return CheckpointStoreError(
        f"ledger {what} row {text(seq)} cannot be read: {problem}", code=CORRUPT_CHECKPOINT_CODE
    )


class RedisLedger:
    """The ledger of the Redis checkpoint store under one prefix."""

    def __init__(self, connection: RedisConnection, prefix: str) -> None:
        self._connection = connection
        #: What every ledger key starts with (the scripts append the family).
        self.base = f"{prefix}:"
        client = connection.client
        self._query = client.register_script(_ledger_scripts.LEDGER_QUERY)
        self._mark = client.register_script(_ledger_scripts.LEDGER_MARK)
        self._erase = client.register_script(_ledger_scripts.LEDGER_ERASE)

    async def _rows(
        self, sets: list[str], *, rows: str, field: str, query: Any, limit: int, times: str
    ) -> tuple[list[tuple[str, str, str]], str | None]:
        """Up to ``limit + 1`` matching rows (number, status, record) after ``query.after``
        and the row where the scan stopped short (``None``: it reached the end); ``times``
        is the owner's time set of these rows."""
        args = [
            f"{self.base}{rows}:",
            "" if query.after is None else str(query.after),
            str(limit + 1),
            str(QUERY_BUDGET),
            field,
            "" if query.since is None else repr(query.since),
            "" if getattr(query, "until", None) is None else repr(query.until),
            times,
            *sets,
        ]
        with self._connection.guard("list ledger rows"):
            reply = await run_script(self._query, keys=[], args=args)
        stopped = text(reply[0]) or None
        found = [
            (text(reply[i]), text(reply[i + 1]), text(reply[i + 2]))
            for i in range(1, len(reply), 3)
        ]
        return found, stopped

    @staticmethod
    def _cursor(kind: str, found: list[Any], limit: int, stopped: str | None) -> str | None:
        if len(found) > limit:
            return encode_ledger_cursor(kind, int(found[limit - 1][0]))
        if stopped is not None:
            return encode_ledger_cursor(kind, int(stopped))
        return None

    async def query_effects(self, query: EffectQuery) -> EffectPage:
        """The effect rows ``query`` matches (see :class:`~prism_core.stores.EffectLedger`)."""
        owner = owner_key(query.owner)
        sets = [
            _index(self.base, owner, kind, value)
            for kind, value in (
                ("tool", query.tool_name),
                ("status", query.status),
                ("run", query.run_id),
                ("key", query.idempotency_key),
                ("session", query.session_id),
            )
            if value is not None
        ]
        sets.extend(_index(self.base, owner, "term", term) for term in query.terms)
        if not sets:
            sets.append(_index(self.base, owner, "all", ""))
        found, stopped = await self._rows(
            sets,
            rows="ef",
            field="started",
            query=query,
            limit=query.limit,
            times=_index(self.base, owner, "time", ""),
        )
        records = []
        for seq, status, record in found[: query.limit]:
            try:
                records.append(effect_from_json(loads(record), status=status))
            except ValueError as exc:
                raise _corrupt("effect", seq, str(exc)) from exc
        return EffectPage(tuple(records), self._cursor("e", found, query.limit, stopped))

    async def query_decisions(self, query: DecisionQuery) -> DecisionPage:
        """The decision rows ``query`` matches, in the order they were written."""
        owner = owner_key(query.owner)
        sets = [_index(self.base, owner, "dall", "")]
        if query.session_id is not None:
            sets.append(_index(self.base, owner, "dsession", query.session_id))
        found, stopped = await self._rows(
            sets,
            rows="d",
            field="decided",
            query=query,
            limit=query.limit,
            times=_index(self.base, owner, "dtime", ""),
        )
        decoded = []
        for seq, _, record in found[: query.limit]:
            try:
                data = loads(record)
            except ValueError as exc:
                raise _corrupt("decision", seq, "it is not JSON") from exc
            decoded.append(data)
        return DecisionPage(tuple(decoded), self._cursor("d", found, query.limit, stopped))

    async def mark_in_doubt(
        self, run_id: str, tool_call_ids: Sequence[str], ownership: Mapping[str, str] | None
    ) -> int:
        """Move the named ``dispatched`` calls of ``run_id`` to ``in_doubt`` (one script)."""
        owner = owner_key(normalise_ownership(ownership))
        args = [self.base, owner, run_id, *dict.fromkeys(tool_call_ids)]
        with self._connection.guard("mark effects in doubt"):
            return int(await run_script(self._mark, keys=[], args=args))

    async def erase_session(self, session_id: str, ownership: Mapping[str, str] | None) -> int:
        """Rewrite the session's rows in their erased form and drop their argument terms:
        read, then one script that rewrites them all."""
        owner = owner_key(normalise_ownership(ownership))
        effects = _index(self.base, owner, "session", session_id)
        decisions = _index(self.base, owner, "dsession", session_id)
        with self._connection.guard("read a session's ledger rows") as client:
            effect_rows: list[Any] = list(await client.zrange(effects, 0, -1))
            decision_rows: list[Any] = list(await client.zrange(decisions, 0, -1))
            pipe = client.pipeline(transaction=False)
            for seq in effect_rows:
                pipe.hmget(f"{self.base}ef:{text(seq)}", ["record", "status"])
            for seq in decision_rows:
                pipe.hget(f"{self.base}d:{text(seq)}", "record")
            fetched = await pipe.execute()
        args: list[str] = [self.base, owner]
        for seq, (record, status) in zip(effect_rows, fetched[: len(effect_rows)], strict=True):
            if record is None:
                continue
            before = effect_from_json(loads(text(record)), status=text(status))
            erased = erased_effect(text(record))
            kept = effect_terms(effect_from_json(loads(erased), status=text(status)))
            dropped = [term for term in effect_terms(before) if term not in kept]
            args += ["e", text(seq), erased, dumps(list(kept)).decode(), str(len(dropped))]
            args += dropped
        for seq, record in zip(decision_rows, fetched[len(effect_rows) :], strict=True):
            if record is not None:
                args += ["d", text(seq), erased_decision(text(record))]
        if len(args) == 2:
            return 0
        with self._connection.guard("erase a session's ledger rows"):
            return int(await run_script(self._erase, keys=[], args=args))
