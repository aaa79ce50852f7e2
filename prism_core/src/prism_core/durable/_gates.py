"""Gates: the tool calls a durable run holds for a decision, and how a suspension records them.

A :class:`Gate` is a call the run loop stopped before its side effect (an approval, an
elicitation, an input guardrail's ask, or a sub-agent's own decision); a suspension writes
one :class:`~._state.PendingDecision` per gate and one :class:`~._state.Interruption` for them
all. It builds values only; it must not write a checkpoint.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ..content import ToolCallContent
from ..tools import ToolDefinition
from ._state import (
    DecisionKind,
    DecisionRecord,
    DecisionScope,
    Interruption,
    PendingDecision,
    StickyDecision,
    arguments_hash,
)

__all__ = (
    "Gate",
    "approvals_for",
    "interruption_for",
    "new_approval_id",
    "pending_decision",
    "scope_for",
)


@attrs.frozen(kw_only=True)
class Gate:
    """A tool call held for a human decision (``elicitation_schema``: the answer an
    elicitation asks for; ``guardrail_rule``: the pack rule an ask came from).

    A nested gate holds a call of a sub-agent tool for one of its child run's decisions:
    ``child_run_id`` names the child, and ``kind``, ``scope``, ``reason``, ``guardrail``,
    ``elicitation_schema``, ``approvers``, ``approved_by`` and the deadline are the child
    decision's (``scope`` is ``None`` for a child's input-guardrail decision).

    ``approvers`` is how many distinct actors must allow the call; ``timeout_ms`` how long the
    decision may wait (the tool's ``approval_timeout_ms``; ``None``: the run's). A nested
    gate carries its child decision's ``pending_since``/``expires_at`` instead.
    """

    call: ToolCallContent
    tool: ToolDefinition | None
    kind: DecisionKind
    reason: str | None
    guardrail: str | None
    scope: DecisionScope | None
    approval_id: str
    child_run_id: str | None = None
    elicitation_schema: Mapping[str, Any] | None = None
    guardrail_rule: Mapping[str, str] | None = None
    approvers: int = 1
    timeout_ms: int | None = None
    approved_by: tuple[str, ...] | None = None
    pending_since: float | None = None
    expires_at: float | None = None


def new_approval_id() -> str:
    """A fresh, unguessable approval id."""
    return f"appr_{uuid.uuid4().hex}"


def scope_for(agent_id: str, call: ToolCallContent, tool: ToolDefinition | None) -> DecisionScope:
    """The decision scope of ``call``."""
    return DecisionScope(
        tool_name=call.name,
        effect_kind=tool.effect if tool is not None else None,
        identity=f"{agent_id}/{call.name}",
        arguments_hash=arguments_hash(call.arguments),
    )


def pending_decision(
    gate: Gate, *, now: float | None = None, timeout_ms: int | None = None
) -> PendingDecision:
    """The decision a suspension records for ``gate``: suspended at ``now`` (epoch seconds),
    it expires after the gate's own timeout, else ``timeout_ms`` (the run's), if either is
    set; a nested gate keeps its child decision's deadline."""
    nested = gate.child_run_id is not None
    schema = gate.elicitation_schema if gate.kind == "elicitation" else None
    since, until = gate.pending_since, gate.expires_at
    timeout = gate.timeout_ms if gate.timeout_ms is not None else timeout_ms
    if not nested and timeout is not None and now is not None:
        since, until = now, now + timeout / 1000
    return PendingDecision(
        approvers=gate.approvers if gate.approvers > 1 else None,
        approved_by=gate.approved_by or None,
        pending_since=since,
        expires_at=until,
        approval_id=gate.approval_id,
        kind=gate.kind,
        reason=gate.reason,
        guardrail=gate.guardrail,
        elicitation_schema=dict(schema) if schema is not None else None,
        scope=gate.scope if gate.kind != "input_guardrail" else None,
        tool_call_id=gate.call.id if nested or gate.kind != "input_guardrail" else None,
        guardrail_rule=dict(gate.guardrail_rule) if gate.guardrail_rule else None,
    )


def interruption_for(
    decisions: Sequence[PendingDecision], *, reason: str | None = None, kind: Any = None
) -> Interruption:
    """The interruption for ``decisions``: one decision's kind, reason, call and guardrail;
    several as one ``tool_approval`` interruption, "N tool side effects require approval"
    (``reason``/``kind`` replace those, as a partly decided batch's re-suspension does)."""
    if len(decisions) == 1:
        single = decisions[0]
        return Interruption(
            kind=kind or single.kind,
            reason=reason if reason is not None else single.reason,
            tool_call_id=single.tool_call_id,
            guardrail=single.guardrail if reason is None else None,
            pending_decisions=tuple(decisions),
        )
    several = f"{len(decisions)} tool side effects require approval"
    return Interruption(
        kind=kind or "tool_approval",
        reason=reason if reason is not None else several,
        pending_decisions=tuple(decisions),
    )


def approvals_for(
    audit: Sequence[DecisionRecord],
    sticky: Sequence[StickyDecision],
    tool_call_id: str,
    tool_name: str,
) -> tuple[DecisionRecord, ...]:
    """The audit records that allowed call ``tool_call_id``: its own ``allow_*`` records
    (every approver's, oldest first), else, for a call a sticky ``allow_for_run`` let
    through, the records that made that decision; ``()`` when none was needed."""
    own = tuple(
        record
        for record in audit
        if record.tool_call_id == tool_call_id and record.outcome.startswith("allow_")
    )
    if own:
        return own
    if not any(d.outcome == "allow_for_run" and d.scope.tool_name == tool_name for d in sticky):
        return ()
    return tuple(
        record
        for record in audit
        if record.outcome == "allow_for_run" and record.tool_name == tool_name
    )
