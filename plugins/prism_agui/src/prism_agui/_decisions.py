"""A ``resume`` as one decision batch: each AG-UI resume entry becomes one ``RunDecision``.

- ``status: "resolved"`` on a tool approval: ``{"approved": true}`` allows the call once
  (``"arguments"``, when given, replace its arguments and are revalidated by the core);
  ``{"approved": false, "reason"?}`` rejects it once.
- ``status: "resolved"`` on an elicitation: the payload is the answer (checked against its
  schema by the core).
- ``status: "cancelled"``: the call is rejected once.

Only ``allow_once`` and ``reject_once`` are ever produced: a resume from a frontend cannot
``continue`` a run, resolve an in-doubt call, or decide for the rest of the run. A payload
this module cannot read is refused whole, before the core (and any store) is reached.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ag_ui.core import ResumeEntry

from prism_core import AgentDecisionError

__all__ = ("CANCELLED_REASON", "decisions_for")

CANCELLED_REASON = "cancelled by the user"
_APPROVAL_KEYS = frozenset({"approved", "arguments", "reason"})


def _invalid(interrupt_id: str, problem: str) -> AgentDecisionError:
    return AgentDecisionError(
        f"resume entry for interrupt {interrupt_id[:80]!r}: {problem}",
        code="ERR_PRISM_DECISION_INVALID",
    )


def _approval(entry: ResumeEntry) -> dict[str, Any]:
    payload = entry.payload
    interrupt_id = entry.interrupt_id
    if not isinstance(payload, Mapping):
        raise _invalid(interrupt_id, 'the payload must be an object {"approved": true|false}')
    unknown = sorted(str(key) for key in payload if key not in _APPROVAL_KEYS)
    if unknown:
        # Refused, not ignored: an edit sent under another name must not approve the
        # original arguments.
        raise _invalid(interrupt_id, f"unknown payload keys {', '.join(unknown)[:200]}")
    approved = payload.get("approved")
    if not isinstance(approved, bool):
        raise _invalid(interrupt_id, '"approved" must be true or false')
    decision: dict[str, Any] = {
        "approval_id": interrupt_id,
        "outcome": "allow_once" if approved else "reject_once",
    }
    reason = payload.get("reason")
    if reason is not None:
        if not isinstance(reason, str):
            raise _invalid(interrupt_id, '"reason" must be a string')
        decision["reason"] = reason
    if "arguments" in payload:
        arguments = payload["arguments"]
        if not isinstance(arguments, Mapping):
            raise _invalid(interrupt_id, '"arguments" must be an object')
        if not approved:
            raise _invalid(interrupt_id, '"arguments" apply only to an approved call')
        decision["modified_arguments"] = dict(arguments)
    return decision


def _elicitation(entry: ResumeEntry) -> dict[str, Any]:
    if not isinstance(entry.payload, Mapping):
        raise _invalid(entry.interrupt_id, "the payload must be an object (the answer)")
    return {
        "approval_id": entry.interrupt_id,
        "outcome": "allow_once",
        "elicitation": dict(entry.payload),
    }


def decisions_for(resume: Sequence[ResumeEntry], kinds: Mapping[str, str]) -> list[dict[str, Any]]:
    """The decision batch answering ``resume``; ``kinds`` maps the pending approval ids to
    their kind. An id that is not pending is read as a tool approval (the core then refuses
    the batch as naming an unknown decision)."""
    decisions = []
    for entry in resume:
        if entry.status == "cancelled":
            decisions.append(
                {
                    "approval_id": entry.interrupt_id,
                    "outcome": "reject_once",
                    "reason": CANCELLED_REASON,
                }
            )
        elif kinds.get(entry.interrupt_id) == "elicitation":
            decisions.append(_elicitation(entry))
        else:
            decisions.append(_approval(entry))
    return decisions
