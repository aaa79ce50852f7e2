"""Resume, step three: applying the decisions to a suspended run's pending calls.

Owns matching each decision to its pending decision, the scope rules of each outcome, the
re-validation of edited arguments and elicitation answers (tool schema, host validator,
tool-input guardrails), sticky decisions, and what stays undecided. It reads the session's
packs; it must not write (the claim does, in ``_resume``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import attrs

from .._elicitation import elicitation_request
from .._threads import call_host
from ..content import ToolCallContent
from ..durable._options import DEFAULT_MAX_STICKY_DECISIONS
from ..durable._state import (
    AgentRunState,
    PendingCall,
    PendingDecision,
    StickyDecision,
    arguments_hash,
)
from ..errors import AgentDecisionError
from ..guardrails import GuardrailContext, evaluate_guardrails, first_decisive, rule_reason
from ..redaction import redact_value
from ..schema import validate_json_schema
from ..tools import ToolDefinition, ToolExecutionContext
from ._approvers import approvals_after
from ._input import ResumeInput, RunDecision
from ._ports import ResumableAgent, ResumedSession

__all__ = (
    "GUARD_REFUSAL",
    "SCHEMA_REFUSAL",
    "STICKY_LIMIT",
    "ChildWrite",
    "Decided",
    "resolve_decisions",
)

#: The refusals of an edit (``modified_arguments``) that fails its tool's schema or the host
#: validator, or that a tool-input guard (a pack rule, an ``ask`` included) refuses.
SCHEMA_REFUSAL = "Modified arguments failed schema validation"
GUARD_REFUSAL = "Modified arguments blocked by guardrail"
#: The refusal of a batch that would give a run more sticky decisions than it may hold.
STICKY_LIMIT = f"Sticky decisions exceed {DEFAULT_MAX_STICKY_DECISIONS} per run"


def _by_approval(state: AgentRunState) -> dict[str, PendingDecision]:
    assert state.interruption is not None
    return {d.approval_id: d for d in state.interruption.pending_decisions}


async def _revalidate(
    agent: ResumableAgent,
    session: ResumedSession,
    state: AgentRunState,
    call: ToolCallContent,
    index: int,
) -> None:
    """An edited call must pass the tool schema, the host validator and every tool-input
    guardrail (the session's packs included; ``ask`` counts as a block). A refusal's message is
    the spec's, naming the rule (and a pack rule's own reason), never the edited value; which
    decision it was, and what the schema or validator found, ride the error's notes."""
    tool = agent.config.registry.get(call.name)
    if tool is None:
        raise AgentDecisionError(f"decisions[{index}] edits a call to an unknown tool")
    problem = tool.check_arguments(call.arguments)
    if problem is None:
        problem = await _host_verdict(agent, call, tool, state)
    if problem is not None:
        refusal = AgentDecisionError(SCHEMA_REFUSAL)
        refusal.add_note(redact_value(f"decisions[{index}]: {problem}", agent.config.redactor))
        raise refusal
    guards = agent.config.guardrails.for_stage("tool_input")
    if session.compiled_packs is not None:
        guards = guards + session.compiled_packs.tool_input
    if not guards:
        return
    records = await evaluate_guardrails(
        guards,
        GuardrailContext(
            stage="tool_input",
            value=call,
            session_id=state.session_id,
            run_id=state.run_id,
            tool_name=call.name,
            tool_call_id=call.id,
        ),
        redactor=agent.config.redactor,
        limiter=agent.config.thread_limiter,
    )
    decisive = first_decisive(records)
    if decisive is not None:
        own = rule_reason(decisive)
        rule = f"rule {decisive.guardrail}" + (f": {own}" if own else "")
        refusal = AgentDecisionError(redact_value(f"{GUARD_REFUSAL} {rule}", agent.config.redactor))
        refusal.add_note(f"decisions[{index}]")
        raise refusal


async def _host_verdict(
    agent: ResumableAgent, call: ToolCallContent, tool: ToolDefinition, state: AgentRunState
) -> str | None:
    """The host validator's objection to ``call``, if any (a sync validator runs in a worker
    thread under the agent's ``thread_limiter``)."""
    if agent.config.validate is None:
        return None
    context = ToolExecutionContext(
        session_id=state.session_id,
        run_id=state.run_id,
        tool_call_id=call.id,
        tool_name=call.name,
        started_by=state.started_by,
    )
    verdict = await call_host(
        agent.config.validate, call, tool, context, limiter=agent.config.thread_limiter
    )
    if verdict is None:
        return None
    return getattr(verdict, "message", None) or str(verdict)


def _check_scope(decision: RunDecision, pending: PendingDecision, index: int) -> None:
    for_run = decision.outcome in ("allow_for_run", "reject_for_run")
    if pending.kind == "input_guardrail" and (
        for_run or decision.modified_arguments is not None or decision.elicitation is not None
    ):
        raise AgentDecisionError(
            f"decisions[{index}] uses an option an input-guardrail decision cannot take",
            code="ERR_PRISM_DECISION_SCOPE",
        )
    if decision.elicitation is not None and pending.kind != "elicitation":
        raise AgentDecisionError(
            f"decisions[{index}] answers an elicitation on a decision that asked for none",
            code="ERR_PRISM_DECISION_SCOPE",
        )
    if decision.elicitation is not None and decision.outcome != "allow_once":
        raise AgentDecisionError(
            f"decisions[{index}] answers an elicitation with outcome {decision.outcome}; use "
            "allow_once",
            code="ERR_PRISM_DECISION_SCOPE",
        )
    if pending.kind == "elicitation" and decision.outcome.startswith("allow"):
        # An elicitation tool never executes: the human's answer is its result.
        if decision.modified_arguments is not None:
            raise AgentDecisionError(
                f"decisions[{index}] edits the arguments of an elicitation; answer it with "
                "elicitation instead",
                code="ERR_PRISM_DECISION_SCOPE",
            )
        if decision.elicitation is None:
            raise AgentDecisionError(
                f"decisions[{index}] allows an elicitation without answering it; pass "
                "elicitation (or reject it)",
                code="ERR_PRISM_DECISION_SCOPE",
            )
    if decision.modified_arguments is not None and not decision.outcome.startswith("allow"):
        raise AgentDecisionError(
            f"decisions[{index}] edits arguments of a rejected call",
            code="ERR_PRISM_DECISION_SCOPE",
        )


@attrs.frozen(kw_only=True)
class ChildWrite:
    """A partly approving resume of a child run, written before its parent's re-suspension:
    the child agent (on the parent's store), its run id, resume input and request."""

    agent: ResumableAgent
    run_id: str
    resume: Mapping[str, Any]
    request: Any


@attrs.define
class Decided:
    """The pending calls and sticky decisions after the decisions, and what stays undecided.

    ``remaining`` are the decisions the run still waits for, in their recorded order; those
    in ``partial`` were allowed by one more approver in this resume (and are audited) but
    still lack approvers."""

    pending_calls: list[PendingCall]
    sticky: list[StickyDecision]
    remaining: list[PendingDecision]
    input_approved: bool = False
    input_rejected: str | None = None
    partial: set[str] = attrs.Factory(set)
    child_writes: list[ChildWrite] = attrs.Factory(list)


async def resolve_decisions(
    agent: ResumableAgent,
    session: ResumedSession,
    state: AgentRunState,
    plan: ResumeInput,
    calls: Mapping[str, ToolCallContent],
    *,
    nested: Collection[str] = (),
) -> Decided:
    """Apply ``plan``'s decisions to ``state``'s pending calls; refuse any invalid one.

    ``nested`` are approval ids of child runs' decisions (``_nested`` settles them): they are
    neither applied nor reported as remaining here."""
    pending = {a: d for a, d in _by_approval(state).items() if a not in nested}
    by_call = {c.tool_call_id: c for c in state.pending_calls}
    decided = Decided(
        pending_calls=list(state.pending_calls), sticky=list(state.sticky_decisions), remaining=[]
    )
    if plan.decision == "approve":
        decisions = tuple(RunDecision(approval_id=a, outcome="allow_once") for a in pending)
    else:
        assert plan.decisions is not None
        decisions = plan.decisions
    chosen: dict[str, tuple[int, RunDecision]] = {}
    for index, decision in enumerate(decisions):
        if decision.approval_id in nested:
            continue
        target = pending.get(decision.approval_id)
        if target is None:
            raise AgentDecisionError(
                f"decisions[{index}] names an unknown approval id",
                code="ERR_PRISM_DECISION_UNKNOWN",
            )
        _check_scope(decision, target, index)
        chosen[decision.approval_id] = (index, decision)
    updates: dict[str, PendingCall] = {}
    partly: dict[str, PendingDecision] = {}
    for approval_id, (index, decision) in chosen.items():
        target = pending[approval_id]
        approved_by = approvals_after(target, decision, plan.actor, index, agent.config.redactor)
        if approved_by is not None:
            partly[approval_id] = attrs.evolve(target, approved_by=approved_by)
            continue
        if target.kind == "input_guardrail":
            if decision.outcome == "allow_once":
                decided.input_approved = True
            else:
                decided.input_rejected = decision.reason or "rejected"
            continue
        assert target.tool_call_id is not None
        current = by_call[target.tool_call_id]
        call = calls[target.tool_call_id]
        if decision.outcome.startswith("reject"):
            updates[current.tool_call_id] = attrs.evolve(
                current, status="rejected", reason=decision.reason
            )
        elif decision.elicitation is not None:
            tool = agent.config.registry.get(call.name)
            if target.elicitation_schema is not None:
                problem = validate_json_schema(target.elicitation_schema, decision.elicitation)
            else:
                problem = tool.check_elicitation(decision.elicitation) if tool else None
            request = elicitation_request(tool, call.arguments) if tool is not None else None
            if problem is None and request is not None and request.validate is not None:
                problem = request.problem(decision.elicitation)
            if problem is None and tool is not None:
                answered = ToolCallContent(call.id, call.name, dict(decision.elicitation))
                problem = await _host_verdict(agent, answered, tool, state)
            if problem is not None:
                raise AgentDecisionError(f"decisions[{index}].elicitation is invalid: {problem}")
            updates[current.tool_call_id] = attrs.evolve(
                current, status="answered", answer=dict(decision.elicitation)
            )
        else:
            modified = None
            if decision.modified_arguments is not None:
                edited = ToolCallContent(call.id, call.name, dict(decision.modified_arguments))
                await _revalidate(agent, session, state, edited, index)
                modified = dict(decision.modified_arguments)
            updates[current.tool_call_id] = attrs.evolve(
                current,
                status="approved",
                modified_arguments=modified,
                arguments_hash=arguments_hash(modified)
                if modified is not None
                else current.arguments_hash,
            )
        if decision.outcome in ("allow_for_run", "reject_for_run") and target.scope is not None:
            scope = target.scope
            if decision.modified_arguments is not None:
                # The edit is one-off: the decision sticks by tool, effect and identity, not
                # by the arguments the model first asked with.
                scope = attrs.evolve(scope, arguments_hash=None)
            decided.sticky.append(
                StickyDecision(scope=scope, outcome=decision.outcome, reason=decision.reason)
            )
    if len(decided.sticky) > DEFAULT_MAX_STICKY_DECISIONS:
        raise AgentDecisionError(STICKY_LIMIT, code="ERR_PRISM_DECISION_LIMIT")
    decided.pending_calls = [updates.get(c.tool_call_id, c) for c in decided.pending_calls]
    decided.partial = set(partly)
    decided.remaining = [
        partly.get(a, d) for a, d in pending.items() if a not in chosen or a in partly
    ]
    return decided
