"""What a durable run writes to its store's effect ledger, and when: with its own checkpoints.

A run keeps an :class:`~prism_core.EffectRecord` for every call of a tool that is not
``effect="read"`` (:class:`RunLedger`): made when the call is dispatched, finished when its
outcome is known, and handed to the run's next checkpoint write, which carries it to the store
(``SaveRequest.ledger``) in the same commit. A side-effecting call's ``dispatched`` mark is
such a write, so its record is stored before the effect starts; an idempotent call's record
rides the turn checkpoint after it. The writer adds the decision records the state's audit
gained since its previous write (:func:`ledger_write`). No write is added for the ledger: a
run that writes no checkpoint (a ``decision``-policy run that never suspended) records none.

It must not decide when a run writes (``_run`` does) and must not read a store.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import attrs

from .._decision_record import DecisionRecord
from .._effect_record import EffectRecord, effect_from_json, text_hash
from ..codec import dumps
from ..content import ToolCallContent, ToolResult
from ..redaction import Redactor, redact_value
from ..tools import idempotency_key
from ._gates import approvals_for
from ._ledger_rows import LedgerDecision, LedgerEffect, LedgerWrite
from ._receipts import process_actor
from ._state import StickyDecision, arguments_hash

__all__ = (
    "RunLedger",
    "approvers",
    "ledger_write",
    "result_hash",
)


def result_hash(result: ToolResult) -> str:
    """sha256 hex of the canonical JSON of ``result`` as the session stores it."""
    return text_hash(dumps(result))


def approvers(records: Iterable[DecisionRecord]) -> tuple[str, ...]:
    """The actors of ``records``, each once, oldest first (records without one left out)."""
    return tuple(dict.fromkeys(r.actor for r in records if r.actor))


class LedgerRun(Protocol):
    """What :meth:`RunLedger.of_run` reads of a durable run (``_run.DurableRun``)."""

    execution: Any
    options: Any
    agent_id: str

    @property
    def fencing_token(self) -> int:
        """The run's fencing token now."""

    @property
    def audit(self) -> Sequence[DecisionRecord]:
        """The run's decision audit so far."""

    @property
    def sticky(self) -> Sequence[StickyDecision]:
        """The run's sticky decisions."""


class RunLedger:
    """The effect records of one run's calls that its next checkpoint write carries.

    ``fencing_token`` and ``approvals`` are the run's: its token now, and the audit records
    that allowed a call (:func:`~._gates.approvals_for`); ``redactor`` is the run's redactor,
    applied to a result before it is hashed."""

    def __init__(
        self,
        *,
        run_id: str,
        session_id: str,
        agent_id: str,
        parent_run_id: str | None,
        ownership: Mapping[str, str] | None,
        fencing_token: Callable[[], int] = lambda: 0,
        approvals: Callable[[str, str], Sequence[DecisionRecord]] = lambda _id, _name: (),
        redactor: Redactor | None = None,
    ) -> None:
        self.run_id = run_id
        self.session_id = session_id
        self.agent_id = agent_id
        self.parent_run_id = parent_run_id
        self.ownership = dict(ownership) if ownership else None
        self._fencing_token = fencing_token
        self._approvals = approvals
        self._redactor = redactor
        #: Records by tool call id, as this run last made them.
        self.records: dict[str, EffectRecord] = {}
        #: The ids of records changed since the last write that carried them.
        self._dirty: dict[str, None] = {}

    @classmethod
    def of_run(cls, run: LedgerRun) -> RunLedger:
        """The ledger of ``run``, bound to its fencing token, audit and redactor."""
        execution = run.execution
        return cls(
            run_id=execution.run_id,
            session_id=execution.session_id,
            agent_id=run.agent_id,
            parent_run_id=execution.parent_run_id,
            ownership=run.options.ownership,
            fencing_token=lambda: run.fencing_token,
            approvals=lambda call_id, name: approvals_for(run.audit, run.sticky, call_id, name),
            redactor=execution.plan.redactor,
        )

    def started(self, call: ToolCallContent, effect: str | None) -> None:
        """``call``, of a tool whose ``effect`` is that, is about to start: its record, status
        ``dispatched`` (none for a read-only tool). The run's next write carries it (for a
        side-effecting call, its ``dispatched`` mark)."""
        if effect == "read":
            return
        self.put(
            EffectRecord(
                run_id=self.run_id,
                session_id=self.session_id,
                parent_run_id=self.parent_run_id,
                agent_id=self.agent_id,
                tool_name=call.name,
                tool_call_id=call.id,
                idempotency_key=idempotency_key(self.run_id, call.id),
                fencing_token=self._fencing_token(),
                arguments=dict(call.arguments),
                arguments_hash=arguments_hash(call.arguments),
                status="dispatched",
                started_at=time.time(),
                executed_by=process_actor(),
                approved_by=approvers(self._approvals(call.id, call.name)),
                ownership=self.ownership,
            )
        )

    def finished(self, call_id: str, result: ToolResult, *, failed: bool) -> None:
        """The dispatched call ``call_id`` answered ``result`` (``failed``: an error); its
        record (if it has one) keeps the hash of the result as redacted for the session."""
        record = self.records.get(call_id)
        if record is None:
            return
        self.put(
            attrs.evolve(
                record,
                status="failed" if failed else "completed",
                result_hash=result_hash(redact_value(result, self._redactor)),
                finished_at=time.time(),
            )
        )

    def put(self, record: EffectRecord) -> None:
        """Keep ``record`` for the next write (it replaces this run's record of the call)."""
        self.records[record.tool_call_id] = record
        self._dirty[record.tool_call_id] = None

    def pending(self) -> tuple[EffectRecord, ...]:
        """The records the next write carries."""
        return tuple(self.records[call_id] for call_id in self._dirty)

    def written(self, records: Sequence[EffectRecord]) -> None:
        """A write carried ``records``: they are no longer pending (unless changed since)."""
        for record in records:
            if self.records.get(record.tool_call_id) is record:
                self._dirty.pop(record.tool_call_id, None)


def _decision_rows(
    data: Mapping[str, Any], written: int, ownership: Mapping[str, str] | None
) -> tuple[tuple[LedgerDecision, ...], int]:
    """The decision rows of the audit in the state's JSON ``data`` that the ledger does not
    hold yet (``written``: how many of the run's decisions it holds), and the new total."""
    audit = data.get("audit") or []
    total = int(data.get("audit_omitted") or 0) + len(audit)
    fresh = total - written
    if fresh <= 0 or not isinstance(audit, list):
        return (), max(total, written)
    shown = audit[-fresh:] if fresh <= len(audit) else audit
    first = total - len(shown)
    rows = []
    owner = dict(ownership) if ownership else None
    for offset, entry in enumerate(shown):
        if not isinstance(entry, Mapping):
            continue
        row = {
            "kind": "decision",
            "run_id": data.get("run_id"),
            "session_id": data.get("session_id"),
            "agent_id": data.get("agent_id"),
            "parent_run_id": data.get("parent_run_id"),
            "position": first + offset,
            "ownership": owner,
            **entry,
        }
        decided = entry.get("decided_at")
        rows.append(
            LedgerDecision(
                run_id=str(data.get("run_id")),
                session_id=str(data.get("session_id")),
                position=first + offset,
                decided_at=float(decided) if isinstance(decided, int | float) else 0.0,
                ownership=owner,
                text=dumps(row).decode("utf-8"),
            )
        )
    return tuple(rows), total


def ledger_write(
    data: Mapping[str, Any],
    effects: Sequence[EffectRecord],
    *,
    decisions_written: int,
    redactor: Redactor | None,
    ownership: Mapping[str, str] | None,
) -> tuple[LedgerWrite | None, int]:
    """The ledger rows one save of the (redacted) state ``data`` carries: ``effects``,
    redacted with ``redactor``, and the decisions of its audit past ``decisions_written``;
    and the run's decision total once the save is written."""
    decisions, total = _decision_rows(data, decisions_written, ownership)
    rows = tuple(
        LedgerEffect.of(effect_from_json(redact_value(record.to_json(), redactor)))
        for record in effects
    )
    if not rows and not decisions:
        return None, total
    return LedgerWrite(effects=rows, decisions=decisions), total
