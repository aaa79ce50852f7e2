"""Resuming a durable run: one pipeline, in a fixed order, that refuses before it writes.

Order: input shape → ownership-scoped load → revision and fingerprint → version, status and
clean frontier → guardrail packs → session rebuild (``continue`` keeps completed rounds) and
skills → ``on_session`` → decisions (``deny`` and partial batches settle here) → counters,
limits and loop state → restore hooks → compare-and-swap claim → the resumed run. Every
refusal before the claim writes nothing and runs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import attrs

from ..content import Message, ToolCallContent
from ..errors import (
    AgentDecisionError,
    AgentLoopStateError,
    AgentRunStateError,
    GuardrailPackError,
)
from ..events import AgentDeniedEvent, AgentEvent, AgentResumedEvent, AgentSuspendedEvent
from ..guardrails import (
    CompiledGuardrailPacks,
    GuardrailContext,
    compile_guardrail_packs,
    evaluate_guardrails,
    first_decisive,
)
from ..limits import RunLimits
from ..redaction import redact_value
from ..results import AgentRunResult
from ..schema import validate_json_schema
from ..skills import Skill, SkillRegistry
from ..tools import ToolExecutionContext
from ._checkpoints import CheckpointRecord, CheckpointStore
from ._decisions import AgentRunRef, ResumeInput, RunDecision, coerce_run_ref, validate_resume_input
from ._fingerprint import agent_fingerprint
from ._options import (
    AGENT_RUN_NAMESPACE,
    DEFAULT_CHECKPOINT_RESTORE_TIMEOUT_MS,
    DEFAULT_MAX_STICKY_DECISIONS,
    HARD_MAX_AGENT_RUN_STATE_BYTES,
    CheckpointMetadataSource,
    RunStateOptions,
    check_revision,
    check_store,
)
from ._restore import CheckpointRestoreContext, check_hooks, compensate_all, run_restore_hooks
from ._run import DurableRun, RunStateInfo
from ._state import (
    AgentRunState,
    Interruption,
    PendingCall,
    PendingDecision,
    StickyDecision,
    arguments_hash,
    parse_state,
)
from ._writer import CheckpointWriter, read_metadata

if TYPE_CHECKING:
    from ..agents import Agent
    from ..runs._driver import RunDriver
    from ..sessions._session import AgentSession

__all__ = (
    "AgentRunStatus",
    "ResumePlan",
    "ResumeRequest",
    "load_agent_run_state",
    "prepare_resume",
)

STALE = "Stale or non-running agent run resume"
MISMATCH = "Agent revision or fingerprint mismatch on resume"
NOT_CLEAN = "Continue resume requires a running checkpoint with no pending decisions"
AMBIGUOUS = "Ambiguous dispatched tool requires operator resolution"
NOT_FOUND = "Agent run checkpoint not found"


@attrs.frozen(kw_only=True)
class AgentRunStatus:
    """A durable run as its checkpoint records it: ``state``, ``version`` and sidecar
    ``metadata`` (``None`` when absent or malformed)."""

    state: AgentRunState
    version: int
    metadata: dict[str, str] | None = None


@attrs.frozen(kw_only=True)
class ResumeRequest:
    """The options of one resume (see ``resume_agent_run``)."""

    checkpoints: CheckpointStore = attrs.field(eq=False)
    definition_revision: str
    restore_hooks: tuple[Any, ...] = ()
    restore_hook_timeout_ms: float = DEFAULT_CHECKPOINT_RESTORE_TIMEOUT_MS
    checkpoint_metadata: CheckpointMetadataSource = attrs.field(default=None, eq=False)
    persist_session_state: bool | None = None
    include_skill_bodies: bool | None = None
    ownership: Mapping[str, str] | None = None
    on_session: Callable[[AgentSession], Any] | None = attrs.field(default=None, eq=False)


@attrs.frozen(kw_only=True)
class ResumePlan:
    """What a claimed resume hands the resumed run: the tool calls its pending work refers
    to, input held by an input-guardrail suspension, and the ``agent_resumed`` event."""

    state: AgentRunState
    calls: Mapping[str, ToolCallContent]
    pending_input: tuple[Message, ...]
    resumed_event: AgentResumedEvent | None


@attrs.frozen(kw_only=True)
class Settled:
    """A resume that ended without running anything (``deny`` or a partial batch)."""

    events: tuple[AgentEvent, ...]
    result: AgentRunResult
    session: AgentSession


async def load_agent_run_state(
    checkpoints: CheckpointStore, ref: Any, *, ownership: Mapping[str, str] | None = None
) -> AgentRunStatus | None:
    """The run's state, version and metadata, or ``None`` when absent or foreign."""
    run_ref = coerce_run_ref(ref)
    check_store(checkpoints)
    record = await checkpoints.load(AGENT_RUN_NAMESPACE, run_ref.run_id, ownership=ownership)
    if record is None:
        return None
    state = parse_state(record.value, max_bytes=HARD_MAX_AGENT_RUN_STATE_BYTES)
    if state.session_id != run_ref.session_id:
        return None
    return AgentRunStatus(state=state, version=record.version, metadata=read_metadata(record))


def _check_request(agent: Agent, request: ResumeRequest) -> None:
    check_store(request.checkpoints)
    check_revision(request.definition_revision)
    timeout = request.restore_hook_timeout_ms
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise AgentRunStateError("restore_hook_timeout_ms must be a positive number")
    try:
        check_hooks(request.restore_hooks)
    except TypeError as exc:
        raise AgentRunStateError(str(exc)) from exc
    if not (agent.id or agent.name):
        raise AgentRunStateError("a durable run needs an agent id or name")
    if agent.store is None:
        raise AgentRunStateError(
            "resuming needs the agent's session store: create_agent(store=...) with the store "
            "the run was written to"
        )


def _check_version_and_status(
    record: CheckpointRecord, state: AgentRunState, plan: ResumeInput
) -> None:
    if record.version != plan.expected_version:
        raise AgentRunStateError(STALE)
    wanted = "running" if plan.decision == "continue" else "suspended"
    if state.status != wanted:
        raise AgentRunStateError(STALE)
    dispatched = [c for c in state.pending_calls if c.status == "dispatched"]
    ready = len(state.pending_calls) - len(dispatched)
    # A continue may pass a dispatched call only when nothing else is pending; whether its
    # result was stored is checked against the session (see _advance_over_finished_work).
    if dispatched and (plan.decision != "continue" or ready):
        raise AgentRunStateError(AMBIGUOUS)
    if plan.decision == "continue" and (state.interruption is not None or ready):
        raise AgentRunStateError(NOT_CLEAN)


def _compile_packs(agent: Agent, state: AgentRunState) -> CompiledGuardrailPacks | None:
    block = state.session_state.guardrail_packs if state.session_state is not None else None
    if block is None:
        return None
    try:
        if not isinstance(block, Mapping) or set(block) - {"packs", "state"}:
            raise GuardrailPackError("malformed guardrail pack block")
        compiled = compile_guardrail_packs(
            block.get("packs") or [],
            catalogue=agent.pack_catalogue,
            can_suspend=True,
            redactor=agent.redactor,
        )
        saved = block.get("state") or {}
        if not isinstance(saved, Mapping):
            raise GuardrailPackError("malformed guardrail pack state")
        compiled.restore_state(saved)
    except GuardrailPackError as exc:
        raise AgentRunStateError(f"guardrail packs cannot be reinstated: {exc}") from exc
    return compiled


def _restore_skills(agent: Agent, session: AgentSession, state: AgentRunState) -> None:
    record = state.session_state
    if record is None:
        return
    if record.loaded_skill_bodies is not None:
        for body in record.loaded_skill_bodies:
            session.loaded_skills.add(Skill(body.name, body.instructions))
        return
    source = agent.skills
    available: Sequence[Skill] = (
        source.all() if isinstance(source, SkillRegistry) else tuple(source or ())
    )
    by_name = {skill.name: skill for skill in available}
    for name in record.loaded_skill_names:
        # A skill the registry no longer serves is re-resolved by load_skill when needed.
        if name in by_name:
            session.loaded_skills.add(by_name[name])


@attrs.frozen(kw_only=True)
class _Advance:
    leaf: str | None
    path: list[Any]
    rounds: int
    calls: int
    input_stored: bool


async def _advance_over_finished_work(session: AgentSession, state: AgentRunState) -> _Advance:
    """The leaf after the crashed worker's completed tool rounds (``continue`` only).

    Entries the crashed worker appended after the checkpoint's leaf are kept when they form
    complete rounds (an assistant tool call with every result); a final answer it never
    checkpointed is dropped so the turn is asked again. A round with a missing result may have
    started a side effect, so it is refused as ambiguous; so is a call marked ``dispatched`` in
    the checkpoint whose result was never stored. Returns the leaf, its branch (both from one
    read of the session), the kept rounds and calls, and whether held input was stored.
    """
    entries = await session.store.list(state.session_id)
    by_id = {entry.id: entry for entry in entries}
    children: dict[str | None, list[Any]] = {}
    for entry in entries:
        if entry.run_id == state.run_id:
            children.setdefault(entry.parent_id, []).append(entry)
    safe = current = state.leaf_id
    outstanding = {c.tool_call_id for c in state.pending_calls if c.status == "dispatched"}
    rounds = calls = 0
    input_stored = False
    held = list(state.pending_input)
    while children.get(current):
        entry = children[current][-1]
        message = entry.message
        if message is not None and message.role == "assistant":
            if not message.tool_calls or outstanding:
                break
            outstanding = {call.id for call in message.tool_calls}
            rounds += 1
            calls += len(outstanding)
        elif message is not None and message.role == "user" and held and message == held[0]:
            held.pop(0)
            input_stored = not held
            if not outstanding:
                safe = entry.id
        elif message is not None and message.role == "tool":
            for block in message.content:
                outstanding.discard(getattr(block, "tool_call_id", ""))
            if not outstanding:
                safe = entry.id
        elif not outstanding:
            safe = entry.id
        current = entry.id
    if outstanding:
        raise AgentRunStateError(AMBIGUOUS)
    path: list[Any] = []
    cursor = safe
    while cursor is not None:
        node = by_id.get(cursor)
        if node is None:
            raise AgentRunStateError("the checkpoint's session leaf is missing from the session")
        path.append(node)
        cursor = node.parent_id
    path.reverse()
    return _Advance(leaf=safe, path=path, rounds=rounds, calls=calls, input_stored=input_stored)


def _find_calls(path: Sequence[Any], pending: Sequence[PendingCall]) -> dict[str, ToolCallContent]:
    wanted = {call.tool_call_id: call for call in pending}
    found: dict[str, ToolCallContent] = {}
    for entry in reversed(path):
        message = entry.message
        if message is None or message.role != "assistant":
            continue
        for call in message.tool_calls:
            if call.id in wanted and call.id not in found:
                if arguments_hash(call.arguments) != wanted[call.id].arguments_hash:
                    raise AgentRunStateError(
                        "a pending tool call no longer matches its recorded arguments hash"
                    )
                found[call.id] = call
        if len(found) == len(wanted):
            break
    if len(found) != len(wanted):
        raise AgentRunStateError("a pending tool call is missing from the session branch")
    return found


def _by_approval(state: AgentRunState) -> dict[str, PendingDecision]:
    assert state.interruption is not None
    return {d.approval_id: d for d in state.interruption.pending_decisions}


async def _revalidate(
    agent: Agent,
    session: AgentSession,
    state: AgentRunState,
    call: ToolCallContent,
    index: int,
) -> None:
    """An edited call must pass the tool schema, the host validator and every tool-input
    guardrail (the session's packs included; ``ask`` counts as a block)."""
    tool = agent.registry.get(call.name)
    if tool is None:
        raise AgentDecisionError(f"decisions[{index}] edits a call to an unknown tool")
    problem = validate_json_schema(tool.parameters, call.arguments)
    context = ToolExecutionContext(
        session_id=state.session_id,
        run_id=state.run_id,
        tool_call_id=call.id,
        tool_name=call.name,
    )
    if problem is None and agent.validate is not None:
        verdict = agent.validate(call, tool, context)
        if hasattr(verdict, "__await__"):
            verdict = await verdict
        if verdict is not None:
            problem = getattr(verdict, "message", None) or str(verdict)
    if problem is not None:
        raise AgentDecisionError(f"decisions[{index}].modified_arguments are invalid: {problem}")
    guards = agent.guardrails.for_stage("tool_input")
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
        redactor=agent.redactor,
    )
    decisive = first_decisive(records)
    if decisive is not None:
        raise AgentDecisionError(
            f"decisions[{index}].modified_arguments are refused by guardrail {decisive.guardrail}"
        )


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
    if decision.modified_arguments is not None and not decision.outcome.startswith("allow"):
        raise AgentDecisionError(
            f"decisions[{index}] edits arguments of a rejected call",
            code="ERR_PRISM_DECISION_SCOPE",
        )


@attrs.define
class _Decided:
    pending_calls: list[PendingCall]
    sticky: list[StickyDecision]
    remaining: list[PendingDecision]
    input_approved: bool = False
    input_rejected: str | None = None


async def _resolve_decisions(
    agent: Agent,
    session: AgentSession,
    state: AgentRunState,
    plan: ResumeInput,
    calls: Mapping[str, ToolCallContent],
) -> _Decided:
    pending = _by_approval(state)
    by_call = {c.tool_call_id: c for c in state.pending_calls}
    decided = _Decided(
        pending_calls=list(state.pending_calls), sticky=list(state.sticky_decisions), remaining=[]
    )
    if plan.decision == "approve":
        decisions = tuple(RunDecision(approval_id=a, outcome="allow_once") for a in pending)
    else:
        assert plan.decisions is not None
        decisions = plan.decisions
    chosen: dict[str, tuple[int, RunDecision]] = {}
    for index, decision in enumerate(decisions):
        target = pending.get(decision.approval_id)
        if target is None:
            raise AgentDecisionError(
                f"decisions[{index}] names an unknown approval id",
                code="ERR_PRISM_DECISION_UNKNOWN",
            )
        _check_scope(decision, target, index)
        chosen[decision.approval_id] = (index, decision)
    updates: dict[str, PendingCall] = {}
    for approval_id, (index, decision) in chosen.items():
        target = pending[approval_id]
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
            tool = agent.registry.get(call.name)
            schema = tool.elicitation if tool is not None else target.elicitation_schema
            problem = validate_json_schema(schema, decision.elicitation)
            if problem is None and agent.validate is not None and tool is not None:
                answered = ToolCallContent(call.id, call.name, dict(decision.elicitation))
                verdict = agent.validate(
                    answered,
                    tool,
                    ToolExecutionContext(
                        session_id=state.session_id,
                        run_id=state.run_id,
                        tool_call_id=call.id,
                        tool_name=call.name,
                    ),
                )
                if hasattr(verdict, "__await__"):
                    verdict = await verdict
                if verdict is not None:
                    problem = getattr(verdict, "message", None) or str(verdict)
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
            decided.sticky.append(
                StickyDecision(
                    scope=target.scope,
                    outcome=decision.outcome,
                    reason=decision.reason,
                )
            )
    if len(decided.sticky) > DEFAULT_MAX_STICKY_DECISIONS:
        raise AgentDecisionError(
            f"a run may hold at most {DEFAULT_MAX_STICKY_DECISIONS} sticky decisions",
            code="ERR_PRISM_DECISION_LIMIT",
        )
    decided.pending_calls = [updates.get(c.tool_call_id, c) for c in decided.pending_calls]
    decided.remaining = [d for a, d in pending.items() if a not in chosen]
    return decided


@attrs.frozen(kw_only=True)
class Prepared:
    """A resume ready to run: the claimed execution's driver and session."""

    driver: RunDriver
    session: AgentSession


async def prepare_resume(
    agent: Agent,
    ref: Any,
    resume: Any,
    request: ResumeRequest,
    *,
    lifecycle_hooks: Sequence[Any] = (),
) -> Prepared | Settled:
    """Run the resume pipeline up to and including the claim write."""
    from ..runs._driver import RunDriver
    from ..runs._execution import RunExecution
    from ..runs._options import RunOptions
    from ..sessions._session import AgentSession

    plan = validate_resume_input(resume)
    run_ref: AgentRunRef = coerce_run_ref(ref)
    _check_request(agent, request)
    record = await request.checkpoints.load(
        AGENT_RUN_NAMESPACE, run_ref.run_id, ownership=request.ownership
    )
    if record is None:
        raise AgentRunStateError(NOT_FOUND)
    state = parse_state(record.value, max_bytes=HARD_MAX_AGENT_RUN_STATE_BYTES)
    if state.session_id != run_ref.session_id or state.run_id != run_ref.run_id:
        raise AgentRunStateError(NOT_FOUND)
    if (
        state.definition_revision != request.definition_revision
        or state.agent_id != (agent.id or agent.name)
        or state.fingerprint != agent_fingerprint(agent, request.definition_revision)
    ):
        raise AgentRunStateError(MISMATCH)
    _check_version_and_status(record, state, plan)

    assert agent.store is not None
    compiled = _compile_packs(agent, state)
    session = AgentSession(
        agent,
        id=state.session_id,
        store=agent.store,
        leaf_id=state.leaf_id,
        compiled_packs=compiled,
    )
    if plan.decision == "continue":
        advance = await _advance_over_finished_work(session, state)
        session.leaf_id, path = advance.leaf, advance.path
        # The crashed worker's kept rounds are charged, and its stored input is not repeated.
        counters = attrs.evolve(
            state.counters,
            turns=state.counters.turns + advance.rounds,
            tool_rounds=state.counters.tool_rounds + advance.rounds,
            tool_calls=state.counters.tool_calls + advance.calls,
        )
        state = attrs.evolve(
            state,
            leaf_id=advance.leaf,
            counters=counters,
            pending_calls=(),
            pending_input=() if advance.input_stored else state.pending_input,
        )
    else:
        path = await session.store.read_branch_path(session.id, session.leaf_id)
    session._load_history(path)
    _restore_skills(agent, session, state)
    calls = _find_calls(path, [c for c in state.pending_calls if c.status != "dispatched"])
    if request.on_session is not None:
        outcome = request.on_session(session)
        if hasattr(outcome, "__await__"):
            await outcome

    metadata = read_metadata(record)
    writer = CheckpointWriter(
        store=request.checkpoints,
        run_id=state.run_id,
        max_state_bytes=state.max_state_bytes or HARD_MAX_AGENT_RUN_STATE_BYTES,
        ownership=request.ownership,
        fencing_token=record.fencing_token,
        redactor=agent.redactor,
        metadata_source=request.checkpoint_metadata,
        version=record.version,
        metadata=metadata,
    )

    if plan.decision == "deny":
        return await _settle_denied(session, state, writer, reason=None)
    decided = None
    if plan.decision != "continue":
        decided = await _resolve_decisions(agent, session, state, plan, calls)
        if decided.input_rejected is not None:
            return await _settle_denied(session, state, writer, reason=decided.input_rejected)
        if decided.remaining:
            return await _settle_partial(session, state, writer, decided)

    if decided is not None and not decided.input_approved:
        pending_input: tuple[Message, ...] = ()
    else:
        pending_input = state.pending_input
    claimed = attrs.evolve(
        state,
        status="running",
        interruption=None,
        pending_calls=tuple(decided.pending_calls) if decided is not None else (),
        sticky_decisions=tuple(decided.sticky) if decided is not None else state.sticky_decisions,
        # Approved input rides the claim until the resumed run has stored it.
        pending_input=pending_input,
    )
    plan_for_run = ResumePlan(
        state=state, calls=calls, pending_input=pending_input, resumed_event=None
    )
    execution = RunExecution(
        session,
        (),
        RunOptions(tool_names=state.tool_names),
        run_id=state.run_id,
        resume=plan_for_run,
    )
    _restore_execution(execution, state)

    hooks = (*lifecycle_hooks, *agent.plugin_host.restore_hooks(), *request.restore_hooks)
    context = CheckpointRestoreContext(
        run_id=state.run_id,
        session_id=state.session_id,
        version=record.version,
        status=state.status,
        metadata=metadata,
        checkpoint=record,
    )
    audit = await run_restore_hooks(hooks, context, request.restore_hook_timeout_ms)
    try:
        await writer.save(claimed)
    except BaseException:
        # Another resume won the claim: put the restored layers back as they were.
        await compensate_all(hooks, context)
        raise

    execution.resume = attrs.evolve(
        plan_for_run,
        resumed_event=AgentResumedEvent(
            session_id=state.session_id,
            run_id=state.run_id,
            version=writer.version,
            decision=plan.decision or "decisions",
            restore=audit,
        ),
    )
    persist = (
        request.persist_session_state
        if request.persist_session_state is not None
        else bool(state.session_state and state.session_state.loaded_skill_names)
    )
    include_bodies = (
        request.include_skill_bodies
        if request.include_skill_bodies is not None
        else bool(state.session_state and state.session_state.loaded_skill_bodies is not None)
    )
    durable = DurableRun(
        execution,
        RunStateOptions(
            request.checkpoints,
            request.definition_revision,
            interrupt_before_tool=state.interrupt_before_tool,
            checkpoint_policy=state.checkpoint_policy or "decision",
            persist_session_state=persist,
            include_skill_bodies=include_bodies,
            max_state_bytes=writer.max_state_bytes,
            ownership=request.ownership,
            fencing_token=record.fencing_token,
        ),
        fingerprint=state.fingerprint,
        version=writer.version,
        metadata=writer.metadata,
        sticky=claimed.sticky_decisions,
        metadata_source=request.checkpoint_metadata,
    )
    durable.pending_calls = list(claimed.pending_calls)
    durable.claimed_leaf = session.leaf_id
    durable.writer.writes = writer.writes
    execution.durable = durable
    session._begin(execution)
    return Prepared(driver=RunDriver(execution), session=session)


def _restore_execution(execution: Any, state: AgentRunState) -> None:
    """Carry the recorded counters, limits, wall deadline and loop state into the run."""
    import time

    from ..runs._counters import RunCounters

    counters = state.counters
    execution.counters = RunCounters(
        turns=counters.turns,
        provider_attempts=counters.provider_attempts,
        tool_rounds=counters.tool_rounds,
        tool_calls=counters.tool_calls,
        usage=counters.usage or execution.counters.usage,
        usage_reported=counters.usage is not None,
    )
    if state.limits is not None:
        try:
            execution.limits = RunLimits(**dict(state.limits))
        except TypeError as exc:
            raise AgentRunStateError(f"malformed run limits in the checkpoint: {exc}") from exc
    if state.wall_deadline is not None:
        execution.deadline = anyio.current_time() + (state.wall_deadline - time.time())
    loop = execution.loop
    record = state.loop_state
    if record is None:
        return
    if record.name != getattr(loop, "name", None) or record.revision != str(
        getattr(loop, "revision", "")
    ):
        raise AgentLoopStateError(
            f"the checkpoint's loop {record.name!r} revision {record.revision!r} does not match "
            f"the agent's loop",
            code="ERR_PRISM_LOOP_REVISION",
        )
    restore = getattr(loop, "restore", None)
    if callable(restore):
        try:
            restore(record.snapshot)
        except Exception as exc:
            raise AgentLoopStateError(
                f"loop {record.name!r} could not restore its snapshot: {exc}",
                code="ERR_PRISM_LOOP_SNAPSHOT",
            ) from exc


async def _settle_denied(
    session: AgentSession, state: AgentRunState, writer: CheckpointWriter, *, reason: str | None
) -> Settled:
    denied = attrs.evolve(
        state,
        status="denied",
        interruption=None,
        pending_calls=(),
        pending_input=(),
        sticky_decisions=(),
    )
    await writer.save(denied)
    event = redact_value(
        AgentDeniedEvent(
            session_id=state.session_id, run_id=state.run_id, version=writer.version, reason=reason
        ),
        session.agent.redactor,
    )
    session._broadcaster.publish(event)
    session._broadcaster.close_run_subscribers()
    result = AgentRunResult(
        session_id=state.session_id,
        run_id=state.run_id,
        status="denied",
        leaf_id=state.leaf_id,
        run_state=RunStateInfo(version=writer.version, status="denied", metadata=writer.metadata),
        stop_reason="denied",
    )
    return Settled(events=(event,), result=result, session=session)


async def _settle_partial(
    session: AgentSession, state: AgentRunState, writer: CheckpointWriter, decided: _Decided
) -> Settled:
    assert state.interruption is not None
    first = decided.remaining[0]
    interruption = Interruption(
        kind=first.kind,
        reason=first.reason,
        tool_call_id=first.tool_call_id,
        guardrail=first.guardrail,
        pending_decisions=tuple(decided.remaining),
    )
    resuspended = attrs.evolve(
        state,
        interruption=interruption,
        pending_calls=tuple(decided.pending_calls),
        sticky_decisions=tuple(decided.sticky),
    )
    await writer.save(resuspended)
    event = redact_value(
        AgentSuspendedEvent(
            session_id=state.session_id,
            run_id=state.run_id,
            interruption=interruption,
            version=writer.version,
        ),
        session.agent.redactor,
    )
    session._broadcaster.publish(event)
    session._broadcaster.close_run_subscribers()
    result = AgentRunResult(
        session_id=state.session_id,
        run_id=state.run_id,
        status="suspended",
        leaf_id=state.leaf_id,
        interruption=interruption,
        run_state=RunStateInfo(
            version=writer.version, status="suspended", metadata=writer.metadata
        ),
        stop_reason="suspended",
    )
    return Settled(events=(event,), result=result, session=session)
