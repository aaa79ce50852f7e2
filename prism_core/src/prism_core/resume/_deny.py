"""Resume, a ``deny`` that needs no matching definition: it runs nothing, so the agent that
wrote the run need not be the one served now, nor be served at all.

Used when the definition given for a ``deny`` differs from the one the run recorded (another
revision or fingerprint) and by the lifecycle when ``resolve_agent`` knows the agent no more.
Every gate that guards the record still holds: ownership-scoped load, compare-and-swap on the
expected version, the suspended status, the lease and the fencing token. The run ends
``denied``, its suspended sub-agent runs first, and each pending call is audited.

It must not resolve an agent, build a session or run a hook.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from ..durable._checkpoints import CheckpointRecord
from ..durable._fencing import claim_token
from ..durable._lease import check_lease
from ..durable._options import AGENT_RUN_NAMESPACE, HARD_MAX_AGENT_RUN_STATE_BYTES
from ..durable._run import RunStateInfo
from ..durable._sidecar import read_sidecar
from ..durable._state import AgentRunState, DecisionRecord
from ..durable._state_parse import parse_state
from ..durable._writer import CheckpointWriter
from ..errors import AgentRunNotFoundError
from ..events import AgentDeniedEvent, AgentEvent
from ..redaction import Redactor, redact_value
from ..results import AgentRunResult
from ._audit import denial_records
from ._checks import ResumeRequest, check_version_and_status, not_found
from ._input import ResumeInput

__all__ = ("GONE", "MISMATCHED", "denied_state", "deny_recorded", "deny_run_id")

#: What a deny without the run's definition records as its reason when the caller gave none.
GONE = "denied without its agent definition: the agent is no longer served"
MISMATCHED = "denied without its agent definition: the definition served now is another one"


def denied_state(state: AgentRunState, audit: Iterable[DecisionRecord]) -> AgentRunState:
    """``state`` ended ``denied``: nothing pending any more, ``audit`` appended."""
    return attrs.evolve(
        state,
        audit=(*state.audit, *audit),
        status="denied",
        interruption=None,
        pending_calls=(),
        pending_input=(),
        sticky_decisions=(),
    )


async def deny_run_id(
    run_id: str, plan: ResumeInput, request: ResumeRequest, *, redactor: Redactor | None
) -> tuple[tuple[AgentEvent, ...], AgentRunResult]:
    """Load run ``run_id`` in the request's owner scope and deny it (see
    :func:`deny_recorded`); an absent or foreign run is :class:`AgentRunNotFoundError`."""
    record = await request.checkpoints.load(
        AGENT_RUN_NAMESPACE, run_id, ownership=request.ownership
    )
    if record is None:
        raise AgentRunNotFoundError(not_found(run_id))
    state = parse_state(record.value, max_bytes=HARD_MAX_AGENT_RUN_STATE_BYTES, run_id=run_id)
    return await deny_recorded(record, state, plan, request, redactor=redactor, why=GONE)


async def deny_recorded(
    record: CheckpointRecord,
    state: AgentRunState,
    plan: ResumeInput,
    request: ResumeRequest,
    *,
    redactor: Redactor | None,
    why: str = MISMATCHED,
) -> tuple[tuple[AgentEvent, ...], AgentRunResult]:
    """End the suspended run ``state`` (stored as ``record``) ``denied`` without its
    definition: its suspended sub-agent runs are denied first, then the run, with one
    ``deny`` audit record per pending call (named by the resume's actor and channel, its
    reason the resume's, else ``why``); returns the run's ``agent_denied`` event (and its
    children's) and its result. Refuses like any deny: a stale version or another status, a
    live lease, a fencing token not above the stored one."""
    check_version_and_status(record, state, plan)
    check_lease(state, force=request.force)
    token = claim_token(record, request.fencing_token)
    events: list[AgentEvent] = []
    for call in state.pending_calls:
        if call.child_run_id is None:
            continue
        child = await request.checkpoints.load(
            AGENT_RUN_NAMESPACE, call.child_run_id, ownership=request.ownership
        )
        if child is None:
            continue
        child_state = parse_state(
            child.value, max_bytes=HARD_MAX_AGENT_RUN_STATE_BYTES, run_id=call.child_run_id
        )
        if child_state.status != "suspended":
            continue
        child_events, _ = await deny_recorded(
            child,
            child_state,
            attrs.evolve(plan, expected_version=child.version),
            attrs.evolve(request, fencing_token=None),
            redactor=redactor,
            why=why,
        )
        events.extend(child_events)
    writer = CheckpointWriter(
        store=request.checkpoints,
        run_id=state.run_id,
        max_state_bytes=state.max_state_bytes or HARD_MAX_AGENT_RUN_STATE_BYTES,
        ownership=request.ownership,
        fencing_token=token,
        redactor=redactor,
        metadata_source=request.checkpoint_metadata,
        version=record.version,
        metadata=read_sidecar(record),
        lease_ms=state.lease_ms,
        base=state,
    )
    audit = denial_records(state, plan, version=record.version, why=why)
    await writer.save(denied_state(state, audit))
    event = redact_value(
        AgentDeniedEvent(
            session_id=state.session_id,
            run_id=state.run_id,
            version=writer.version,
            reason=plan.reason,
        ),
        redactor,
    )
    events.append(event)
    result = AgentRunResult(
        session_id=state.session_id,
        run_id=state.run_id,
        status="denied",
        leaf_id=state.leaf_id,
        run_state=RunStateInfo(version=writer.version, status="denied", metadata=writer.metadata),
    )
    return tuple(events), result
