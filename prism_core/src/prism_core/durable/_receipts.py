"""Receipts: what became of each call a decision allowed.

After a call that a person allowed (its own ``allow_*`` records in the audit) has run, the run's
audit gains a :class:`~prism_core.DecisionRecord` with outcome ``"executed"`` or
``"execution_failed"`` (a call blocked before it started, on a re-check, counts as failed:
``reason`` says it never ran), on channel ``"worker"``, naming the process that ran it as
``"host:pid"``. A crash that leaves such a call in doubt gets ``"in_doubt"`` from the
``continue`` that finds it and settles it (naming the process that had dispatched it, which
its ``dispatched`` mark records). The records ride the checkpoints the run writes anyway.

:class:`ReceiptBook` is what one run still owes: the allowed calls it was handed to run. A run
never ends ``succeeded`` while it owes one (the run loop checks :meth:`ReceiptBook.owed`).
It builds records only; it must not write.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable, Mapping, Sequence

from .._decision_record import DecisionRecord
from ._gates import approvals_for
from ._state import AgentRunState, PendingCall, StickyDecision

__all__ = (
    "EXECUTED",
    "EXECUTION_FAILED",
    "IN_DOUBT",
    "RECEIPT_OUTCOMES",
    "WORKER_CHANNEL",
    "ReceiptBook",
    "allowed",
    "continue_receipts",
    "process_actor",
    "receipt",
)

EXECUTED = "executed"
EXECUTION_FAILED = "execution_failed"
IN_DOUBT = "in_doubt"
RECEIPT_OUTCOMES = (EXECUTED, EXECUTION_FAILED, IN_DOUBT)
WORKER_CHANNEL = "worker"
#: The reason of a receipt a ``continue`` wrote for a call whose result the stopped process
#: had stored (its receipt was to ride the checkpoint that process never wrote).
RECOVERED = "recorded by the continue after a restart"
IN_DOUBT_REASON = "the process that ran it stopped before its result was stored"


def process_actor() -> str:
    """This process as a receipt names it: ``"<hostname>:<pid>"``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def allowed(
    audit: Sequence[DecisionRecord],
    tool_call_id: str,
    *,
    sticky: Sequence[StickyDecision] = (),
    tool_name: str | None = None,
) -> DecisionRecord | None:
    """The last record that allowed call ``tool_call_id``: its own last ``allow_*``, else
    (given the run's ``sticky`` decisions and the call's ``tool_name``) the ``allow_for_run``
    record that let it through; ``None`` when no decision allowed it."""
    # Without a tool name no sticky decision can match: approvals_for returns the call's own.
    found = approvals_for(audit, sticky if tool_name else (), tool_call_id, tool_name or "")
    return found[-1] if found else None


def receipt(
    allow: DecisionRecord,
    outcome: str,
    *,
    version: int,
    arguments_hash: str | None = None,
    actor: str | None = None,
    reason: str | None = None,
    tool_call_id: str | None = None,
) -> DecisionRecord:
    """The receipt of the call ``allow`` allowed (``actor``: this process by default;
    ``tool_call_id``: the call a sticky ``allow`` let through, else the allowed call)."""
    return DecisionRecord(
        approval_id=allow.approval_id,
        tool_call_id=tool_call_id or allow.tool_call_id,
        tool_name=allow.tool_name,
        outcome=outcome,
        actor=actor or process_actor(),
        channel=WORKER_CHANNEL,
        reason=reason,
        arguments_hash=arguments_hash or allow.arguments_hash,
        decided_at=time.time(),
        version=version,
    )


class ReceiptBook:
    """The allowed calls a run was handed to run and owes a receipt for."""

    def __init__(self) -> None:
        #: Call id → the record that allowed it (its own, or a sticky ``allow_for_run``).
        self._owed: dict[str, DecisionRecord] = {}

    def owe(self, audit: Sequence[DecisionRecord], calls: Iterable[PendingCall]) -> None:
        """Owe a receipt for each ``approved`` call among ``calls`` that a decision allowed."""
        for call in calls:
            allow = allowed(audit, call.tool_call_id) if call.status == "approved" else None
            if allow is not None:
                self._owed[call.tool_call_id] = allow

    def owe_call(self, tool_call_id: str, allow: DecisionRecord) -> None:
        """Owe a receipt for call ``tool_call_id``, which ``allow`` (a sticky
        ``allow_for_run``) let through without a decision of its own."""
        self._owed[tool_call_id] = allow

    def owes(self, tool_call_id: str) -> bool:
        """Whether the run owes call ``tool_call_id`` a receipt."""
        return tool_call_id in self._owed

    def settle(
        self,
        audit: list[DecisionRecord],
        tool_call_id: str,
        outcome: str,
        *,
        version: int,
        arguments_hash: str | None = None,
        reason: str | None = None,
    ) -> None:
        """Append the receipt of an owed call to ``audit`` (nothing for another call)."""
        allow = self._owed.pop(tool_call_id, None)
        if allow is None:
            return
        audit.append(
            receipt(
                allow,
                outcome,
                version=version,
                arguments_hash=arguments_hash,
                reason=reason,
                tool_call_id=tool_call_id,
            )
        )

    def owed(self) -> tuple[str, ...]:
        """The calls still owed a receipt, sorted."""
        return tuple(sorted(self._owed))


def _last_is_receipt(
    audit: Sequence[DecisionRecord], tool_call_id: str, outcomes: Sequence[str]
) -> bool:
    last = None
    for record in audit:
        if record.tool_call_id == tool_call_id:
            last = record
    return last is not None and last.outcome in outcomes


def continue_receipts(
    loaded: AgentRunState,
    in_doubt: Sequence[PendingCall],
    finished: Mapping[str, bool],
    *,
    version: int,
) -> list[DecisionRecord]:
    """The receipts a ``continue`` adds to its claim: ``in_doubt`` for each allowed call it
    settles in doubt, and, for each allowed call whose result the stopped process stored
    (``finished``: call id → whether the result is an error) without its receipt,
    ``executed`` or ``execution_failed``. Each names the process its ``dispatched`` mark
    recorded (else this one)."""
    records: list[DecisionRecord] = []
    audit = loaded.audit
    by_id = {call.tool_call_id: call for call in loaded.pending_calls}
    sticky = loaded.sticky_decisions
    for call in in_doubt:
        allow = allowed(audit, call.tool_call_id, sticky=sticky, tool_name=call.name)
        if allow is None or _last_is_receipt(audit, call.tool_call_id, (IN_DOUBT,)):
            continue
        records.append(
            receipt(
                allow,
                IN_DOUBT,
                version=version,
                arguments_hash=call.arguments_hash,
                actor=call.dispatched_by,
                reason=IN_DOUBT_REASON,
                tool_call_id=call.tool_call_id,
            )
        )
    for call_id, failed in finished.items():
        pending = by_id.get(call_id)
        name = pending.name if pending is not None else None
        allow = allowed(audit, call_id, sticky=sticky, tool_name=name)
        if pending is None or allow is None or pending.status not in ("approved", "dispatched"):
            continue
        if _last_is_receipt(audit, call_id, (EXECUTED, EXECUTION_FAILED)):
            continue
        records.append(
            receipt(
                allow,
                EXECUTION_FAILED if failed else EXECUTED,
                version=version,
                arguments_hash=pending.arguments_hash,
                actor=pending.dispatched_by,
                reason=RECOVERED,
                tool_call_id=call_id,
            )
        )
    return records
