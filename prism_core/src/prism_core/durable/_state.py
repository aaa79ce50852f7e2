"""Run state schema v1: the frontier of a durable run, as stored in its checkpoint.

The state holds the run's frontier (session leaf, counters, pending work, decisions, loop
state), never its transcript: messages live once in the session store.

It must not read or write a store: it is the schema, its JSON form and the bounds a write
checks; reading a stored state back is :mod:`._state_parse`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

import attrs

from .._decision_record import DecisionRecord
from ..codec import dumps
from ..content import ErrorInfo, Message, Usage
from ..errors import AgentRunStateError
from ._state_codec import unstructure_known

__all__ = (
    "MAX_SKILL_BODIES_BYTES",
    "MAX_SKILL_BODY_BYTES",
    "MAX_RUN_GUARDRAILS",
    "MAX_RUN_GUARDRAIL_CHARS",
    "MAX_PERSISTED_TOOL_NAMES",
    "MAX_SKILL_NAME_CHARS",
    "MAX_STATE_DEPTH",
    "MAX_STATE_PROPERTIES",
    "SCHEMA_VERSION",
    "AgentRunState",
    "DecisionKind",
    "DecisionRecord",
    "DecisionScope",
    "Interruption",
    "LoopStateRecord",
    "PendingCall",
    "PendingDecision",
    "ResolutionRecord",
    "RunCountersState",
    "RunGuardrailRecord",
    "RunStatus",
    "SessionStateRecord",
    "SkillBody",
    "StickyDecision",
    "arguments_hash",
    "check_state_bounds",
    "state_to_json",
)

SCHEMA_VERSION = 1
MAX_STATE_DEPTH = 32
MAX_STATE_PROPERTIES = 256
_CONTAINERS = (dict, list)
#: Bounds of the skills a checkpoint carries (what a run can load, never more).
MAX_SKILL_NAME_CHARS = 256
MAX_SKILL_BODY_BYTES = 262144
MAX_SKILL_BODIES_BYTES = 1048576
#: The most tool names a durable run's ``tool_names`` grant may hold (it rides every checkpoint).
MAX_PERSISTED_TOOL_NAMES = 128
#: Bounds of the run guardrails a checkpoint records (see :class:`RunGuardrailRecord`).
MAX_RUN_GUARDRAILS = 64
MAX_RUN_GUARDRAIL_CHARS = 256

RunStatus: TypeAlias = Literal["running", "suspended", "succeeded", "failed", "aborted", "denied"]
DecisionKind: TypeAlias = Literal["tool_approval", "input_guardrail", "elicitation"]
TERMINAL_STATUSES = ("succeeded", "failed", "aborted", "denied")


def arguments_hash(arguments: Mapping[str, Any]) -> str:
    """sha256 hex of the canonical JSON of ``arguments``."""
    return hashlib.sha256(dumps(dict(arguments))).hexdigest()


@attrs.frozen(kw_only=True)
class DecisionScope:
    """What a decision is about: the tool, its effect kind, its identity (``agent/tool``) and
    the hash of the exact arguments.

    A sticky decision made on edited arguments has no ``arguments_hash``: the edit was one-off,
    so the decision sticks by tool name, effect kind and identity alone."""

    tool_name: str
    effect_kind: str | None
    identity: str
    arguments_hash: str | None

    def covers(self, scope: DecisionScope) -> bool:
        """Whether a sticky decision of this scope applies to a call of ``scope``: every field
        equal, an absent ``arguments_hash`` matching any arguments."""
        return (
            self.tool_name == scope.tool_name
            and self.effect_kind == scope.effect_kind
            and self.identity == scope.identity
            and (self.arguments_hash is None or self.arguments_hash == scope.arguments_hash)
        )


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
    #: ``{"pack", "rule"}`` of the pack ``ask`` rule that raised this decision, if one did
    #: (left out of the JSON form otherwise).
    guardrail_rule: Mapping[str, str] | None = None
    #: How many distinct actors must allow the call (its tool's ``approvers``), when more
    #: than one; ``approved_by`` names those who have, oldest first, once one has. Both are
    #: left out of the JSON form while unset.
    approvers: int | None = None
    approved_by: tuple[str, ...] | None = None
    #: When the decision started pending and when it expires (epoch seconds), for a run or a
    #: tool with an ``approval_timeout_ms``; left out of the JSON form otherwise.
    pending_since: float | None = None
    expires_at: float | None = None


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
    #: The sub-agent run this call waits on (a call of an ``agent.as_tool()`` tool whose
    #: child suspended); left out of the JSON form when ``None``.
    child_run_id: str | None = None
    #: The resume input the decided child run is resumed with (``expected_version`` and its
    #: ``decisions``), kept until the parent runs the call; left out when ``None``.
    child_resume: Mapping[str, Any] | None = None
    #: The process (``"host:pid"``) that dispatched an allowed call, recorded with its
    #: ``dispatched`` mark so a receipt written after a crash names it; left out when ``None``.
    dispatched_by: str | None = None


@attrs.frozen(kw_only=True)
class ResolutionRecord:
    """The audit of how one in-doubt call was settled: ``outcome``, who settled it
    (``source``: ``operator``, ``reconcile``, ``idempotent``, or ``sub_agent`` for a sub-agent
    call whose child run the continue continues) and when (``at``, Unix seconds). The result
    itself is not kept here, only in the session."""

    tool_call_id: str
    outcome: Literal["completed", "not_started", "failed"]
    source: Literal["operator", "reconcile", "idempotent", "sub_agent"]
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
    #: How often stop hooks continued the run; left out of the JSON form when ``0``.
    stop_continuations: int = 0
    #: How often an invalid typed answer went back to the model; left out when ``0``.
    output_retries: int = 0


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
    #: The attention compiler's sticky frontier (``{"tool_call_ids", "thinking_keys"}``),
    #: read leniently on resume (a malformed entry is dropped, never refused); left out of the
    #: JSON form when the session has none.
    attention_sticky: Mapping[str, Any] | None = None


@attrs.frozen(kw_only=True)
class RunGuardrailRecord:
    """The identity of one of the run's own guards (``guardrails=`` on ``run``): its stage,
    name and revision. The guard itself is a callable no checkpoint holds; a resume must be
    handed guards with exactly these identities again."""

    stage: str
    name: str
    revision: str | None = None


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
    #: The run's own guards, by identity, in enforcement order (``None``: the run has none).
    run_guardrails: tuple[RunGuardrailRecord, ...] | None = None
    error: ErrorInfo | None = None
    stop_reason: str | None = None
    stop_detail: str | None = None
    resolutions: tuple[ResolutionRecord, ...] = ()
    #: The decisions that settled the run's pending calls, oldest first (left out of the JSON
    #: form while empty, so older checkpoints read as ``()``).
    audit: tuple[DecisionRecord, ...] = ()
    #: How many older decision records the checkpoints of this run no longer hold (a run keeps
    #: its newest ``MAX_AUDIT_RECORDS``); left out of the JSON form while ``0``.
    audit_omitted: int = 0
    #: A short digest of each part of the agent definition the fingerprint covers (see
    #: :func:`~prism_core.durable._fingerprint.fingerprint_parts`), so a refused resume can
    #: name what changed; ``None`` in checkpoints written before it.
    fingerprint_parts: Mapping[str, Any] | None = None
    #: The lease's length for a run started with ``RunStateOptions(lease_ms=...)``.
    lease_ms: int | None = None
    #: Wall-clock milliseconds since the epoch until which the writing worker holds the run
    #: (see :mod:`prism_core.durable._lease`); written with every checkpoint of a leased run.
    lease_expires_at: int | None = None
    #: The JSON Schema the run's final answer must match (``output_type``), if it has one.
    output_schema: Mapping[str, Any] | None = None
    #: The validated final answer of a succeeded run with an ``output_type``, as JSON.
    output: Any = None
    #: Who started the run (the ``actor`` run option, a face's caller); left out of the JSON
    #: form while ``None``.
    started_by: str | None = None
    #: The run's ``approval_timeout_ms`` (``RunStateOptions``), so a resumed run's later
    #: decisions expire as its first ones did; left out of the JSON form while ``None``.
    approval_timeout_ms: int | None = None
    #: Whether the run's state changes are written to the outbox for the notifiers
    #: (``durable/_outbox.py``); left out of the JSON form while ``False``.
    notify: bool = False
    #: The run whose sub-agent call started this run (``None`` for a top-level run); left out
    #: of the JSON form while ``None``.
    parent_run_id: str | None = None
    schema_version: int = SCHEMA_VERSION

    @property
    def terminal(self) -> bool:
        """Whether the run has ended."""
        return self.status in TERMINAL_STATUSES


#: The records of a run state, unstructured without code generation (see ``_state_codec``).
_RECORDS: frozenset[type[Any]] = frozenset(
    (
        AgentRunState,
        DecisionRecord,
        DecisionScope,
        Interruption,
        LoopStateRecord,
        PendingCall,
        PendingDecision,
        ResolutionRecord,
        RunCountersState,
        RunGuardrailRecord,
        SessionStateRecord,
        SkillBody,
        StickyDecision,
    )
)


def state_to_json(state: AgentRunState) -> dict[str, Any]:
    """The JSON form of ``state`` (``checkpoint_policy`` appears only for ``every-turn``,
    ``stop_reason``/``stop_detail`` only on a terminal state that has them, the lease fields
    only for a leased run, ``counters.stop_continuations`` only when not ``0``,
    ``run_guardrails`` only for a run with guards of its own, each row's ``revision`` only
    when the guard has one, ``output_schema``/``output`` and ``counters.output_retries`` only
    for a run with an ``output_type``, a pending call's ``child_run_id``/``child_resume`` only
    for a call waiting on a sub-agent, ``audit`` only once a decision was made,
    ``audit_omitted`` only when not ``0``, ``fingerprint_parts``, ``started_by``,
    ``approval_timeout_ms`` and ``parent_run_id`` only when recorded, ``notify`` only when
    set, a pending decision's approvers and deadline and a pending call's ``dispatched_by``
    only when set)."""
    data: dict[str, Any] = unstructure_known(state, _RECORDS)
    # Optional fields appear only when set, so records of runs that do not use them keep
    # their bytes.
    for key in (
        "checkpoint_policy",
        "stop_reason",
        "stop_detail",
        "lease_ms",
        "lease_expires_at",
        "run_guardrails",
        "output_schema",
        "output",
        "fingerprint_parts",
        "started_by",
        "approval_timeout_ms",
        "parent_run_id",
    ):
        if data.get(key) is None:
            data.pop(key, None)
    if not data.get("audit"):
        data.pop("audit", None)
    if not data.get("audit_omitted"):
        data.pop("audit_omitted", None)
    if not data.get("notify"):
        data.pop("notify", None)
    for row in data.get("run_guardrails", ()):
        if row.get("revision") is None:
            row.pop("revision", None)
    for call in data["pending_calls"]:
        for key in ("child_run_id", "child_resume", "dispatched_by"):
            if call.get(key) is None:
                call.pop(key, None)
    for key in ("stop_continuations", "output_retries"):
        if data["counters"].get(key) == 0:
            del data["counters"][key]
    session_state = data.get("session_state")
    if session_state is not None and session_state.get("attention_sticky") is None:
        session_state.pop("attention_sticky", None)
    interruption = data.get("interruption")
    for decision in interruption["pending_decisions"] if interruption else ():
        for key in _OPTIONAL_DECISION_KEYS:
            if decision.get(key) is None:
                decision.pop(key, None)
    return data


#: The keys of a pending decision left out of its JSON form while ``None``.
_OPTIONAL_DECISION_KEYS = (
    "guardrail_rule",
    "approvers",
    "approved_by",
    "pending_since",
    "expires_at",
)


def _walk(value: Any, depth: int) -> None:
    if isinstance(value, dict):
        if len(value) > MAX_STATE_PROPERTIES:
            raise AgentRunStateError(
                f"agent run state has an object with {len(value)} properties; "
                f"the limit is {MAX_STATE_PROPERTIES}"
            )
        items: Any = value.values()
    elif isinstance(value, list):
        items = value
    else:
        return
    # Only containers are walked into (a state is mostly strings and numbers); any item of a
    # container at the deepest level is one level too deep, whatever it is.
    if depth >= MAX_STATE_DEPTH and items:
        raise AgentRunStateError(f"agent run state is nested deeper than {MAX_STATE_DEPTH} levels")
    for item in items:
        if isinstance(item, _CONTAINERS):
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
