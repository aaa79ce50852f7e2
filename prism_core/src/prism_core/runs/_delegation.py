"""Delegation: a tool call that runs a sub-agent, as the tool round sees it.

A tool whose ``execute`` is a :class:`Delegate` (``agent.as_tool()`` builds one) is not
executed like a host function: the tool round hands the call to the delegate, which runs the
child and yields its events, wrapped as :class:`~prism_core.SubAgentEvent`, as they happen.
This module owns what the parent lends the child and what it takes back. The delegate sees the
parent through :class:`ParentRun`, a narrow view made for each call (:func:`parent_view`),
never the parent's whole state:

- the budget: the child's limits are what is left of the parent's on every shared axis
  (:func:`child_budget`), its deadline at most the parent's, and what the child spent is added
  to the parent's counters and checked against the parent's limits (:func:`charge_child`);
- the guards: every guard the parent applies to its own tool calls applies to the child's
  (:func:`child_guardrails`);
- a child suspension: one nested gate per child decision (:func:`nested_gates`), so the
  parent suspends with them.

It must not start, resume or read a child run itself: the delegate (``resume/_child_runs``)
does.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import anyio
import attrs

from ..content import ErrorInfo, ToolCallContent, ToolResult, Usage
from ..durable import Gate, Interruption, PendingCall, RunStateOptions, nested_approval_id
from ..events import AgentEvent
from ..guardrails import GuardrailConfig
from ..limits import RunLimits
from ..signals import AbortSignal
from ..tools import ToolDefinition
from ._counters import RunCounters
from ._failures import RunFailure
from ._state import RunState

__all__ = (
    "ChildOutcome",
    "Delegate",
    "ParentRun",
    "charge_child",
    "child_budget",
    "child_guardrails",
    "delegate_of",
    "nested_gates",
    "parent_view",
)

#: The counter axes a child shares with its parent, with the counter each one charges.
_COUNTED = (
    ("max_turns", "turns"),
    ("max_provider_attempts", "provider_attempts"),
    ("max_tool_rounds", "tool_rounds"),
    ("max_tool_calls", "tool_calls"),
)
_TOKENS = (
    ("max_input_tokens", "input_tokens"),
    ("max_output_tokens", "output_tokens"),
    ("max_total_tokens", "total_tokens"),
)


@attrs.define
class ChildOutcome:
    """How a delegated call ended: the ``result`` the parent stores, or the child's
    ``suspension`` (its ``child_run_id`` names the child)."""

    child_run_id: str | None = None
    result: ToolResult | None = None
    suspension: Interruption | None = None


@attrs.frozen(kw_only=True)
class ParentRun:
    """What a sub-agent's delegate sees of the run that calls it (see :func:`parent_view`)."""

    run_id: str
    """The parent run's id (the child's ids derive from it)."""
    session_id: str
    """The parent's session id."""
    session_store: Any
    """The parent's session store (the child's session lives there too)."""
    started_by: str | None
    """Who started the parent (the child runs for the same actor)."""
    signal: AbortSignal
    """The parent's abort signal (aborting the parent aborts the child)."""
    guardrails: GuardrailConfig
    """Every guard of the parent (its tool-call guards apply to the child's calls)."""
    limits: RunLimits
    """The parent's limits (the child gets what is left of them)."""
    counters: RunCounters = attrs.field(eq=False)
    """The parent's live counters: what the child spends is charged to them."""
    deadline: float | None
    """The parent's wall-time deadline (the child's is at most this)."""
    durable: RunStateOptions | None
    """The parent's durable options (``None``: the parent is not durable)."""
    pending_calls: tuple[PendingCall, ...]
    """The parent's pending calls (a suspended child's recorded decision rides one)."""
    children: Mapping[str, Any]
    """For a ``continue`` of the parent: by call id, what a running child's ``continue`` is
    handed."""
    emit: Callable[[AgentEvent], AgentEvent] = attrs.field(eq=False)
    """Publish an event as the parent (redacted by the parent's redactor)."""


def parent_view(run: RunState) -> ParentRun:
    """The narrow view of ``run`` its sub-agent delegate works with."""
    durable = run.durable
    return ParentRun(
        run_id=run.run_id,
        session_id=run.session_id,
        session_store=run.session.store,
        started_by=run.started_by,
        signal=run.signal,
        guardrails=run.plan.guardrails,
        limits=run.plan.limits,
        counters=run.counters,
        deadline=run.deadline,
        durable=durable.options if durable is not None else None,
        pending_calls=tuple(durable.pending_calls) if durable is not None else (),
        children=getattr(run.resume, "children", None) or {},
        emit=run.emit,
    )


@runtime_checkable
class Delegate(Protocol):
    """The ``execute`` of a tool that runs a sub-agent."""

    def run_child(
        self, parent: ParentRun, call: ToolCallContent, outcome: ChildOutcome
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run (start, resume or continue) the child for ``call``, yielding its events as the
        parent emits them, and fill ``outcome`` before the generator ends."""
        ...


def delegate_of(tool: ToolDefinition) -> Delegate | None:
    """The delegate of a sub-agent tool, or ``None`` for any other tool."""
    execute = tool.execute
    return execute if isinstance(execute, Delegate) else None


def child_guardrails(guards: GuardrailConfig) -> GuardrailConfig | None:
    """The guards a parent applies to tool calls (``guards`` are all of its guards: its
    agent's, its packs', its run's), as the child run's own tool-call guards; ``None`` when
    there are none."""
    if not guards.tool_input and not guards.tool_output:
        return None
    return GuardrailConfig(
        tool_input=guards.tool_input,
        tool_output=guards.tool_output,
        max_concurrency=guards.max_concurrency,
    )


def child_budget(parent: ParentRun, spent: RunCounters) -> dict[str, Any]:
    """The child's limits, as run limits: on each axis the parent limits, what the child
    ``spent`` before (its counters when this stretch starts) plus what the parent has left."""
    limits, counters = parent.limits, parent.counters
    budget: dict[str, Any] = {
        "max_request_bytes": limits.max_request_bytes,
        "max_response_bytes": limits.max_response_bytes,
    }
    for axis, counter in _COUNTED:
        ceiling = getattr(limits, axis)
        if ceiling is not None:
            left = max(0, ceiling - getattr(counters, counter))
            budget[axis] = getattr(spent, counter) + left
    for axis, field in _TOKENS:
        ceiling = getattr(limits, axis)
        if ceiling is not None:
            left = max(0, ceiling - getattr(counters.usage, field))
            budget[axis] = getattr(spent.usage, field) + left
    if limits.max_cost is not None:
        left_cost = max(0.0, limits.max_cost - (counters.usage.cost or 0.0))
        budget["max_cost"] = (spent.usage.cost or 0.0) + left_cost
    if limits.cost_currency is not None:
        budget["cost_currency"] = limits.cost_currency
    if parent.deadline is not None:
        budget["max_wall_time_ms"] = max(0.0, (parent.deadline - anyio.current_time()) * 1000)
    return budget


def _usage_spent(after: Usage, before: Usage) -> Usage:
    cost: float | None = None
    if after.cost is not None:
        cost = after.cost - (before.cost or 0.0)
    return Usage(
        input_tokens=after.input_tokens - before.input_tokens,
        output_tokens=after.output_tokens - before.output_tokens,
        total_tokens=after.total_tokens - before.total_tokens,
        cache_read_tokens=after.cache_read_tokens - before.cache_read_tokens,
        cache_write_tokens=after.cache_write_tokens - before.cache_write_tokens,
        reasoning_tokens=after.reasoning_tokens - before.reasoning_tokens,
        cost=cost,
        currency=after.currency,
    )


def charge_child(parent: ParentRun, before: RunCounters, after: RunCounters) -> None:
    """Add what the child spent between ``before`` and ``after`` to the parent's counters and
    check them against the parent's limits (a breach ends the parent like its own would)."""
    counters = parent.counters
    for _axis, counter in _COUNTED:
        spent = getattr(after, counter) - getattr(before, counter)
        setattr(counters, counter, getattr(counters, counter) + spent)
    if after.usage_reported:
        counters.add_usage(_usage_spent(after.usage, before.usage), parent.limits)
    for axis, counter in _COUNTED:
        counters.charge(axis, getattr(counters, counter), parent.limits)


def nested_gates(
    parent: RunState,
    call: ToolCallContent,
    tool: ToolDefinition,
    outcome: ChildOutcome,
    gates: list[Gate] | None,
) -> None:
    """Hold ``call`` with one nested gate per decision its child suspended for. A parent that
    cannot suspend (no durable state) fails: its child's decision could never be made."""
    interruption = outcome.suspension
    assert interruption is not None
    assert outcome.child_run_id is not None
    if gates is None or parent.durable is None:
        raise RunFailure(
            ErrorInfo(
                f"the sub-agent of tool call {call.id} ({call.name}) suspended for a decision, "
                "but its parent run is not durable and cannot suspend; give the parent a "
                "run_state",
                code="ERR_PRISM_SUBAGENT_SUSPENDED",
            )
        )
    for decision in interruption.pending_decisions:
        gates.append(
            Gate(
                call=call,
                tool=tool,
                kind=decision.kind,
                reason=decision.reason,
                guardrail=decision.guardrail,
                scope=decision.scope,
                approval_id=nested_approval_id(parent.run_id, decision.approval_id),
                child_run_id=outcome.child_run_id,
                elicitation_schema=decision.elicitation_schema,
                approvers=decision.approvers or 1,
                approved_by=decision.approved_by,
                pending_since=decision.pending_since,
                expires_at=decision.expires_at,
            )
        )
