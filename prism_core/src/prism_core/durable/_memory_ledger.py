"""The memory checkpoint store's effect ledger: the rows its saves carry, kept in dicts.

The rules are :mod:`._effects`'s. Every operation runs without awaiting, so it is atomic; the
store applies a save's rows only once the save itself is written (``MemoryCheckpointStore``).
It must not know about runs beyond the rows it is handed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

from .._effect_record import EffectPage, EffectRecord, effect_from_json
from ..codec import loads
from ._effects import DecisionPage, DecisionQuery, EffectQuery, encode_ledger_cursor
from ._ledger_rows import LedgerWrite, effect_terms, erased_decision, erased_effect, owner_key

__all__ = ("MemoryLedger",)


@attrs.frozen(kw_only=True)
class _EffectRow:
    seq: int
    owner: str
    text: str
    status: str
    terms: frozenset[str]
    #: The record as last written (matched against; callers get a fresh copy).
    kept: EffectRecord

    def record(self) -> EffectRecord:
        """A fresh copy of the record (nothing the store holds is shared)."""
        return effect_from_json(loads(self.text), status=self.status)


@attrs.frozen(kw_only=True)
class _DecisionRow:
    seq: int
    owner: str
    session_id: str
    decided_at: float
    text: str


class MemoryLedger:
    """Effect and decision rows by key, in the order they were first written."""

    def __init__(self) -> None:
        self._effects: dict[tuple[str, str], _EffectRow] = {}
        self._decisions: dict[tuple[str, int], _DecisionRow] = {}
        #: The rows each term indexes (a query by approver or argument reads only those).
        self._by_term: dict[str, set[tuple[str, str]]] = {}
        self._seq = 0

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def apply(self, write: LedgerWrite | None) -> None:
        """Write the rows of ``write`` (the save that carries it is written)."""
        if not write:
            return
        for effect in write.effects:
            record = effect.record
            slot = (record.run_id, record.tool_call_id)
            current = self._effects.get(slot)
            self._set_effect(
                slot,
                _EffectRow(
                    seq=current.seq if current is not None else self._next(),
                    owner=owner_key(record.ownership),
                    text=effect.text,
                    status=record.status,
                    terms=frozenset(effect.terms) | (current.terms if current else frozenset()),
                    kept=record,
                ),
            )
        for decision in write.decisions:
            key = (decision.run_id, decision.position)
            if key in self._decisions:
                continue
            self._decisions[key] = _DecisionRow(
                seq=self._next(),
                owner=owner_key(decision.ownership),
                session_id=decision.session_id,
                decided_at=decision.decided_at,
                text=decision.text,
            )

    def _set_effect(self, slot: tuple[str, str], row: _EffectRow) -> None:
        current = self._effects.get(slot)
        for term in current.terms - row.terms if current is not None else ():
            self._by_term[term].discard(slot)
        for term in row.terms:
            self._by_term.setdefault(term, set()).add(slot)
        self._effects[slot] = row

    def query_effects(self, query: EffectQuery) -> EffectPage:
        """The effect rows ``query`` matches (see :class:`~._effects.EffectLedger`)."""
        owner = owner_key(query.owner)
        found: list[EffectRecord] = []
        last: int | None = None
        # A rewritten row keeps its place in the dict: the dict's order is the rows' order.
        rows: Iterable[_EffectRow] = self._effects.values()
        if query.terms:
            slots = self._by_term.get(query.terms[0], set())
            rows = sorted((self._effects[slot] for slot in slots), key=lambda r: r.seq)
        for row in rows:
            if row.owner != owner or (query.after is not None and row.seq <= query.after):
                continue
            if not query.matches(row.kept, row.terms):
                continue
            if len(found) == query.limit:
                return EffectPage(tuple(found), encode_ledger_cursor("e", last or 0))
            found.append(row.record())
            last = row.seq
        return EffectPage(tuple(found))

    def query_decisions(self, query: DecisionQuery) -> DecisionPage:
        """The decision rows ``query`` matches, in row order."""
        owner = owner_key(query.owner)
        rows = [
            row
            for row in sorted(self._decisions.values(), key=lambda r: r.seq)
            if row.owner == owner
            and (query.after is None or row.seq > query.after)
            and (query.since is None or row.decided_at >= query.since)
            and (query.session_id is None or row.session_id == query.session_id)
        ]
        shown = rows[: query.limit]
        cursor = encode_ledger_cursor("d", shown[-1].seq) if len(rows) > query.limit else None
        return DecisionPage(tuple(loads(row.text) for row in shown), cursor)

    def mark_in_doubt(
        self, run_id: str, tool_call_ids: Sequence[str], ownership: Mapping[str, str] | None
    ) -> int:
        """Move the named ``dispatched`` calls of ``run_id`` to ``in_doubt``."""
        owner = owner_key(ownership)
        moved = 0
        for call_id in dict.fromkeys(tool_call_ids):
            row = self._effects.get((run_id, call_id))
            if row is not None and row.owner == owner and row.status == "dispatched":
                self._effects[(run_id, call_id)] = attrs.evolve(
                    row, status="in_doubt", kept=attrs.evolve(row.kept, status="in_doubt")
                )
                moved += 1
        return moved

    def erase_session(self, session_id: str, ownership: Mapping[str, str] | None) -> int:
        """Rewrite the session's effect and decision rows in their erased form."""
        owner = owner_key(ownership)
        changed = 0
        for slot, row in list(self._effects.items()):
            if row.owner != owner or row.kept.session_id != session_id:
                continue
            text = erased_effect(row.text)
            erased = effect_from_json(loads(text), status=row.status)
            terms = frozenset(effect_terms(erased))
            self._set_effect(slot, attrs.evolve(row, text=text, terms=terms, kept=erased))
            changed += 1
        for key, decision in list(self._decisions.items()):
            if decision.owner == owner and decision.session_id == session_id:
                self._decisions[key] = attrs.evolve(decision, text=erased_decision(decision.text))
                changed += 1
        return changed
