"""Resume, last step: the resumed run, carrying the checkpoint's frontier into a new execution.

Owns the plan the resumed run follows (the tool calls its pending work refers to, held input,
the ``agent_resumed`` event), restoring counters, limits, the wall deadline and loop-local state
into the execution, and attaching the durable side that continues the claimed checkpoint. It
writes nothing itself: the claim is written in ``_resume`` before the run starts.

It must not import ``sessions/`` or ``agents``: it reads the session through ``_resume_ports``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio
import attrs

from .._output_type import output_type_from_schema
from ..content import Message, ToolCallContent
from ..durable._checkpoints import CheckpointRecord
from ..durable._options import RunStateOptions
from ..durable._run import DurableRun
from ..durable._state import AgentRunState
from ..durable._writer import CheckpointWriter
from ..errors import AgentLoopStateError, AgentRunStateError, JsonSchemaError
from ..events import AgentResumedEvent
from ..guardrails import GuardrailConfig
from ..limits import RunLimits
from ..runs._counters import RunCounters
from ..runs._driver import RunDriver
from ..runs._execution import RunExecution
from ..runs._options import RunOptions
from ._checks import ResumeRequest
from ._ports import ResumedSession

if TYPE_CHECKING:
    from ..runs._driver import RunDriver
    from ..runs._execution import RunExecution

__all__ = ("ResumePlan", "attach_durable", "resumed_execution")


@attrs.frozen(kw_only=True)
class ResumePlan:
    """What a claimed resume hands the resumed run: the tool calls its pending work refers
    to, input held by an input-guardrail suspension, the ``agent_resumed`` event, and
    (``continue``) the calls of the crashed round that never started (``fresh``)."""

    state: AgentRunState
    calls: Mapping[str, ToolCallContent]
    pending_input: tuple[Message, ...]
    resumed_event: AgentResumedEvent | None
    fresh: tuple[ToolCallContent, ...] = ()
    #: For ``continue``: by sub-agent call, what its running child's ``continue`` is handed
    #: (a ``ChildContinue``: the resolutions of its calls, whether the claim was forced).
    children: Mapping[str, Any] = attrs.field(factory=dict)


def resumed_execution(
    session: ResumedSession,
    state: AgentRunState,
    plan: ResumePlan,
    guardrails: GuardrailConfig | None = None,
) -> RunExecution:
    """A run on ``session`` continuing ``state``: its counters, limits, deadline and loop, and
    its own ``guardrails`` (already matched to the recorded ones)."""
    execution = RunExecution(
        session,
        (),
        RunOptions(tool_names=state.tool_names, guardrails=guardrails, actor=state.started_by),
        run_id=state.run_id,
        resume=plan,
        parent_run_id=state.parent_run_id,
    )
    _restore_execution(execution, state)
    return execution


def _restore_execution(execution: RunExecution, state: AgentRunState) -> None:
    """Carry the recorded counters, limits, wall deadline and loop state into the run."""
    counters = state.counters
    execution.counters = RunCounters(
        turns=counters.turns,
        provider_attempts=counters.provider_attempts,
        tool_rounds=counters.tool_rounds,
        tool_calls=counters.tool_calls,
        usage=counters.usage or execution.counters.usage,
        usage_reported=counters.usage is not None,
        stop_continuations=counters.stop_continuations,
        output_retries=counters.output_retries,
    )
    # The recorded schema decides what the resumed run's answer must be; the agent's type
    # builds its value when it is that schema.
    output_type = None
    if state.output_schema is not None:
        try:
            output_type = output_type_from_schema(state.output_schema, execution.agent.output_type)
        except JsonSchemaError as exc:
            raise AgentRunStateError(f"malformed output schema in the checkpoint: {exc}") from exc
    limits = execution.plan.limits
    if state.limits is not None:
        try:
            limits = RunLimits(**dict(state.limits))
        except TypeError as exc:
            raise AgentRunStateError(f"malformed run limits in the checkpoint: {exc}") from exc
    execution.plan = attrs.evolve(execution.plan, output_type=output_type, limits=limits)
    if state.wall_deadline is not None:
        execution.deadline = anyio.current_time() + (state.wall_deadline - time.time())
    loop = execution.plan.loop
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


def attach_durable(
    execution: RunExecution,
    session: ResumedSession,
    state: AgentRunState,
    claimed: AgentRunState,
    request: ResumeRequest,
    record: CheckpointRecord,
    writer: CheckpointWriter,
) -> RunDriver:
    """Give the claimed ``execution`` the durable side that continues the checkpoint, make it
    the session's active run, and return its driver."""
    recorded = state.session_state
    persist = (
        request.persist_session_state
        if request.persist_session_state is not None
        else bool(
            recorded and (recorded.loaded_skill_names or recorded.attention_sticky is not None)
        )
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
            fencing_token=writer.fencing_token,
            lease_ms=writer.lease_ms,
            approval_timeout_ms=state.approval_timeout_ms,
            notify=claimed.notify,
        ),
        fingerprint=state.fingerprint,
        fingerprint_parts=state.fingerprint_parts,
        version=writer.version,
        metadata=writer.metadata,
        sticky=claimed.sticky_decisions,
        metadata_source=request.checkpoint_metadata,
        run_guardrails=state.run_guardrails,
    )
    durable.pending_calls = list(claimed.pending_calls)
    durable.resolutions = list(claimed.resolutions)
    durable.audit = list(claimed.audit)
    durable.receipts.owe(claimed.audit, claimed.pending_calls)
    durable.audit_omitted = claimed.audit_omitted
    durable.anchor_leaf = claimed.leaf_id
    durable.anchor_counters = claimed.counters
    durable.claimed_leaf = session.leaf_id
    durable.writer.writes = writer.writes
    durable.writer.last_state = writer.last_state
    durable.writer.decisions_written = writer.decisions_written
    execution.durable = durable
    session.run_slot.claim(execution)
    return RunDriver(execution)
