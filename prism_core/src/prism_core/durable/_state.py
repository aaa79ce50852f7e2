"""Run state schema v1: the frontier of a durable run, as stored in its checkpoint.

The state holds the run's frontier (session leaf, counters, pending work, decisions, loop
state), never its transcript: messages live once in the session store.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

import attrs
import cattrs

from ..codec import converter, dumps
from ..content import ErrorInfo, Message, Usage
from ..errors import AgentRunStateError

__all__ = (
    "MAX_STATE_DEPTH",
    "MAX_STATE_PROPERTIES",
    "SCHEMA_VERSION",
    "AgentRunState",
    "DecisionKind",
    "DecisionScope",
    "Interruption",
    "LoopStateRecord",
    "PendingCall",
    "PendingDecision",
    "ResolutionRecord",
    "RunCountersState",
    "RunStatus",
    "SessionStateRecord",
    "SkillBody",
    "StickyDecision",
    "arguments_hash",
    "check_state_bounds",
    "parse_state",
    "state_to_json",
)

SCHEMA_VERSION = 1
MAX_STATE_DEPTH = 32
MAX_STATE_PROPERTIES = 256

RunStatus: TypeAlias = Literal["running", "suspended", "succeeded", "failed", "aborted", "denied"]
DecisionKind: TypeAlias = Literal["tool_approval", "input_guardrail", "elicitation"]
TERMINAL_STATUSES = ("succeeded", "failed", "aborted", "denied")


def arguments_hash(arguments: Mapping[str, Any]) -> str:
    """sha256 hex of the canonical JSON of ``arguments``."""
    return hashlib.sha256(dumps(dict(arguments))).hexdigest()


@attrs.frozen(kw_only=True)
class DecisionScope:
    """What a decision is about: the tool, its effect kind, its identity (``agent/tool``) and
    the hash of the exact arguments."""

    tool_name: str
    effect_kind: str | None
    identity: str
    arguments_hash: str


@attrs.frozen(kw_only=True)
class PendingDecision:
    """One decision a human owes a suspended run. Never carries raw arguments."""

    approval_id: str
    kind: DecisionKind
    reason: str | None = None
    guardrail: str | None = None
    elicitation_schema: Mapping[str, Any] | None = None
    scope: DecisionScope | None = None
    tool_call_id: str | None = None


@attrs.frozen(kw_only=True)
class Interruption:
    """Why a durable run suspended, with one pending decision per gated call."""

    kind: DecisionKind
    reason: str | None = None
    tool_call_id: str | None = None
    guardrail: str | None = None
    pending_decisions: tuple[PendingDecision, ...] = ()


@attrs.frozen(kw_only=True)
class PendingCall:
    """A tool call of the suspended round and what was decided about it.

    ``status``: ``pending`` (awaiting a decision), ``approved`` (ready to dispatch),
    ``rejected`` (answered with ``approval_rejected``), ``answered`` (an elicitation
    payload stands in for the result), ``dispatched`` (its side effect may have started: while
    its result is not stored, the call is *in doubt*), ``resolved`` (an in-doubt call whose
    outcome was settled: ``resolution`` is ``completed`` with ``result``, or ``failed`` with
    ``reason``). An ``approved`` call with ``resolution == "not_started"`` is an in-doubt call
    cleared to run again.
    """

    tool_call_id: str
    name: str
    arguments_hash: str
    status: Literal["pending", "approved", "rejected", "answered", "dispatched", "resolved"]
    approval_id: str | None = None
    reason: str | None = None
    modified_arguments: Mapping[str, Any] | None = None
    answer: Mapping[str, Any] | None = None
    resolution: Literal["completed", "not_started", "failed"] | None = None
    result: Any = None


@attrs.frozen(kw_only=True)
class ResolutionRecord:
    """The audit of how one in-doubt call was settled: ``outcome``, who settled it
    (``source``: ``operator``, ``reconcile`` or ``idempotent``) and when (``at``, Unix
    seconds). The result itself is not kept here, only in the session."""

    tool_call_id: str
    outcome: Literal["completed", "not_started", "failed"]
    source: Literal["operator", "reconcile", "idempotent"]
    at: float


@attrs.frozen(kw_only=True)
class StickyDecision:
    """An ``allow_for_run``/``reject_for_run`` decision applied to later calls of the same
    exact scope in the same run."""

    scope: DecisionScope
    outcome: Literal["allow_for_run", "reject_for_run"]
    reason: str | None = None


@attrs.frozen(kw_only=True)
class RunCountersState:
    """The run's counters at the checkpoint."""

    turns: int = 0
    provider_attempts: int = 0
    tool_rounds: int = 0
    tool_calls: int = 0
    usage: Usage | None = None


@attrs.frozen(kw_only=True)
class LoopStateRecord:
    """A loop strategy's snapshot with the strategy's name and revision."""

    name: str
    revision: str
    snapshot: Any = None


@attrs.frozen(kw_only=True)
class SkillBody:
    """The exact instructions of a loaded skill (with ``include_skill_bodies``)."""

    name: str
    instructions: str


@attrs.frozen(kw_only=True)
class SessionStateRecord:
    """Session state that rides the checkpoint with ``persist_session_state``."""

    loaded_skill_names: tuple[str, ...] = ()
    loaded_skill_bodies: tuple[SkillBody, ...] | None = None
    guardrail_packs: Mapping[str, Any] | None = None


@attrs.frozen(kw_only=True)
class AgentRunState:
    """Schema v1 of a durable run's state (namespace ``prism.agent-run``, key = run id)."""

    status: RunStatus
    run_id: str
    session_id: str
    agent_id: str
    definition_revision: str
    fingerprint: str
    leaf_id: str | None
    counters: RunCountersState = attrs.field(factory=RunCountersState)
    limits: Mapping[str, Any] | None = None
    wall_deadline: float | None = None
    checkpoint_policy: Literal["every-turn"] | None = None
    interrupt_before_tool: bool = False
    max_state_bytes: int | None = None
    interruption: Interruption | None = None
    pending_calls: tuple[PendingCall, ...] = ()
    pending_input: tuple[Message, ...] = ()
    sticky_decisions: tuple[StickyDecision, ...] = ()
    loop_state: LoopStateRecord | None = None
    tool_names: tuple[str, ...] | None = None
    session_state: SessionStateRecord | None = None
    error: ErrorInfo | None = None
    resolutions: tuple[ResolutionRecord, ...] = ()
    schema_version: int = SCHEMA_VERSION

    @property
    def terminal(self) -> bool:
        """Whether the run has ended."""
        return self.status in TERMINAL_STATUSES


def state_to_json(state: AgentRunState) -> dict[str, Any]:
    """The JSON form of ``state`` (``checkpoint_policy`` appears only for ``every-turn``)."""
    data: dict[str, Any] = converter().unstructure(state)
    if data.get("checkpoint_policy") is None:
        data.pop("checkpoint_policy", None)
    return data


def _walk(value: Any, depth: int) -> None:
    if depth > MAX_STATE_DEPTH:
        raise AgentRunStateError(f"agent run state is nested deeper than {MAX_STATE_DEPTH} levels")
    if isinstance(value, dict):
        if len(value) > MAX_STATE_PROPERTIES:
            raise AgentRunStateError(
                f"agent run state has an object with {len(value)} properties; "
                f"the limit is {MAX_STATE_PROPERTIES}"
            )
        for item in value.values():
            _walk(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _walk(item, depth + 1)


def check_state_bounds(data: Any, max_bytes: int) -> bytes:
    """Canonical JSON of ``data`` after checking size, depth and property bounds.

    Over a bound raises :class:`AgentRunStateError`; nothing is ever truncated.
    """
    try:
        encoded = dumps(data)
    except (TypeError, ValueError, RecursionError) as exc:
        raise AgentRunStateError(f"agent run state is not JSON: {exc}") from exc
    if len(encoded) > max_bytes:
        raise AgentRunStateError(
            f"agent run state is {len(encoded)} bytes; the limit is {max_bytes} bytes"
        )
    _walk(data, 1)
    return encoded


def parse_state(data: Any, *, max_bytes: int) -> AgentRunState:
    """Validate and structure a stored state; anything malformed is an
    :class:`AgentRunStateError`."""
    if not isinstance(data, dict):
        raise AgentRunStateError("agent run state must be a JSON object")
    check_state_bounds(data, max_bytes)
    if data.get("schema_version") != SCHEMA_VERSION:
        raise AgentRunStateError(
            f"unsupported agent run state schema_version {data.get('schema_version')!r}"
        )
    try:
        state = converter().structure(data, AgentRunState)
    except (cattrs.BaseValidationError, TypeError, ValueError, KeyError) as exc:
        raise AgentRunStateError(f"malformed agent run state: {exc}") from exc
    if state.status not in ("running", "suspended", *TERMINAL_STATUSES):
        raise AgentRunStateError(f"unknown agent run status {state.status!r}")
    return state
