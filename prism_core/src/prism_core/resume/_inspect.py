"""What an operator needs to decide a run: its calls waiting for a decision or in doubt, shown.

:func:`inspect_agent_run` reads the run's checkpoint and the branch it points at, and pairs
each pending decision and each in-doubt call with the call itself: its tool, its arguments as
the session stored them (redacted when they were written, and again with the host's redactor
when one is given) and its idempotency key; it adds every call the run made with its result
and effect record, and the sub-agent runs its calls started (``_calls``). The server's API and
console and ``prism runs show`` print this; they must not read the branch themselves. It
reads; it must not write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ..durable._checkpoints import CheckpointStore
from ..durable._in_doubt import in_doubt_calls
from ..durable._options import AGENT_RUN_NAMESPACE
from ..durable._state import AgentRunState, DecisionRecord, DecisionScope
from ..records._entries import SessionEntry
from ..records._store import SessionEntryNotFoundError, SessionStore
from ..redaction import Redactor, redact_value
from ..tools import idempotency_key
from ._calls import CallView, child_runs, run_calls, run_effects
from ._checks import load_agent_run_state
from ._input import coerce_run_ref
from ._listing import AgentRunSummary, summarize_run

__all__ = (
    "AgentRunDetail",
    "CallView",
    "InDoubtCallView",
    "PendingCallView",
    "inspect_agent_run",
)


@attrs.frozen(kw_only=True)
class PendingCallView:
    """A decision the run waits for, with the call it decides."""

    approval_id: str
    kind: str
    tool_call_id: str | None
    tool_name: str | None
    arguments: Any
    """The call's arguments as stored (redacted); ``None`` when the branch does not hold it."""
    idempotency_key: str | None
    reason: str | None
    guardrail: str | None
    elicitation_schema: Mapping[str, Any] | None
    scope: DecisionScope | None
    approvers: int = 1
    """How many distinct actors must allow the call."""
    approved_by: tuple[str, ...] = ()
    """Who has allowed it so far (fewer than ``approvers``)."""
    pending_since: float | None = None
    expires_at: float | None = None
    """When the decision started pending and when it expires (epoch seconds), if it does."""


@attrs.frozen(kw_only=True)
class InDoubtCallView:
    """A call a crash left in doubt (marked dispatched, no result), with its arguments."""

    tool_call_id: str
    tool_name: str
    arguments: Any
    idempotency_key: str


@attrs.frozen(kw_only=True)
class AgentRunDetail:
    """A run as an operator sees it: the summary, the state, the metadata, the calls and the
    decision audit."""

    summary: AgentRunSummary
    state: AgentRunState
    metadata: Mapping[str, str] | None
    pending: tuple[PendingCallView, ...]
    in_doubt: tuple[InDoubtCallView, ...]
    #: Every tool call the run made, in order, with its result and effect record.
    calls: tuple[CallView, ...] = ()
    #: The sub-agent runs its calls started, in call order.
    children: tuple[AgentRunSummary, ...] = ()

    @property
    def audit(self) -> tuple[DecisionRecord, ...]:
        """The decisions that settled the run's pending calls, oldest first (see
        :class:`~prism_core.DecisionRecord`)."""
        return self.state.audit

    @property
    def audit_omitted(self) -> int:
        """How many older decision records the run's checkpoints no longer hold (a run keeps
        its newest 256)."""
        return self.state.audit_omitted


async def _branch(sessions: SessionStore | None, state: AgentRunState) -> list[SessionEntry]:
    """The run's branch (empty without a session store, a leaf, or a branch it can read)."""
    if sessions is None or state.leaf_id is None:
        return []
    try:
        return list(await sessions.read_branch_path(state.session_id, state.leaf_id))
    except SessionEntryNotFoundError:
        return []


def _branch_calls(path: list[SessionEntry]) -> dict[str, Any]:
    """The arguments of every tool call on the branch, by call id."""
    found: dict[str, Any] = {}
    for entry in path:
        message = entry.message
        if message is None or message.role != "assistant":
            continue
        for block in message.content:
            if block.type == "tool_call":
                found[block.id] = block.arguments
    return found


async def inspect_agent_run(
    checkpoints: CheckpointStore,
    sessions: SessionStore | None,
    ref: Any,
    *,
    ownership: Mapping[str, str] | None = None,
    redactor: Redactor | None = None,
) -> AgentRunDetail | None:
    """The run ``ref`` names (``{"run_id": ...}``), read from ``checkpoints`` and its branch
    from ``sessions`` (``None``: no arguments), as :class:`AgentRunDetail`; ``None`` when the
    run is unknown or ``ownership`` does not own it (a foreign run reads as absent)."""
    run = coerce_run_ref(ref)
    owner = dict(ownership) if ownership is not None else None
    record = await checkpoints.load(AGENT_RUN_NAMESPACE, run.run_id, ownership=owner)
    if record is None:
        return None
    found = await load_agent_run_state(checkpoints, run, ownership=owner)
    if found is None:
        return None
    state = found.state
    path = await _branch(sessions, state)
    arguments = _branch_calls(path)

    def shown(call_id: str | None) -> Any:
        return redact_value(arguments.get(call_id or ""), redactor)

    names = {call.tool_call_id: call.name for call in state.pending_calls}
    pending = []
    if state.interruption is not None:
        for decision in state.interruption.pending_decisions:
            call_id = decision.tool_call_id
            tool = decision.scope.tool_name if decision.scope is not None else None
            pending.append(
                PendingCallView(
                    approval_id=decision.approval_id,
                    kind=decision.kind,
                    tool_call_id=call_id,
                    tool_name=tool or names.get(call_id or ""),
                    arguments=shown(call_id),
                    idempotency_key=idempotency_key(state.run_id, call_id) if call_id else None,
                    reason=decision.reason,
                    guardrail=decision.guardrail,
                    elicitation_schema=decision.elicitation_schema,
                    scope=decision.scope,
                    approvers=decision.approvers or 1,
                    approved_by=decision.approved_by or (),
                    pending_since=decision.pending_since,
                    expires_at=decision.expires_at,
                )
            )
    doubt = set(in_doubt_calls(state))
    in_doubt = tuple(
        InDoubtCallView(
            tool_call_id=call.tool_call_id,
            tool_name=call.name,
            arguments=shown(call.tool_call_id),
            idempotency_key=idempotency_key(state.run_id, call.tool_call_id),
        )
        for call in state.pending_calls
        if call.tool_call_id in doubt
    )
    calls = run_calls(state.run_id, path, await run_effects(checkpoints, state.run_id, owner))
    if redactor is not None:
        calls = tuple(
            attrs.evolve(call, arguments=redact_value(call.arguments, redactor)) for call in calls
        )
    children = await child_runs(checkpoints, state.run_id, [c.tool_call_id for c in calls], owner)
    return AgentRunDetail(
        summary=summarize_run(record),
        state=state,
        metadata=found.metadata,
        pending=tuple(pending),
        in_doubt=in_doubt,
        calls=calls,
        children=children,
    )
