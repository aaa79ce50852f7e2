"""Resume, step one: the request's shape and the checkpoint's claimability, before anything runs.

Owns the refusal messages, the request options, loading a run's status, and the checks on the
request, the agent's identity (revision and fingerprint), the checkpoint's version and status,
and its frontier. These checks read; they never write a checkpoint or a session entry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from ..errors import AgentRunStateError
from ._checkpoints import CheckpointRecord, CheckpointStore, reading_run_record
from ._decisions import ResumeInput, coerce_run_ref
from ._fingerprint import agent_fingerprint
from ._options import (
    AGENT_RUN_NAMESPACE,
    DEFAULT_CHECKPOINT_RESTORE_TIMEOUT_MS,
    HARD_MAX_AGENT_RUN_STATE_BYTES,
    CheckpointMetadataSource,
    check_revision,
    check_store,
)
from ._restore import check_hooks
from ._resume_ports import ResumableAgent
from ._resume_signal import coerce_signal
from ._state import AgentRunState, parse_state
from ._writer import read_metadata

__all__ = (
    "AMBIGUOUS",
    "MISMATCH",
    "NOT_CLEAN",
    "NOT_FOUND",
    "STALE",
    "AgentRunStatus",
    "ResumeRequest",
    "check_identity",
    "check_request",
    "check_version_and_status",
    "load_agent_run_state",
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
    on_session: Callable[[Any], Any] | None = attrs.field(default=None, eq=False)
    #: The caller's abort signal (see ``_resume_signal``).
    signal: Any = attrs.field(default=None, eq=False)
    #: Packs the host supplies again, matched by identity to the checkpoint's records.
    guardrail_packs: tuple[Any, ...] = attrs.field(default=(), eq=False)


async def load_agent_run_state(
    checkpoints: CheckpointStore, ref: Any, *, ownership: Mapping[str, str] | None = None
) -> AgentRunStatus | None:
    """The run's state, version and metadata, or ``None`` when absent or foreign."""
    run_ref = coerce_run_ref(ref)
    check_store(checkpoints)
    with reading_run_record(run_ref.run_id):
        record = await checkpoints.load(AGENT_RUN_NAMESPACE, run_ref.run_id, ownership=ownership)
    if record is None:
        return None
    state = parse_state(
        record.value, max_bytes=HARD_MAX_AGENT_RUN_STATE_BYTES, run_id=run_ref.run_id
    )
    if run_ref.session_id is not None and state.session_id != run_ref.session_id:
        return None
    return AgentRunStatus(state=state, version=record.version, metadata=read_metadata(record))


def check_request(agent: ResumableAgent, request: ResumeRequest) -> None:
    """Refuse a malformed request, or an agent that cannot resume, before the load."""
    check_store(request.checkpoints)
    check_revision(request.definition_revision)
    timeout = request.restore_hook_timeout_ms
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise AgentRunStateError("restore_hook_timeout_ms must be a positive number")
    try:
        check_hooks(request.restore_hooks)
        coerce_signal(request.signal)
    except TypeError as exc:
        raise AgentRunStateError(str(exc)) from exc
    if not (agent.id or agent.name):
        raise AgentRunStateError("a durable run needs an agent id or name")
    if agent.store is None:
        raise AgentRunStateError(
            "resuming needs the agent's session store: create_agent(store=...) with the store "
            "the run was written to"
        )


def check_version_and_status(
    record: CheckpointRecord, state: AgentRunState, plan: ResumeInput
) -> None:
    """Refuse a stale version, the wrong status, and a frontier the decision cannot pass."""
    if record.version != plan.expected_version:
        raise AgentRunStateError(STALE)
    wanted = "running" if plan.decision == "continue" else "suspended"
    if state.status != wanted:
        raise AgentRunStateError(STALE)
    dispatched = [c for c in state.pending_calls if c.status == "dispatched"]
    ready = len(state.pending_calls) - len(dispatched)
    # A continue may pass a dispatched call only when nothing else is pending; whether its
    # result was stored is checked against the session (see ``advance_over_finished_work``).
    if dispatched and (plan.decision != "continue" or ready):
        raise AgentRunStateError(AMBIGUOUS)
    if plan.decision == "continue" and (state.interruption is not None or ready):
        raise AgentRunStateError(NOT_CLEAN)


def check_identity(agent: ResumableAgent, state: AgentRunState, request: ResumeRequest) -> None:
    """Refuse a checkpoint written by another agent definition (revision or fingerprint)."""
    if (
        state.definition_revision != request.definition_revision
        or state.agent_id != (agent.id or agent.name)
        or state.fingerprint != agent_fingerprint(agent, request.definition_revision)
    ):
        raise AgentRunStateError(MISMATCH)
