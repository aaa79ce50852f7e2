"""The effect ledger of a checkpoint store: what a store keeps, and how it is asked.

A store that keeps a ledger offers :class:`EffectLedger` (asked for with ``capability()``).
It writes the rows a save carries (:attr:`~prism_core.stores.SaveRequest.ledger`, a
``LedgerWrite`` of ``_ledger_rows``) in the same transaction and commit as the checkpoint, and
only when the checkpoint is written; a refused save writes none of them. Rows outlive the
run's record: deleting a checkpoint deletes no row. Rules
(``prism_core.testing.EffectLedgerConformance`` checks them):

- An effect row is keyed by ``(run_id, tool_call_id)``; a later write of the same call replaces
  the whole record (status, hashes, times) but keeps its place in the order: rows are listed
  in the order they were *first* written (its ``terms`` index the approvers and top-level
  arguments as hashes, so a store never indexes raw values; a rewrite adds its new terms).
- A decision row is keyed by ``(run_id, position)`` (its place in the run's audit) and is
  written once; a second write of the same key changes nothing.
- ``ownership`` is matched exactly, as for checkpoints: other owners' rows are never listed,
  marked or erased.
- :meth:`EffectLedger.mark_in_doubt` moves rows from ``dispatched`` to ``in_doubt`` and
  touches no other status; :meth:`EffectLedger.erase_session` rewrites a session's rows with
  ``erased_effect`` / ``erased_decision`` (arguments and reasons replaced by hashes) and drops
  their argument terms, so an erased call is no longer found by its arguments.

It declares the ledger and the values a store reads and writes; it must not hold a store's
behaviour, and must not decide what a run writes (that is ``_ledger``).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from .._capability import capability
from .._effect_record import EFFECT_STATUSES, EffectPage, EffectRecord
from ..codec import dumps, loads
from ..errors import PrismError
from ._checkpoints import (
    MAX_CHECKPOINT_PAGE_SIZE,
    InvalidCheckpointError,
    normalise_ownership,
    validate_list,
)
from ._ledger_rows import actor_term, argument_term, effect_terms

__all__ = (
    "LEDGER_UNSUPPORTED_CODE",
    "DecisionPage",
    "DecisionQuery",
    "EffectLedger",
    "EffectLedgerUnsupportedError",
    "EffectQuery",
    "FreedSpaceScrubber",
    "decode_ledger_cursor",
    "encode_ledger_cursor",
    "export_audit",
    "ledger_of",
    "list_effects",
)

#: The ``code`` of :class:`EffectLedgerUnsupportedError`.
LEDGER_UNSUPPORTED_CODE = "ERR_PRISM_LEDGER_UNSUPPORTED"

_CURSOR = re.compile(r"([ed])\.([0-9]{1,19})")


class EffectLedgerUnsupportedError(PrismError):
    """The checkpoint store keeps no effect ledger (it does not offer
    :class:`~prism_core.stores.EffectLedger`): nothing was read."""

    code = LEDGER_UNSUPPORTED_CODE


def ledger_of(checkpoints: object) -> EffectLedger:
    """``checkpoints`` as an :class:`EffectLedger`, else :class:`EffectLedgerUnsupportedError`
    naming the store."""
    ledger = capability(checkpoints, EffectLedger)
    if ledger is None:
        raise EffectLedgerUnsupportedError(
            f"the checkpoint store {type(checkpoints).__name__} keeps no effect ledger: it "
            "does not implement prism_core.stores.EffectLedger (the memory, SQLite, "
            "PostgreSQL and Redis stores do)"
        )
    return ledger


def encode_ledger_cursor(kind: str, seq: int) -> str:
    """The cursor after row ``seq`` (``kind``: ``"e"`` effects, ``"d"`` decisions)."""
    return f"{kind}.{seq}"


def decode_ledger_cursor(kind: str, cursor: str | None) -> int | None:
    """The row number a cursor of :func:`encode_ledger_cursor` points after, ``None`` for no
    cursor; :class:`~prism_core.InvalidCheckpointError` for anything else."""
    if cursor is None:
        return None
    match = _CURSOR.fullmatch(cursor) if isinstance(cursor, str) else None
    if match is None or match.group(1) != kind:
        raise InvalidCheckpointError("cursor is not one this listing returned")
    return int(match.group(2))


def _optional_text(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if type(value) is not str or not value:
        raise InvalidCheckpointError(f"{name} must be a non-empty string")
    return value


def _epoch(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise InvalidCheckpointError(f"{name} must be epoch seconds (a number)")
    return float(value)


@attrs.frozen(kw_only=True)
class EffectQuery:
    """A checked ``list_effects`` filter, as a store answers it: every given field must match
    (``terms``: every term indexes the row, which is how approvers and argument values are
    matched; ``arguments`` is what the terms were made of, for messages),
    ``since <= started_at < until``, rows after ``after`` in row order, at most ``limit``."""

    owner: dict[str, str] | None = None
    tool_name: str | None = None
    idempotency_key: str | None = None
    run_id: str | None = None
    session_id: str | None = None
    status: str | None = None
    since: float | None = None
    until: float | None = None
    terms: tuple[str, ...] = ()
    arguments: tuple[tuple[str, Any], ...] = ()
    limit: int = 100
    after: int | None = None

    @classmethod
    def of(
        cls,
        *,
        tool_name: Any = None,
        actor: Any = None,
        arguments: Any = None,
        idempotency_key: Any = None,
        run_id: Any = None,
        session_id: Any = None,
        status: Any = None,
        since: Any = None,
        until: Any = None,
        ownership: Any = None,
        limit: Any = 100,
        cursor: Any = None,
    ) -> EffectQuery:
        """The checked query of ``list_effects``'s arguments, or
        :class:`~prism_core.InvalidCheckpointError` before any store access."""
        validate_list(limit, cursor)
        if status is not None and status not in EFFECT_STATUSES:
            raise InvalidCheckpointError(f"status must be one of {', '.join(EFFECT_STATUSES)}")
        terms: list[str] = []
        if _optional_text(actor, "actor") is not None:
            terms.append(actor_term(actor))
        pairs: list[tuple[str, Any]] = []
        if arguments is not None:
            if not isinstance(arguments, Mapping):
                raise InvalidCheckpointError("arguments must be a mapping of names to values")
            for name, value in arguments.items():
                if type(name) is not str or not name:
                    raise InvalidCheckpointError("arguments names must be non-empty strings")
                try:
                    terms.append(argument_term(name, value))
                except (TypeError, ValueError) as exc:
                    raise InvalidCheckpointError(f"arguments[{name!r}] is not JSON") from exc
                pairs.append((name, loads(dumps(value))))
        return cls(
            owner=normalise_ownership(ownership),
            tool_name=_optional_text(tool_name, "tool_name"),
            idempotency_key=_optional_text(idempotency_key, "idempotency_key"),
            run_id=_optional_text(run_id, "run_id"),
            session_id=_optional_text(session_id, "session_id"),
            status=status,
            since=_epoch(since, "since"),
            until=_epoch(until, "until"),
            terms=tuple(dict.fromkeys(terms)),
            arguments=tuple(pairs),
            limit=limit,
            after=decode_ledger_cursor("e", cursor),
        )

    def matches(self, record: EffectRecord, terms: Sequence[str] | frozenset[str] = ()) -> bool:
        """Whether ``record`` (indexed under ``terms``; computed when not given) is one this
        query lists, ``owner`` and row order aside: the reference every store agrees with."""
        if self.tool_name is not None and record.tool_name != self.tool_name:
            return False
        if self.idempotency_key is not None and record.idempotency_key != self.idempotency_key:
            return False
        if self.run_id is not None and record.run_id != self.run_id:
            return False
        if self.session_id is not None and record.session_id != self.session_id:
            return False
        if self.status is not None and record.status != self.status:
            return False
        if self.since is not None and record.started_at < self.since:
            return False
        if self.until is not None and record.started_at >= self.until:
            return False
        if self.terms:
            have = terms if isinstance(terms, frozenset) else set(terms or effect_terms(record))
            if not all(term in have for term in self.terms):
                return False
        return True


@attrs.frozen(kw_only=True)
class DecisionQuery:
    """A checked read of decision rows (``prism audit export``): rows of ``owner`` decided at
    or after ``since`` (of ``session_id`` when given), after ``after`` in row order."""

    owner: dict[str, str] | None = None
    since: float | None = None
    session_id: str | None = None
    limit: int = 100
    after: int | None = None

    @classmethod
    def of(
        cls,
        *,
        ownership: Any = None,
        since: Any = None,
        session_id: Any = None,
        limit: Any = 100,
        cursor: Any = None,
    ) -> DecisionQuery:
        """The checked query, or :class:`~prism_core.InvalidCheckpointError`."""
        validate_list(limit, cursor)
        return cls(
            owner=normalise_ownership(ownership),
            since=_epoch(since, "since"),
            session_id=_optional_text(session_id, "session_id"),
            limit=limit,
            after=decode_ledger_cursor("d", cursor),
        )


@attrs.frozen
class DecisionPage:
    """One page of decision rows, each the JSON object of its :attr:`LedgerDecision.text`,
    in the order they were written; ``cursor`` is ``None`` on the last page."""

    decisions: tuple[dict[str, Any], ...]
    cursor: str | None = None


@runtime_checkable
class EffectLedger(Protocol):
    """A checkpoint store capability: the effect and decision rows its saves carry, kept
    after the runs (see the module docstring for the rules)."""

    async def query_effects(self, query: EffectQuery) -> EffectPage:
        """The effect rows of ``query.owner`` that ``query`` matches, in row order, at most
        ``query.limit``, and the cursor after the last row read (``None``: no more)."""
        ...

    async def query_decisions(self, query: DecisionQuery) -> DecisionPage:
        """The decision rows of ``query.owner`` that ``query`` matches, in row order."""
        ...

    async def mark_in_doubt(
        self, run_id: str, tool_call_ids: Sequence[str], *, ownership: Mapping[str, str] | None
    ) -> int:
        """Move the named calls of ``run_id`` from ``dispatched`` to ``in_doubt``; the
        number of rows moved (a call in any other status is left as it is)."""
        ...

    async def erase_session(self, session_id: str, *, ownership: Mapping[str, str] | None) -> int:
        """Rewrite every effect and decision row of ``session_id`` with ``erased_effect`` and
        ``erased_decision`` and drop the effects' argument terms; the number of rows
        rewritten."""
        ...


async def list_effects(
    checkpoints: object,
    *,
    tool_name: str | None = None,
    actor: str | None = None,
    arguments: Mapping[str, Any] | None = None,
    idempotency_key: str | None = None,
    run_id: str | None = None,
    status: str | None = None,
    since: float | None = None,
    until: float | None = None,
    ownership: Mapping[str, str] | None = None,
    limit: int = 100,
    cursor: str | None = None,
) -> EffectPage:
    """One page of the effect records ``checkpoints`` keeps for ``ownership`` (matched
    exactly), oldest first, that match every filter given.

    ``tool_name``, ``idempotency_key``, ``run_id`` and ``status`` are equalities; ``actor``
    matches one of ``approved_by``; ``arguments`` maps top-level argument names to the values
    they must equal (as canonical JSON); ``since <= started_at < until`` (epoch seconds). Pass
    a page's ``cursor`` back, with the same filters, for the next page (a page may be short
    and still have one). Malformed arguments raise :class:`~prism_core.InvalidCheckpointError`
    and a store without a ledger :class:`EffectLedgerUnsupportedError`, both before any read.
    """
    query = EffectQuery.of(
        tool_name=tool_name,
        actor=actor,
        arguments=arguments,
        idempotency_key=idempotency_key,
        run_id=run_id,
        status=status,
        since=since,
        until=until,
        ownership=ownership,
        limit=limit,
        cursor=cursor,
    )
    return await ledger_of(checkpoints).query_effects(query)


async def export_audit(
    checkpoints: object,
    *,
    since: float | None = None,
    ownership: Mapping[str, str] | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """Every decision record and effect record ``checkpoints`` keeps for ``ownership``, as
    JSON objects: first the decisions (``"kind": "decision"``, decided at or after
    ``since``), then the effects (``"kind": "effect"``, started at or after ``since``), each
    in the order they were written. Raises like :func:`list_effects`, before any read."""
    ledger = ledger_of(checkpoints)
    decisions = DecisionQuery.of(ownership=ownership, since=since, limit=MAX_CHECKPOINT_PAGE_SIZE)
    effects = EffectQuery.of(ownership=ownership, since=since, limit=MAX_CHECKPOINT_PAGE_SIZE)
    while True:
        page = await ledger.query_decisions(decisions)
        for row in page.decisions:
            yield row
        if page.cursor is None:
            break
        decisions = attrs.evolve(decisions, after=decode_ledger_cursor("d", page.cursor))
    while True:
        effect_page = await ledger.query_effects(effects)
        for record in effect_page.effects:
            yield {"kind": "effect", **record.to_json()}
        if effect_page.cursor is None:
            break
        effects = attrs.evolve(effects, after=decode_ledger_cursor("e", effect_page.cursor))


@runtime_checkable
class FreedSpaceScrubber(Protocol):
    """A store capability: rewrite its storage so that what was deleted or overwritten is no
    longer in its files' free space (SQLite: ``VACUUM`` and a truncating WAL checkpoint).
    :func:`~prism_core.erase_session` asks for it after an erasure."""

    async def scrub_freed_space(self) -> None:
        """Rewrite the storage; data deleted or overwritten before the call is gone."""
        ...
