"""The decision audit's record: who settled which pending call of a durable run, how and when.

It is part of the run state's schema (``durable/_state.py``) and lives below it, so a tool's
context (``ToolExecutionContext.approvals``) can carry the records that allowed a call; it
must not read or write a store.
"""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ("DecisionRecord",)


@attrs.frozen(kw_only=True)
class DecisionRecord:
    """One entry of a run's decision audit: a decision that settled a pending call.

    Written for every entry of an approve, a deny, a decision batch (edits, sticky outcomes
    and elicitation answers included) and every in-doubt resolution of a ``continue``, and
    carried by every later checkpoint of the run, finished ones included.

    - ``approval_id``: the pending decision it settled (``None`` for an in-doubt resolution).
    - ``tool_call_id``, ``tool_name``: the call (``None`` for an input-guardrail decision).
    - ``outcome``: the decision's outcome (``allow_once``, ``allow_for_run``,
      ``reject_once``, ``reject_for_run``), ``"deny"`` for a denied run, the resolution's
      ``completed`` / ``not_started`` / ``failed``, ``"expired"`` for a decision that waited
      past its deadline, or a receipt of an allowed call that ran: ``"executed"``,
      ``"execution_failed"`` or ``"in_doubt"`` (channel ``"worker"``, actor the process that
      ran it, ``"host:pid"``).
    - ``actor``: who decided (the resume input's ``actor``, the face's caller; ``None`` when
      none was given); ``"prism"`` for the kernel's own settlements (an idempotent call
      settled by a continue, a tool's ``reconcile``, whose ``reason`` then says
      ``idempotent`` or ``reconcile``, and an expiry).
    - ``channel``: the door the decision came through (``"cli"``, ``"console"``, ``"api"``,
      ``"agui"``, ``"a2a"``, ``"celery"``, ``"worker"``, ``"kernel"`` for the kernel's own,
      else the resume input's ``channel``, default ``"host"``); ``None`` in records written
      before channels were recorded.
    - ``reason``: the decision's reason, else the resume input's.
    - ``arguments_hash``: sha256 of the arguments the call runs with (the edited ones after an
      edit).
    - ``decided_at``: when, in epoch seconds; ``version``: the checkpoint version the decision
      claimed (the resume's ``expected_version``).

    Actor and reason are redacted with the run's redactor before they are stored.
    """

    approval_id: str | None
    tool_call_id: str | None
    tool_name: str | None
    outcome: str
    actor: str | None = None
    channel: str | None = None
    reason: str | None = None
    arguments_hash: str | None = None
    decided_at: float
    version: int

    def to_json(self) -> dict[str, Any]:
        """The record as the operator views print it (``prism runs show --json``, the API's
        run detail): every field, when first."""
        return {
            "decided_at": self.decided_at,
            "actor": self.actor,
            "channel": self.channel,
            "approval_id": self.approval_id,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "outcome": self.outcome,
            "reason": self.reason,
            "arguments_hash": self.arguments_hash,
            "version": self.version,
        }
