"""Resume, nested decisions: a suspended parent's pending decisions that belong to a child run.

A call of a sub-agent tool (``agent.as_tool()``) whose child suspended holds its parent with
one nested pending decision per child decision (``approval_id`` is
:func:`~prism_core.nested_approval_id` of the parent run and the child's approval id). On a
resume of the parent:

- decisions (``approve`` or a batch) that name nested approval ids are translated to the
  child's own ids and checked against the child run exactly as a resume of the child would
  check them (recursively, for a grandchild), before anything is written; a batch that
  decides any of one child's decisions decides all of them. The decided call becomes
  ``approved`` with the child's resume input (``child_resume``) on its pending call, so the
  parent's resumed run resumes the child first, then goes on; a crash before that finds the
  decisions in the parent's checkpoint.
- ``deny`` denies every suspended child first (nothing of a child runs), then the parent.
- ``continue`` (after a crash) checks each running child the continued parent will continue,
  as the child's own ``continue`` would: a child call in doubt refuses the parent's continue,
  unless the parent's ``resolutions`` settle it (a resolution naming no call of the parent is
  a child's), and the lease, identity and version of the child must let it be claimed.

It reads the child runs' checkpoints and sessions; it must not write (the child's resume does,
after the parent's claim, in the parent's run).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from ..content import ToolCallContent
from ..durable._checkpoints import CheckpointRecord
from ..durable._children import NESTED_APPROVAL_PREFIX, child_run_id, nested_approval_id
from ..durable._in_doubt import IN_DOUBT_CODE, in_doubt_error
from ..durable._lease import check_lease
from ..durable._options import AGENT_RUN_NAMESPACE, HARD_MAX_AGENT_RUN_STATE_BYTES
from ..durable._state import AgentRunState, PendingCall, PendingDecision
from ..durable._state_parse import parse_state
from ..errors import AgentDecisionError, AgentRunStateError
from ..events import SubAgentEvent
from ..guardrails import GuardrailConfig
from ..records._store import SessionStore
from ..redaction import redact_value
from ..runs._delegation import child_guardrails
from ._checks import ResumeRequest, check_identity, check_version_and_status
from ._decide import ChildWrite, Decided, resolve_decisions
from ._doubt import settle_in_doubt
from ._input import ResumeInput, RunDecision, validate_resume_input
from ._ports import ResumableAgent, ResumedSession
from ._resolutions import Resolution
from ._session import new_session, rebuild_session

__all__ = (
    "ChildContinue",
    "ChildTool",
    "check_children_continue",
    "child_request",
    "decide_with_children",
    "deny_children",
    "split_resolutions",
    "who_decides",
)

STALE_CHILD = "the sub-agent run no longer waits for the decisions its parent recorded"


@runtime_checkable
class ChildTool(Protocol):
    """The ``execute`` of a sub-agent tool, as a resume reads it."""

    def resumable(self, store: SessionStore) -> ResumableAgent:
        """The child agent, its sessions on the parent's session ``store``."""
        ...

    def child_revision(self, parent_revision: str) -> str:
        """The definition revision the child's checkpoints are bound to."""
        ...


@attrs.frozen(kw_only=True)
class ChildContinue:
    """What the continued parent hands a running child's ``continue``: the resolutions that
    name the child's in-doubt calls, and whether the parent's claim was forced."""

    resolutions: tuple[Resolution, ...] = ()
    force: bool = False
    #: Who continues the parent (its resume's ``actor``, ``channel``, ``reason``): the child's
    #: resume names them too, so its audit says who settled its calls.
    who: Mapping[str, str] = attrs.field(factory=dict)


def child_request(
    tool: ChildTool, request: ResumeRequest, *, guardrails: Any = None
) -> ResumeRequest:
    """The resume request of a child run under ``request`` (its parent's): the same store and
    owner scope, the child's revision, no restore hooks (they ran for the parent)."""
    return ResumeRequest(
        checkpoints=request.checkpoints,
        definition_revision=tool.child_revision(request.definition_revision),
        ownership=request.ownership,
        force=request.force,
        guardrails=guardrails,
    )


def _child_tool(agent: ResumableAgent, name: str) -> ChildTool | None:
    tool = agent.config.registry.get(name)
    execute = tool.execute if tool is not None else None
    return execute if isinstance(execute, ChildTool) else None


async def _load(
    request: ResumeRequest, run_id: str
) -> tuple[CheckpointRecord, AgentRunState] | None:
    record = await request.checkpoints.load(
        AGENT_RUN_NAMESPACE, run_id, ownership=request.ownership
    )
    if record is None:
        return None
    return record, parse_state(
        record.value, max_bytes=HARD_MAX_AGENT_RUN_STATE_BYTES, run_id=run_id
    )


def _store(agent: ResumableAgent) -> SessionStore:
    """The parent's session store, where its children's sessions are."""
    assert agent.store is not None
    return agent.store


def _nested_by_call(state: AgentRunState) -> dict[str, list[PendingDecision]]:
    """The parent's nested pending decisions, by the sub-agent call they hold."""
    waiting = {c.tool_call_id for c in state.pending_calls if c.child_run_id is not None}
    found: dict[str, list[PendingDecision]] = {}
    if state.interruption is None:
        return found
    for decision in state.interruption.pending_decisions:
        if decision.tool_call_id in waiting and decision.approval_id.startswith(
            NESTED_APPROVAL_PREFIX
        ):
            found.setdefault(decision.tool_call_id, []).append(decision)
    return found


def _chosen(plan: ResumeInput, nested: Mapping[str, list[PendingDecision]]) -> dict[str, Any]:
    """The caller's decisions on nested approval ids (all of them for ``approve``)."""
    ids = {d.approval_id for decisions in nested.values() for d in decisions}
    if plan.decision == "approve":
        return {a: RunDecision(approval_id=a, outcome="allow_once") for a in ids}
    return {d.approval_id: d for d in plan.decisions or () if d.approval_id in ids}


async def decide_with_children(
    agent: ResumableAgent,
    session: ResumedSession,
    state: AgentRunState,
    plan: ResumeInput,
    calls: Mapping[str, ToolCallContent],
    request: ResumeRequest,
) -> Decided:
    """The parent's decisions applied (:func:`~._decide.resolve_decisions` for its own), and
    each decided child's resume input checked against the child and recorded on its call."""
    nested = _nested_by_call(state)
    skip = {d.approval_id for decisions in nested.values() for d in decisions}
    decided = await resolve_decisions(agent, session, state, plan, calls, nested=skip)
    chosen = _chosen(plan, nested)
    updates: dict[str, PendingCall] = {}
    for call_id, decisions in nested.items():
        picked = [chosen[d.approval_id] for d in decisions if d.approval_id in chosen]
        if not picked:
            decided.remaining.extend(decisions)
            continue
        if len(picked) != len(decisions):
            raise AgentDecisionError(
                f"the decisions decide {len(picked)} of the {len(decisions)} decisions of the "
                f"sub-agent run of tool call {call_id}; decide all of them in one resume",
                code="ERR_PRISM_DECISION_SCOPE",
            )
        pending = next(c for c in decided.pending_calls if c.tool_call_id == call_id)
        child_resume, left = await _check_child_decisions(
            agent, state, pending, picked, request, plan
        )
        if left:
            # Some of the child's decisions still lack approvers: the child records this
            # resume's decisions now (before the parent's write), and the parent keeps waiting
            # on the ones left, as the child has them.
            _mirror(state, decisions, left, decided)
            tool = _child_tool(agent, pending.name)
            assert tool is not None
            assert pending.child_run_id is not None
            decided.child_writes.append(
                ChildWrite(
                    agent=tool.resumable(_store(agent)),
                    run_id=pending.child_run_id,
                    resume=child_resume,
                    request=child_request(
                        tool, request, guardrails=_parent_tool_guards(agent, session, request)
                    ),
                )
            )
            continue
        updates[call_id] = attrs.evolve(pending, status="approved", child_resume=child_resume)
    decided.pending_calls = [updates.get(c.tool_call_id, c) for c in decided.pending_calls]
    return decided


def _mirror(
    state: AgentRunState,
    decisions: Sequence[PendingDecision],
    left: Sequence[PendingDecision],
    decided: Decided,
) -> None:
    """The parent's nested decisions of one child after a partly approving resume: those the
    child still waits for (with its ``approved_by``) stay pending, counted as decided in this
    resume (so they are audited); the others are settled."""
    by_nested = {nested_approval_id(state.run_id, d.approval_id): d for d in left}
    for decision in decisions:
        still = by_nested.get(decision.approval_id)
        if still is not None:
            decided.remaining.append(attrs.evolve(decision, approved_by=still.approved_by))
            decided.partial.add(decision.approval_id)


async def _check_child_decisions(
    agent: ResumableAgent,
    state: AgentRunState,
    pending: PendingCall,
    picked: Sequence[RunDecision],
    request: ResumeRequest,
    plan: ResumeInput,
) -> tuple[dict[str, Any], list[PendingDecision]]:
    """The child's resume input for ``picked`` (nested ids translated), checked as the
    child's own resume would check it, and the child's decisions it would leave pending
    (allowed by too few approvers yet)."""
    tool = _child_tool(agent, pending.name)
    assert pending.child_run_id is not None
    loaded = await _load(request, pending.child_run_id) if tool is not None else None
    if tool is None or loaded is None:
        raise AgentRunStateError(STALE_CHILD)
    record, child = loaded
    own = {
        nested_approval_id(state.run_id, d.approval_id): d.approval_id
        for d in (child.interruption.pending_decisions if child.interruption else ())
    }
    if child.status != "suspended" or set(own) != {d.approval_id for d in picked}:
        raise AgentRunStateError(STALE_CHILD)
    entries = [attrs.evolve(d, approval_id=own[d.approval_id]) for d in picked]
    resume = {
        "expected_version": record.version,
        "decisions": [
            {k: v for k, v in attrs.asdict(entry).items() if v is not None} for entry in entries
        ],
        **who_decides(plan),
    }
    child_plan = validate_resume_input(resume)
    view = tool.resumable(_store(agent))
    child_req = child_request(tool, request)
    check_identity(view, child, child_req)
    check_version_and_status(record, child, child_plan)
    rebuilt = await rebuild_session(view, new_session(view, child), child, child_plan)
    decided = await decide_with_children(
        view, rebuilt.session, rebuilt.state, child_plan, rebuilt.calls, child_req
    )
    return resume, decided.remaining


def who_decides(plan: ResumeInput | None) -> dict[str, str]:
    """The parent resume's ``actor``, ``channel`` and ``reason``, handed to a child's resume
    so the child's audit names them too."""
    if plan is None:
        return {}
    given = {"actor": plan.actor, "channel": plan.channel, "reason": plan.reason}
    return {key: value for key, value in given.items() if value is not None}


async def deny_children(
    agent: ResumableAgent,
    session: ResumedSession,
    state: AgentRunState,
    request: ResumeRequest,
    prepare: Callable[[ResumableAgent, Any, Any, ResumeRequest], Awaitable[Any]],
    plan: ResumeInput | None = None,
) -> None:
    """Deny every suspended child of ``state`` (``prepare`` is the resume pipeline, which
    denies a child's own children first) and publish each child's ``agent_denied`` to the
    parent's subscribers; a child that is not suspended is left as it is."""
    for pending in state.pending_calls:
        tool = _child_tool(agent, pending.name) if pending.child_run_id else None
        if tool is None or pending.child_run_id is None:
            continue
        loaded = await _load(request, pending.child_run_id)
        if loaded is None or loaded[1].status != "suspended":
            continue
        record, child = loaded
        settled = await prepare(
            tool.resumable(_store(agent)),
            {"run_id": child.run_id, "session_id": child.session_id},
            {"expected_version": record.version, "decision": "deny", **who_decides(plan)},
            child_request(tool, request, guardrails=_parent_tool_guards(agent, session, request)),
        )
        for event in settled.events:
            wrapped = SubAgentEvent(
                session_id=state.session_id,
                run_id=state.run_id,
                tool_call_id=pending.tool_call_id,
                child_run_id=child.run_id,
                child_session_id=child.session_id,
                event=event,
            )
            session.broadcaster.publish(redact_value(wrapped, agent.config.redactor))


def _parent_tool_guards(
    agent: ResumableAgent, session: ResumedSession, request: ResumeRequest
) -> GuardrailConfig | None:
    """The tool-call guards the parent hands its children, composed as its run composes its
    guards (the agent's, the session's packs, the run's own)."""
    guards = agent.config.guardrails
    packs = session.compiled_packs
    if packs is not None:
        guards = attrs.evolve(
            guards,
            tool_input=guards.tool_input + packs.tool_input,
            tool_output=packs.tool_output + guards.tool_output,
        )
    if request.guardrails is not None:
        guards = guards.merged(request.guardrails)
    return child_guardrails(guards)


def split_resolutions(
    agent: ResumableAgent, plan: ResumeInput, calls: Mapping[str, ToolCallContent]
) -> tuple[ResumeInput, tuple[Resolution, ...]]:
    """The parent's own resolutions (naming its calls) and the rest, for its children; all
    of them are the parent's when none of its calls runs a sub-agent."""
    if plan.resolutions is None or not any(_child_tool(agent, c.name) for c in calls.values()):
        return plan, ()
    own = tuple(r for r in plan.resolutions if r.tool_call_id in calls)
    rest = tuple(r for r in plan.resolutions if r.tool_call_id not in calls)
    return attrs.evolve(plan, resolutions=own or None), rest


async def check_children_continue(
    agent: ResumableAgent,
    state: AgentRunState,
    calls: Mapping[str, ToolCallContent],
    resolutions: tuple[Resolution, ...],
    request: ResumeRequest,
    *,
    version: int,
    who: Mapping[str, str] | None = None,
) -> dict[str, ChildContinue]:
    """Check, for a parent's ``continue``, every running child its sub-agent calls will
    continue, and return what each child's ``continue`` is handed. Refuses (nothing written)
    what the child's own ``continue`` would refuse, an in-doubt child call at the parent's
    ``version``; a resolution that names no call of the run or of its children is refused."""
    children, used = await _check_continue(
        agent, state, calls, resolutions, request, version, dict(who or {})
    )
    if any(r.tool_call_id not in used for r in resolutions):
        raise AgentDecisionError(
            "resolutions name a tool call that neither the run nor its sub-agent runs owe",
            code="ERR_PRISM_DECISION_UNKNOWN",
        )
    return children


async def _check_continue(
    agent: ResumableAgent,
    state: AgentRunState,
    calls: Mapping[str, ToolCallContent],
    resolutions: tuple[Resolution, ...],
    request: ResumeRequest,
    version: int,
    who: dict[str, str],
) -> tuple[dict[str, ChildContinue], set[str]]:
    children: dict[str, ChildContinue] = {}
    used: set[str] = set()
    for call in calls.values():
        tool = _child_tool(agent, call.name)
        if tool is None:
            continue
        loaded = await _load(request, child_run_id(state.run_id, call.id))
        if loaded is None or loaded[1].status != "running":
            continue
        record, child = loaded
        view = tool.resumable(_store(agent))
        child_req = child_request(tool, request)
        check_identity(view, child, child_req)
        free = tuple(r for r in resolutions if r.tool_call_id not in used)
        probe = ResumeInput(expected_version=record.version, decision="continue")
        check_version_and_status(record, child, probe)
        check_lease(child, force=request.force)
        rebuilt = await rebuild_session(view, new_session(view, child), child, probe)
        owned = tuple(r for r in free if r.tool_call_id in rebuilt.calls)
        try:
            settle_in_doubt(
                view,
                rebuilt.state,
                attrs.evolve(probe, resolutions=owned or None),
                rebuilt.calls,
                version=record.version,
            )
        except AgentRunStateError as exc:
            if exc.code != IN_DOUBT_CODE:
                raise
            raise in_doubt_error(exc.in_doubt, version=version) from None
        rest = tuple(r for r in free if r.tool_call_id not in rebuilt.calls)
        _, deeper = await _check_continue(
            view, rebuilt.state, rebuilt.calls, rest, child_req, version, who
        )
        mine = {r.tool_call_id for r in owned} | deeper
        used |= mine
        children[call.id] = ChildContinue(
            resolutions=tuple(r for r in free if r.tool_call_id in mine),
            force=request.force,
            who=who,
        )
    return children, used
