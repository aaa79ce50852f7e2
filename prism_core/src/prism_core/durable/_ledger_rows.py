"""The ledger rows a checkpoint save carries, and what a store indexes them under.

A durable run's save may carry a :class:`LedgerWrite` (``SaveRequest.ledger``): the effect
records and decision records that changed since its previous save. A store that keeps an
effect ledger (``_effects.EffectLedger``) writes them with the checkpoint; the helpers here
give every store the same index terms (hashes, never raw values) and the same erased form.

It must not read or write a store, and must not decide what a run writes (``_ledger`` does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .._effect_record import EffectRecord, text_hash
from ..codec import dumps, loads

__all__ = (
    "LedgerDecision",
    "LedgerEffect",
    "LedgerWrite",
    "actor_term",
    "argument_term",
    "effect_terms",
    "erased_decision",
    "erased_effect",
    "owner_key",
)


def owner_key(ownership: Mapping[str, str] | None) -> str:
    """The owner scope a store indexes rows under: canonical JSON of the ownership map,
    ``""`` when unowned (the same text the SQL checkpoint rows keep)."""
    return dumps(dict(ownership)).decode("utf-8") if ownership else ""


def actor_term(actor: str) -> str:
    """The index term of an approver."""
    return "actor:" + text_hash(actor.encode("utf-8"))[:40]


def argument_term(name: str, value: Any) -> str:
    """The index term of a top-level argument ``name`` equal to ``value`` (its canonical
    JSON, hashed: a store indexes no raw value)."""
    return "arg:" + text_hash(name.encode("utf-8") + b"\x00" + dumps(value))[:40]


def effect_terms(record: EffectRecord) -> tuple[str, ...]:
    """The terms a store indexes ``record`` under: each approver and each top-level
    argument."""
    terms = [actor_term(actor) for actor in dict.fromkeys(record.approved_by)]
    if isinstance(record.arguments, Mapping):
        for name, value in record.arguments.items():
            try:
                terms.append(argument_term(str(name), value))
            except (TypeError, ValueError):
                continue
    return tuple(dict.fromkeys(terms))


@attrs.frozen(kw_only=True)
class LedgerEffect:
    """An effect row as a save carries it: the (redacted) ``record``, its canonical JSON
    ``text`` and the ``terms`` it is indexed under."""

    record: EffectRecord
    text: str
    terms: tuple[str, ...]

    @classmethod
    def of(cls, record: EffectRecord) -> LedgerEffect:
        """The row of ``record``."""
        return cls(
            record=record,
            text=dumps(record.to_json()).decode("utf-8"),
            terms=effect_terms(record),
        )


@attrs.frozen(kw_only=True)
class LedgerDecision:
    """A decision row as a save carries it: the run, the record's ``position`` in the run's
    audit, ``decided_at``, the run's ``ownership`` and ``text``, the canonical JSON of the
    row as ``prism audit export`` prints it."""

    run_id: str
    session_id: str
    position: int
    decided_at: float
    ownership: Mapping[str, str] | None
    text: str


@attrs.frozen
class LedgerWrite:
    """The ledger rows one checkpoint save writes with it."""

    effects: tuple[LedgerEffect, ...] = ()
    decisions: tuple[LedgerDecision, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.effects or self.decisions)


def erased_effect(text: str) -> str:
    """An effect row's JSON with its arguments replaced by ``"sha256:<arguments_hash>"``
    (unchanged when already erased)."""
    data = loads(text)
    if isinstance(data, dict) and not data.get("erased"):
        data["arguments"] = f"sha256:{data.get('arguments_hash')}"
        data["erased"] = True
    return dumps(data).decode("utf-8")


def erased_decision(text: str) -> str:
    """A decision row's JSON with its reason replaced by ``"sha256:<hex>"`` of the reason's
    UTF-8 bytes (unchanged when already erased, or without a reason)."""
    data = loads(text)
    if isinstance(data, dict) and not data.get("erased"):
        reason = data.get("reason")
        if isinstance(reason, str):
            data["reason"] = "sha256:" + text_hash(reason.encode("utf-8"))
        data["erased"] = True
    return dumps(data).decode("utf-8")
