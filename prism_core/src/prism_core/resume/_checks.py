"""Resume, step one: the request's shape and the checkpoint's claimability, before anything runs.

Owns the refusal messages, the request options, loading a run's status, and the checks on the
request, the agent's identity (revision and fingerprint), the checkpoint's version and status,
and its frontier. These checks read; they must not write a checkpoint or a session entry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ..durable._capabilities import CheckpointAndBranchLoader, capability
from ..durable._checkpoints import CheckpointRecord, CheckpointStore, reading_run_record
from ..durable._fingerprint import agent_fingerprint, describe_mismatch, fingerprint_parts
from ..durable._in_doubt import in_doubt_calls, in_doubt_error
from ..durable._lifetime import check_store_lifetimes
from ..durable._options import (
    AGENT_RUN_NAMESPACE,
    DEFAULT_CHECKPOINT_RESTORE_TIMEOUT_MS,
    HARD_MAX_AGENT_RUN_STATE_BYTES,
    CheckpointMetadataSource,
    check_revision,
    check_store,
    coerce_run_state_options,
)
from ..durable._sidecar import read_sidecar
from ..durable._state import AgentRunState, DecisionRecord
from ..durable._state_parse import parse_state
from ..errors import AgentRunStateError
from ..guardrails import GuardrailConfig
from ..runs._broadcast import validate_subscribe_options
from ._input import ResumeInput, coerce_run_ref
from ._ports import ResumableAgent
from ._restore import check_hooks
from ._signal import coerce_signal

if TYPE_CHECKING:
    from ..records._run_tail import PrefetchedBranchAndRunTail

__all__ = (
    "MISMATCH",
    "NOT_CLEAN",
    "CAPABILITY_MISMATCH",
    "SESSION_MISMATCH",
    "STALE",
    "STALE_SUSPENDED",
    "continuable",
    "AgentRunStatus",
    "CheckpointAndBranchLoader",
    "ResumeRequest",
    "check_configuration",
    "check_ownership",
    "check_stream_options",
    "coerce_hooks",
    "check_identity",
    "identity_matches",
    "check_request",
    "check_version_and_status",
    "load_agent_run_state",
    "load_for_resume",
    "not_found",
)

STALE = "Stale or non-running agent run resume"
STALE_SUSPENDED = "Stale or non-suspended agent run resume"

#: The stops a ``continue`` may pick up: the run ended cleanly on purpose with its frontier
#: intact (a turn policy's stop, stop hooks past their cap). A run that finished on its own,
#: or hit ``turn_policy.max_turns``, is final.
CONTINUABLE_STOPS = ("host_policy", "hook_limit")
MISMATCH = "Agent revision or fingerprint mismatch on resume"
NOT_CLEAN = "Continue resume requires a running checkpoint with no pending decisions"
SESSION_MISMATCH = "Agent run session mismatch"
CAPABILITY_MISMATCH = "Agent run capability mismatch"


def not_found(run_id: str) -> str:
    """The refusal of a run that is absent from the caller's scope (an unknown run and another
    owner's read the same): ``"No durable agent run <run id>"``."""
    return f"No durable agent run {run_id}"


@attrs.frozen(kw_only=True)
class AgentRunStatus:
    """A durable run as its checkpoint records it: ``state``, ``version``, sidecar
    ``metadata`` (``None`` when absent or malformed) and the decision ``audit``."""

    state: AgentRunState
    version: int
    metadata: dict[str, str] | None = None

    @property
    def audit(self) -> tuple[DecisionRecord, ...]:
        """The run's decision audit (see :class:`~prism_core.DecisionRecord`), oldest first;
        ``()`` for a checkpoint written before the audit existed."""
        return self.state.audit

    @property
    def audit_omitted(self) -> int:
        """How many older decision records the run's checkpoints no longer hold (a run keeps
        its newest 256); ``0`` unless the run decided more than that."""
        return self.state.audit_omitted


def coerce_hooks(value: Any) -> tuple[Any, ...]:
    """``restore_hooks`` as a tuple of hooks (callables or objects with ``restore``); anything
    else raises :class:`~prism_core.errors.AgentRunStateError` before any store access."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise AgentRunStateError(
            f"restore_hooks must be a sequence of restore hooks, got {type(value).__name__}"
        )
    try:
        hooks = tuple(value)
    except Exception as exc:
        raise AgentRunStateError("restore_hooks could not be read as a sequence") from exc
    for index, hook in enumerate(hooks):
        if not callable(hook) and not callable(getattr(hook, "restore", None)):
            raise AgentRunStateError(
                f"restore_hooks[{index}] is neither callable nor has restore(), got "
                f"{type(hook).__name__}"
            )
    return hooks


def check_ownership(value: Any) -> Mapping[str, str] | None:
    """``ownership`` must be ``None`` or a mapping of strings to strings."""
    if value is None:
        return None
    refusal = AgentRunStateError("ownership must be a mapping of strings to strings, or None")
    if not isinstance(value, Mapping):
        raise refusal
    try:
        valid = all(isinstance(key, str) and isinstance(item, str) for key, item in value.items())
    except Exception as exc:  # a host mapping whose iteration raises is refused, typed
        raise refusal from exc
    if not valid:
        raise refusal
    return value


def check_stream_options(max_queued_events: Any, overflow: Any) -> None:
    """A resume stream's queue options, refused with
    :class:`~prism_core.errors.AgentRunStateError` like the resume's other options."""
    try:
        validate_subscribe_options(max_queued_events, overflow)
    except ValueError as exc:
        raise AgentRunStateError(str(exc)) from exc


def _optional_bool(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, bool):
        raise AgentRunStateError(
            f"{attribute.name} must be True, False or None, got {type(value).__name__}"
        )


def _optional_callable(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not callable(value):
        raise AgentRunStateError(
            f"{attribute.name} must be callable or None, got {type(value).__name__}"
        )


@attrs.frozen(kw_only=True)
class ResumeRequest:
    """The options of one resume (see ``resume_agent_run``).

    Options of the wrong type raise :class:`~prism_core.errors.AgentRunStateError` when the
    request is built, before any store access."""

    checkpoints: CheckpointStore = attrs.field(eq=False)
    definition_revision: str
    restore_hooks: tuple[Any, ...] = attrs.field(default=(), converter=coerce_hooks)
    restore_hook_timeout_ms: float = DEFAULT_CHECKPOINT_RESTORE_TIMEOUT_MS
    checkpoint_metadata: CheckpointMetadataSource = attrs.field(default=None, eq=False)
    persist_session_state: bool | None = attrs.field(default=None, validator=_optional_bool)
    include_skill_bodies: bool | None = attrs.field(default=None, validator=_optional_bool)
    ownership: Mapping[str, str] | None = attrs.field(default=None, converter=check_ownership)
    on_session: Callable[[Any], Any] | None = attrs.field(
        default=None, eq=False, validator=_optional_callable
    )
    #: The caller's abort signal (see ``_resume_signal``).
    signal: Any = attrs.field(default=None, eq=False)
    #: Packs the host supplies again, matched by identity to the checkpoint's records.
    guardrail_packs: tuple[Any, ...] = attrs.field(default=(), eq=False)
    #: The run's own guards, handed over again (``None``: none given).
    guardrails: GuardrailConfig | None = attrs.field(default=None, eq=False)
    #: The claim's fencing token (``None``: the stored token + 1).
    fencing_token: int | None = None
    #: Claim a run even while another worker's lease on it is live.
    force: bool = False
    #: The lease a claim takes when the run records none (a worker's; ``None``: none).
    lease_ms: int | None = None


async def load_agent_run_state(
    checkpoints: CheckpointStore, ref: Any, *, ownership: Mapping[str, str] | None = None
) -> AgentRunStatus | None:
    """The run's state, version and metadata, or ``None`` when absent or foreign."""
    run_ref = coerce_run_ref(ref)
    check_store(checkpoints)
    ownership = check_ownership(ownership)
    with reading_run_record(run_ref.run_id):
        record = await checkpoints.load(AGENT_RUN_NAMESPACE, run_ref.run_id, ownership=ownership)
    if record is None:
        return None
    state = parse_state(
        record.value, max_bytes=HARD_MAX_AGENT_RUN_STATE_BYTES, run_id=run_ref.run_id
    )
    if run_ref.session_id is not None and state.session_id != run_ref.session_id:
        return None
    return AgentRunStatus(state=state, version=record.version, metadata=read_sidecar(record))


async def load_for_resume(
    checkpoints: CheckpointStore,
    sessions: object,
    run_id: str,
    ownership: Mapping[str, str] | None,
    *,
    with_branch: bool,
) -> tuple[CheckpointRecord | None, PrefetchedBranchAndRunTail | None]:
    """The run's record and, when ``with_branch`` and the store can, the session read the
    resume will make, prefetched in the same store call."""
    loader = capability(checkpoints, CheckpointAndBranchLoader) if with_branch else None
    if loader is not None and sessions is not None:
        return await loader.load_with_run_branch(
            AGENT_RUN_NAMESPACE, run_id, ownership=ownership, sessions=sessions
        )
    return await checkpoints.load(AGENT_RUN_NAMESPACE, run_id, ownership=ownership), None


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
    if not (agent.config.id or agent.config.name):
        raise AgentRunStateError("a durable run needs an agent id or name")
    if agent.store is None:
        raise AgentRunStateError(
            "resuming needs the agent's session store: create_agent(store=...) with the store "
            "the run was written to"
        )
    check_store_lifetimes(request.checkpoints, agent.store)
    check_configuration(agent, request)


def check_version_and_status(
    record: CheckpointRecord, state: AgentRunState, plan: ResumeInput
) -> None:
    """Refuse a stale version, the wrong status, and a frontier the decision cannot pass."""
    continuing = plan.decision == "continue"
    stale = STALE if continuing else STALE_SUSPENDED
    if record.version != plan.expected_version:
        raise AgentRunStateError(stale)
    if not (continuable(state) if continuing else state.status == "suspended"):
        raise AgentRunStateError(stale)
    in_doubt = in_doubt_calls(state)
    # Only a continue settles in-doubt calls; whether their results were stored after all is
    # checked against the session (see ``_resume_session``), their resolution in
    # ``_resume_doubt``.
    if in_doubt and plan.decision != "continue":
        raise in_doubt_error(in_doubt, version=record.version)
    undecided = any(c.status == "pending" for c in state.pending_calls)
    if plan.decision == "continue" and (state.interruption is not None or undecided):
        raise AgentRunStateError(NOT_CLEAN)


def continuable(state: AgentRunState) -> bool:
    """Whether ``continue`` may resume ``state``: a running checkpoint (crash recovery) or a
    ``succeeded`` one stopped by a turn policy or the stop-hook cap."""
    return state.status == "running" or (
        state.status == "succeeded" and state.stop_reason in CONTINUABLE_STOPS
    )


def identity_matches(agent: ResumableAgent, state: AgentRunState, request: ResumeRequest) -> bool:
    """Whether ``agent`` at the request's revision is the definition that wrote ``state``."""
    revision = request.definition_revision
    return (
        state.definition_revision == revision
        and state.agent_id == (agent.config.id or agent.config.name)
        and state.fingerprint == agent_fingerprint(agent, revision)
    )


def check_identity(agent: ResumableAgent, state: AgentRunState, request: ResumeRequest) -> None:
    """Refuse a checkpoint written by another agent definition (revision or fingerprint).

    The refusal's message names what differs when the checkpoint recorded its fingerprint's
    parts (the revision, each tool, the instructions, the guards, ...); a checkpoint without
    them gets the bare message."""
    if identity_matches(agent, state, request):
        return
    agent_id = agent.config.id or agent.config.name
    revision = request.definition_revision
    differences = []
    if state.agent_id != agent_id:
        differences.append(f"agent recorded {state.agent_id!r}, now {agent_id!r}")
    differences += describe_mismatch(
        state.definition_revision,
        state.fingerprint_parts,
        revision,
        fingerprint_parts(agent, revision),
    )
    if not differences:
        raise AgentRunStateError(MISMATCH)
    raise AgentRunStateError(f"{MISMATCH}: {'; '.join(differences)}")


DRIFT = "Agent durable run-state configuration mismatch on resume"


def check_configuration(agent: ResumableAgent, request: ResumeRequest) -> None:
    """Refuse a resume whose options contradict the agent's own ``run_state=``: another
    checkpoint store, revision, owner scope, or session-state choice than the agent writes
    with. An agent without ``run_state=`` takes the request as it is."""
    if agent.config.run_state is None:
        return
    configured = coerce_run_state_options(agent.config.run_state)
    assert configured is not None
    drift = [
        name
        for name, differs in (
            ("checkpoints", request.checkpoints is not configured.checkpoints),
            ("definition_revision", request.definition_revision != configured.definition_revision),
            ("ownership", dict(request.ownership or {}) != dict(configured.ownership or {})),
            (
                "persist_session_state",
                request.persist_session_state is not None
                and request.persist_session_state != configured.persist_session_state,
            ),
            (
                "include_skill_bodies",
                request.include_skill_bodies is not None
                and request.include_skill_bodies != configured.include_skill_bodies,
            ),
        )
        if differs
    ]
    if drift:
        raise AgentRunStateError(
            f"{DRIFT}: {', '.join(drift)} differ from the agent's run_state (resume with the "
            "agent's own configuration)"
        )
