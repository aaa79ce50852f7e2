"""Resume, calls that need more than one approver: counting distinct actors' allows.

A pending decision whose tool has ``approvers=N`` (recorded on the decision as ``approvers``)
is settled by ``N`` allows from distinct actors. Each allow before the last is audited and
recorded in the decision's ``approved_by``; the run stays suspended on the same decision. An
allow without an actor, or by an actor already listed, is refused
(``ERR_PRISM_DECISION_APPROVER``) before anything is written. Such a call is allowed once per
person: ``allow_for_run`` and edited arguments are refused on it (each person must approve
exactly the call that runs). One reject ends it, as for any call.

It checks and counts; it must not write (the pipeline settles a partly approved run).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from ..durable._state import Interruption, PendingDecision
from ..errors import AgentDecisionError
from ..redaction import Redactor, redact_value
from ._input import RunDecision

__all__ = ("APPROVER_CODE", "approvals_after", "kept_interruption")

APPROVER_CODE = "ERR_PRISM_DECISION_APPROVER"


def approvals_after(
    target: PendingDecision,
    decision: RunDecision,
    actor: str | None,
    index: int,
    redactor: Redactor | None,
) -> tuple[str, ...] | None:
    """The decision's ``approved_by`` after ``decision`` when it is an allow that leaves the
    call still short of its approvers (so it stays pending), else ``None`` (the decision
    settles the call as usual). Refuses an allow the rules above do not let count."""
    needed = target.approvers or 1
    if needed < 2 or target.kind != "tool_approval" or not decision.outcome.startswith("allow"):
        return None
    where = f"decisions[{index}]"
    if decision.outcome == "allow_for_run":
        raise AgentDecisionError(
            f"{where} allows for the whole run a call that needs {needed} approvers; each of "
            "them allows it once (allow_once)",
            code="ERR_PRISM_DECISION_SCOPE",
        )
    if decision.modified_arguments is not None:
        raise AgentDecisionError(
            f"{where} edits the arguments of a call that needs {needed} approvers; every "
            "approver must allow the same call (reject it to have it asked again)",
            code="ERR_PRISM_DECISION_SCOPE",
        )
    if actor is None:
        raise AgentDecisionError(
            f"{where} allows a call that needs {needed} distinct approvers without naming who "
            "allows it; give the resume input an actor",
            code=APPROVER_CODE,
        )
    # Compared as stored: the writer redacts every actor it records.
    who = redact_value(actor, redactor)
    before = target.approved_by or ()
    if who in before:
        raise AgentDecisionError(
            f"{where}: this actor has already allowed this call; it needs {needed} distinct "
            f"approvers ({len(before)} so far)",
            code=APPROVER_CODE,
        )
    after = (*before, who)
    return after if len(after) < needed else None


def kept_interruption(
    original: Interruption, remaining: Sequence[PendingDecision]
) -> Interruption | None:
    """The interruption of a run that still waits for exactly the decisions it waited for
    (some only partly approved): the same one, with those decisions as they stand now, in
    their recorded order; ``None`` when some of them were settled."""
    now = {d.approval_id: d for d in remaining}
    recorded = original.pending_decisions
    if len(now) != len(remaining) or set(now) != {d.approval_id for d in recorded}:
        return None
    return attrs.evolve(original, pending_decisions=tuple(now[d.approval_id] for d in recorded))
