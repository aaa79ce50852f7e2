"""Resuming a durable run: one pipeline, in a fixed order, that refuses before it writes.

Order: input shape → ownership-scoped load → revision and fingerprint → version, status and
clean frontier → the run's own guardrails → ``on_session`` (the new session) → guardrail
packs → session rebuild (``continue`` keeps completed rounds) and skills → decisions (``deny``
and partial batches settle here), or for ``continue`` the in-doubt calls' resolutions →
counters, limits and loop state → restore hooks → compare-and-swap claim → ``reconcile`` of
in-doubt calls → the resumed run. Every refusal before the claim writes nothing and runs nothing.

The steps live in their own modules, in pipeline order: ``_resume_checks`` (request, load,
identity, version and status), ``_resume_session`` (packs, session, skills), ``_resume_decide``
(decisions), ``_resumed`` (the resumed execution). This module runs them, settles a ``deny`` or
a partial batch, and writes the claim.

It must not import ``agents`` or ``sessions/_session``: it reads them through ``_resume_ports``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ..content import Message, ToolCallContent
from ..durable._faults import retry_transient
from ..durable._fencing import claim_token
from ..durable._gates import interruption_for
from ..durable._in_doubt import IN_DOUBT_CODE
from ..durable._lease import check_lease
from ..durable._options import HARD_MAX_AGENT_RUN_STATE_BYTES
from ..durable._receipts import continue_receipts
from ..durable._run import RunStateInfo
from ..durable._run_guards import match_run_guardrails
from ..durable._sidecar import read_sidecar
from ..durable._state import AgentRunState, DecisionRecord
from ..durable._state_parse import parse_state
from ..durable._writer import CheckpointWriter
from ..errors import AgentRunNotFoundError, AgentRunStateError
from ..events import AgentDeniedEvent, AgentEvent, AgentResumedEvent, AgentSuspendedEvent
from ..middleware import MiddlewareContext
from ..redaction import redact_value
from ..results import AgentRunResult
from ._approvers import kept_interruption
from ._audit import decision_records, denial_records, resolution_records
from ._checks import (
    SESSION_MISMATCH,
    AgentRunStatus,
    ResumeRequest,
    check_identity,
    check_request,
    check_version_and_status,
    identity_matches,
    load_agent_run_state,
    load_for_resume,
    not_found,
)
from ._decide import Decided
from ._deny import denied_state, deny_recorded
from ._doubt import check_claim_size, reconcile_in_doubt, settle_in_doubt
from ._doubt_ledger import known_effects, record_in_doubt, settled_effects
from ._input import AgentRunRef, ResumeInput, coerce_run_ref, validate_resume_input
from ._nested import (
    ChildContinue,
    check_children_continue,
    decide_with_children,
    deny_children,
    split_resolutions,
    who_decides,
)
from ._ports import ResumableAgent, ResumedSession
from ._restore import CheckpointRestoreContext, compensate_all, run_restore_hooks
from ._resumed import ResumePlan, attach_durable, resumed_execution
from ._session import new_session, rebuild_session
from ._signal import bridge_signal, check_signal

if TYPE_CHECKING:
    from ..runs._driver import RunDriver

__all__ = (
    "AgentRunStatus",
    "Planned",
    "Prepared",
    "Recorded",
    "ResumePlan",
    "ResumeRequest",
    "Settled",
    "load_agent_run_state",
    "plan_resume",
    "prepare_resume",
)


@attrs.frozen(kw_only=True)
class Settled:
    """A resume that ended without running anything (``deny`` or a partial batch).

    ``session`` is ``None`` for a deny settled without the run's definition (its events
    reached no session's subscribers)."""

    events: tuple[AgentEvent, ...]
    result: AgentRunResult
    session: ResumedSession | None


@attrs.frozen(kw_only=True)
class Recorded:
    """A decision recorded without running anything (``decide_agent_run``): the run is left
    ``running`` at ``version`` with no live lease, for a worker's ``continue``."""

    run_id: str
    version: int


@attrs.frozen(kw_only=True)
class Planned:
    """What a resume would do, found without writing (:func:`plan_resume`): the run's
    ``state`` and the state it would claim (``None`` when it would claim nothing: a
    ``deny``, or a batch that leaves decisions pending), how it would settle in-doubt calls
    and the calls of a crashed round it would start."""

    state: AgentRunState
    claimed: AgentRunState | None = None
    resolutions: tuple[Any, ...] = ()
    to_reconcile: tuple[str, ...] = ()
    fresh: tuple[Any, ...] = ()


@attrs.frozen(kw_only=True)
class Prepared:
    """A resume ready to run: the claimed execution's driver and session."""

    driver: RunDriver
    session: ResumedSession


async def prepare_resume(
    agent: ResumableAgent,
    ref: Any,
    resume: Any,
    request: ResumeRequest,
    *,
    lifecycle_hooks: Sequence[Any] = (),
    plan: ResumeInput | None = None,
    record_only: bool = False,
) -> Prepared | Settled | Recorded:
    """Run the resume pipeline up to and including the claim write. ``plan``: ``resume``
    as the caller already validated it (``validate_resume_input``), else it is validated
    here. ``record_only``: validate exactly as a resume, then write the decided state (the
    claim's state, with no lease and the stored fencing token) instead of claiming: no
    restore hook, no ``reconcile``, no tool and no model turn runs."""
    outcome = await _pipeline(
        agent,
        ref,
        resume,
        request,
        lifecycle_hooks=lifecycle_hooks,
        plan=plan,
        record_only=record_only,
    )
    assert not isinstance(outcome, Planned)
    return outcome


async def plan_resume(
    agent: ResumableAgent, ref: Any, resume: Any, request: ResumeRequest
) -> Planned:
    """What the resume of ``ref`` with ``resume`` would do (:class:`Planned`), found by the
    pipeline's steps up to the claim with nothing written and no hook run; raises what the
    resume would refuse."""
    outcome = await _pipeline(agent, ref, resume, request, until_claim=True)
    assert isinstance(outcome, Planned)
    return outcome


async def _pipeline(
    agent: ResumableAgent,
    ref: Any,
    resume: Any,
    request: ResumeRequest,
    *,
    lifecycle_hooks: Sequence[Any] = (),
    plan: ResumeInput | None = None,
    record_only: bool = False,
    until_claim: bool = False,
) -> Prepared | Settled | Recorded | Planned:
    """Run the resume pipeline up to and including the claim write. ``plan``: ``resume``
    as the caller already validated it (``validate_resume_input``), else it is validated
    here. ``record_only``: validate exactly as a resume, then write the decided state (the
    claim's state, with no lease and the stored fencing token) instead of claiming: no
    restore hook, no ``reconcile``, no tool and no model turn runs. ``until_claim``: stop
    before anything is written or any hook runs and return what the resume would do
    (:class:`Planned`; see :func:`plan_resume`)."""
    if plan is None:
        plan = validate_resume_input(resume)
    run_ref: AgentRunRef = coerce_run_ref(ref)
    check_request(agent, request)
    signal = request.signal
    check_signal(signal, "the checkpoint load")
    # A continue's session read rides along with the load when the store can make both in
    # one call; it is only decoded (and its errors raised) at the session rebuild.
    record, prefetched = await retry_transient(
        lambda: load_for_resume(
            request.checkpoints,
            agent.store,
            run_ref.run_id,
            request.ownership,
            with_branch=plan.decision == "continue",
        )
    )
    if record is None:
        raise AgentRunNotFoundError(not_found(run_ref.run_id))
    state = parse_state(record.value, max_bytes=HARD_MAX_AGENT_RUN_STATE_BYTES)
    if state.run_id != run_ref.run_id:
        raise AgentRunNotFoundError(not_found(run_ref.run_id))
    if not state.notify and _host_notifies(agent):
        # A host with notifiers reports every run it decides or continues from now on.
        state = attrs.evolve(state, notify=True)
    if run_ref.session_id is not None and state.session_id != run_ref.session_id:
        # The caller may see the run (it is in its owner scope): say what did not match.
        raise AgentRunStateError(SESSION_MISMATCH)
    if plan.decision == "deny" and not identity_matches(agent, state, request):
        if until_claim:
            check_version_and_status(record, state, plan)
            check_lease(state, force=request.force)
            return Planned(state=state)
        # A deny runs nothing: the definition served now need not be the one that wrote it.
        events, result = await deny_recorded(
            record, state, plan, request, redactor=agent.config.redactor
        )
        return Settled(events=events, result=result, session=None)
    check_identity(agent, state, request)
    check_version_and_status(record, state, plan)
    check_lease(state, force=request.force)
    match_run_guardrails(state.run_guardrails, request.guardrails, agent.config.redactor)
    if record_only and request.fencing_token is None:
        token = record.fencing_token
    else:
        token = claim_token(record, request.fencing_token)

    check_signal(signal, "on_session")
    # The observer sees the session before anything is reinstated into it, so it hears of a
    # resume whose packs or history then fail to restore.
    session = new_session(agent, state)
    if request.on_session is not None:
        outcome = request.on_session(session)
        if hasattr(outcome, "__await__"):
            await outcome
    check_signal(signal, "the session rebuild")
    rebuilt = await rebuild_session(
        agent, session, state, plan, request.guardrail_packs, prefetched=prefetched
    )
    loaded, (state, calls) = state, (rebuilt.state, rebuilt.calls)

    metadata = read_sidecar(record)
    writer = CheckpointWriter(
        store=request.checkpoints,
        run_id=state.run_id,
        max_state_bytes=state.max_state_bytes or HARD_MAX_AGENT_RUN_STATE_BYTES,
        ownership=request.ownership,
        fencing_token=token,
        redactor=agent.config.redactor,
        metadata_source=request.checkpoint_metadata,
        version=record.version,
        metadata=metadata,
        middleware=agent.config.middleware,
        context=lambda point: MiddlewareContext(
            point=point,
            session_id=state.session_id,
            run_id=state.run_id,
            agent_id=agent.config.id,
            agent_name=agent.config.name,
        ),
        # A recorded decision leaves the run for a worker: it must hold no lease.
        lease_ms=None if record_only else state.lease_ms or request.lease_ms,
        base=loaded,
    )

    check_signal(signal, "the decisions")
    if plan.decision == "deny" and until_claim:
        return Planned(state=state)
    if plan.decision == "deny":
        # Children first: nothing of a denied run's sub-agents runs either.
        await deny_children(agent, session, state, request, prepare_resume, plan)
        return await _settle_denied(
            session,
            state,
            writer,
            reason=plan.reason,
            audit=denial_records(state, plan, version=record.version),
        )
    decided = None
    settlement = None
    records: list[DecisionRecord] = []
    children: dict[str, ChildContinue] = {}
    if plan.decision == "continue":
        own_plan, theirs = split_resolutions(agent, plan, calls)
        try:
            settlement = settle_in_doubt(agent, state, own_plan, calls, version=record.version)
            # A call the operator settled is not run again, so neither is its child.
            settled = {
                r.tool_call_id for r in own_plan.resolutions or () if r.outcome != "not_started"
            }
            rerun = {key: call for key, call in calls.items() if key not in settled}
            children = await check_children_continue(
                agent, state, rerun, theirs, request, version=record.version, who=who_decides(plan)
            )
        except AgentRunStateError as exc:
            if exc.code == IN_DOUBT_CODE and not until_claim:
                await record_in_doubt(request.checkpoints, state, exc.in_doubt, request.ownership)
            raise
    else:
        decided = await decide_with_children(agent, session, state, plan, calls, request)
        records = decision_records(
            state,
            plan,
            decided.pending_calls,
            version=record.version,
            remaining=[
                d.approval_id for d in decided.remaining if d.approval_id not in decided.partial
            ],
        )
        if until_claim and (decided.input_rejected is not None or decided.remaining):
            return Planned(state=state)
        if decided.input_rejected is not None:
            return await _settle_denied(
                session, state, writer, reason=decided.input_rejected, audit=records
            )
        if decided.remaining:
            return await _settle_partial(session, state, writer, decided, records, calls)

    if decided is not None and not decided.input_approved:
        pending_input: tuple[Message, ...] = ()
    else:
        pending_input = state.pending_input
    if decided is not None:
        claim_pending: tuple[Any, ...] = tuple(decided.pending_calls)
    else:
        claim_pending = settlement.pending_calls if settlement is not None else ()
        records = continue_receipts(
            loaded,
            [c for c in state.pending_calls if c.status == "dispatched"],
            rebuilt.finished,
            version=record.version,
        )
        records += resolution_records(
            settlement.resolutions if settlement is not None else (),
            state.pending_calls,
            plan,
            version=record.version,
        )
    claimed = attrs.evolve(
        state,
        status="running",
        stop_reason=None,
        stop_detail=None,
        interruption=None,
        pending_calls=claim_pending,
        resolutions=(*state.resolutions, *(settlement.resolutions if settlement else ())),
        audit=(*state.audit, *records),
        sticky_decisions=tuple(decided.sticky) if decided is not None else state.sticky_decisions,
        # Approved input rides the claim until the resumed run has stored it.
        pending_input=pending_input,
    )
    check_claim_size(claimed, writer.max_state_bytes)
    if until_claim:
        return Planned(
            state=state,
            claimed=claimed,
            resolutions=settlement.resolutions if settlement is not None else (),
            to_reconcile=settlement.to_reconcile if settlement is not None else (),
            fresh=rebuilt.fresh,
        )
    in_doubt = [r.tool_call_id for r in settlement.resolutions] if settlement else []
    doubted = [*in_doubt, *(settlement.to_reconcile if settlement else ())]
    known = await known_effects(request.checkpoints, state.run_id, doubted, request.ownership)
    effects = settled_effects(
        state, claimed.pending_calls, calls, known, ids=in_doubt, ownership=request.ownership
    )
    if record_only:
        await writer.save(claimed, effects=effects)
        return Recorded(run_id=state.run_id, version=writer.version)
    plan_for_run = ResumePlan(
        state=state,
        calls=calls,
        pending_input=pending_input,
        resumed_event=None,
        fresh=rebuilt.fresh,
        children=children,
    )
    execution = resumed_execution(
        session, attrs.evolve(state, counters=rebuilt.counters), plan_for_run, request.guardrails
    )

    hooks = (*lifecycle_hooks, *agent.config.plugin_host.restore_hooks(), *request.restore_hooks)
    context = CheckpointRestoreContext(
        run_id=state.run_id,
        session_id=state.session_id,
        version=record.version,
        status=state.status,
        metadata=metadata,
        checkpoint=record,
    )
    check_signal(signal, "the restore hooks")
    limiter = agent.config.thread_limiter
    audit = await run_restore_hooks(
        hooks,
        context,
        request.restore_hook_timeout_ms,
        signal=signal,
        redactor=agent.config.redactor,
        limiter=limiter,
    )
    check_signal(signal, "the claim")
    try:
        await writer.save(claimed, effects=effects)
    except BaseException:
        # Another resume won the claim: put the restored layers back as they were.
        await compensate_all(
            hooks,
            context,
            request.restore_hook_timeout_ms,
            redactor=agent.config.redactor,
            limiter=limiter,
        )
        raise
    if settlement is not None and settlement.to_reconcile:
        try:
            reconciled, audits = await reconcile_in_doubt(
                agent,
                state,
                claimed.pending_calls,
                calls,
                settlement.to_reconcile,
                version=writer.version,
                fencing_token=writer.fencing_token or 0,
            )
        except BaseException as exc:
            if isinstance(exc, AgentRunStateError) and exc.code == IN_DOUBT_CODE:
                await record_in_doubt(request.checkpoints, state, exc.in_doubt, request.ownership)
            # The run stays in doubt as claimed: nothing ran, so the restored layers go back.
            await compensate_all(
                hooks,
                context,
                request.restore_hook_timeout_ms,
                redactor=agent.config.redactor,
                limiter=limiter,
            )
            raise
        # Written with the next checkpoint; a crash before it reconciles again.
        claimed = attrs.evolve(
            claimed,
            pending_calls=tuple(reconciled),
            resolutions=(*claimed.resolutions, *audits),
            audit=(
                *claimed.audit,
                *resolution_records(audits, state.pending_calls, plan, version=record.version),
            ),
        )

    execution.resume = attrs.evolve(
        plan_for_run,
        resumed_event=AgentResumedEvent(
            session_id=state.session_id,
            run_id=state.run_id,
            version=writer.version,
            decision=plan.decision or "decisions",
            restore=audit,
            checkpoint_metadata=metadata,
        ),
    )
    driver = attach_durable(execution, session, state, claimed, request, record, writer)
    if settlement is not None and settlement.to_reconcile:
        # ``reconcile``'s answers reach the ledger with the resumed run's next write.
        durable = driver.execution.durable
        assert durable is not None
        for effect in settled_effects(
            state,
            claimed.pending_calls,
            calls,
            known,
            ids=settlement.to_reconcile,
            ownership=request.ownership,
        ):
            durable.ledger.put(effect)
    bridge_signal(signal, driver.execution)
    return Prepared(driver=driver, session=session)


async def _settle_denied(
    session: ResumedSession,
    state: AgentRunState,
    writer: CheckpointWriter,
    *,
    reason: str | None,
    audit: Sequence[DecisionRecord],
) -> Settled:
    await writer.save(denied_state(state, audit))
    event = redact_value(
        AgentDeniedEvent(
            session_id=state.session_id, run_id=state.run_id, version=writer.version, reason=reason
        ),
        session.config.redactor,
    )
    _publish(session, writer, event)
    result = AgentRunResult(
        session_id=state.session_id,
        run_id=state.run_id,
        status="denied",
        leaf_id=state.leaf_id,
        run_state=RunStateInfo(version=writer.version, status="denied", metadata=writer.metadata),
    )
    return Settled(events=(event,), result=result, session=session)


async def _settle_partial(
    session: ResumedSession,
    state: AgentRunState,
    writer: CheckpointWriter,
    decided: Decided,
    audit: Sequence[DecisionRecord],
    calls: Mapping[str, ToolCallContent],
) -> Settled:
    assert state.interruption is not None
    for child in decided.child_writes:
        # A child that still lacks approvers records this resume's decisions first: a lost
        # race there refuses the whole resume before the parent is written.
        written = await prepare_resume(
            child.agent, {"run_id": child.run_id}, child.resume, child.request
        )
        if not isinstance(written, Settled) or written.result.status != "suspended":
            raise AgentRunStateError("the sub-agent run moved on while it was being decided")
    remaining = decided.remaining
    interruption = kept_interruption(state.interruption, remaining) or interruption_for(
        remaining,
        reason=f"{len(remaining)} approval request(s) remain",
        kind=state.interruption.kind,
    )
    resuspended = attrs.evolve(
        state,
        audit=(*state.audit, *audit),
        interruption=interruption,
        pending_calls=tuple(decided.pending_calls),
        sticky_decisions=tuple(decided.sticky),
    )
    # The calls' arguments ride a notifying run's notification of what it still waits on.
    arguments = {call_id: call.arguments for call_id, call in calls.items()}
    await writer.save(resuspended, arguments=arguments)
    event = redact_value(
        AgentSuspendedEvent(
            session_id=state.session_id,
            run_id=state.run_id,
            interruption=interruption,
            version=writer.version,
        ),
        session.config.redactor,
    )
    _publish(session, writer, event)
    result = AgentRunResult(
        session_id=state.session_id,
        run_id=state.run_id,
        status="suspended",
        leaf_id=state.leaf_id,
        interruption=interruption,
        run_state=RunStateInfo(
            version=writer.version, status="suspended", metadata=writer.metadata
        ),
    )
    return Settled(events=(event,), result=result, session=session)


def _host_notifies(agent: ResumableAgent) -> bool:
    """Whether the agent is hosted with notifiers (its ``run_state`` has ``notify``)."""
    run_state = agent.config.run_state
    if isinstance(run_state, Mapping):
        return run_state.get("notify") is True
    return getattr(run_state, "notify", False) is True


def _publish(session: ResumedSession, writer: CheckpointWriter, event: AgentEvent) -> None:
    """Publish a settled resume's last event to subscribers and ``event`` observers."""
    session.broadcaster.publish(event)
    session.broadcaster.close_run_subscribers()
    if writer.middleware is not None and writer.context is not None:
        writer.middleware.observe("event", event, writer.context("event"))
