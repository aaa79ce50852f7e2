"""Run state schema v1: the frontier of a durable run, as stored in its checkpoint.

The state holds the run's frontier (session leaf, counters, pending work, decisions, loop
state), never its transcript: messages live once in the session store.

It must not read or write a store: it is the schema and its checks.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

import attrs
import cattrs

from .._echo import clip, echo
from ..codec import converter, dumps
from ..content import ErrorInfo, Message, Usage
from ..errors import AgentRunStateError
from ..guardrails._decisions import GUARDRAIL_STAGES
from ..skills import MAX_LOADED_SKILLS
from ._decision_record import DecisionRecord
from ._state_codec import structure_exact, unstructure_known
from ._state_shape import check_same, check_shape
from ._state_shape import malformed as _malformed

__all__ = (
    "MAX_SKILL_BODIES_BYTES",
    "MAX_SKILL_BODY_BYTES",
    "MAX_RUN_GUARDRAILS",
    "MAX_RUN_GUARDRAIL_CHARS",
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
    "parse_state",
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
    ``audit_omitted`` only when not ``0``, ``fingerprint_parts`` only when recorded)."""
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
    ):
        if data.get(key) is None:
            data.pop(key, None)
    if not data.get("audit"):
        data.pop("audit", None)
    if not data.get("audit_omitted"):
        data.pop("audit_omitted", None)
    for row in data.get("run_guardrails", ()):
        if row.get("revision") is None:
            row.pop("revision", None)
    for call in data["pending_calls"]:
        for key in ("child_run_id", "child_resume"):
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
        if decision.get("guardrail_rule") is None:
            decision.pop("guardrail_rule", None)
    return data


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


def _count(value: int, path: str, *, high: int | None = None) -> None:
    if value < 0 or (high is not None and value > high):
        bound = f"0..{high}" if high is not None else "a non-negative integer"
        raise _malformed(f"{path} must be {bound}, got {echo(value)}")


@functools.cache
def _limit_kinds() -> dict[str, tuple[str, bool, int | None]]:
    """Each run limit's ``(kind, nullable, upper bound)``, kind ``"str"``, ``"int"`` or
    ``"number"``, read once from :class:`~prism_core.RunLimits`."""
    from ..limits import HARD_MAX_PROVIDER_BYTES, RunLimits

    kinds: dict[str, tuple[str, bool, int | None]] = {}
    for field in attrs.fields(RunLimits):
        kind = str(field.type)
        short = "str" if kind.startswith("str") else "int" if kind.startswith("int") else "number"
        high = HARD_MAX_PROVIDER_BYTES if "bytes" in field.name else None
        kinds[field.name] = (short, "None" in kind, high)
    return kinds


def _check_limits(limits: Mapping[str, Any]) -> None:
    kinds = _limit_kinds()
    for name, value in limits.items():
        known = kinds.get(name)
        if known is None:
            raise _malformed(f"limits.{echo(name, 40)} is not a run limit")
        kind, nullable, high = known
        if value is None:
            if not nullable:
                raise _malformed(f"limits.{echo(name, 40)} cannot be null")
        elif kind == "str":
            if not isinstance(value, str):
                raise _malformed(f"limits.{echo(name, 40)} must be a string, got {echo(value)}")
        elif kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise _malformed(f"limits.{echo(name, 40)} must be an integer, got {echo(value)}")
            if value < 0 or (high is not None and value > high):
                _count(value, f"limits.{echo(name, 40)}", high=high)
        elif isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise _malformed(
                f"limits.{echo(name, 40)} must be a non-negative number, got {echo(value)}"
            )


def _check_session_state(record: SessionStateRecord) -> None:
    names = record.loaded_skill_names
    if len(names) > MAX_LOADED_SKILLS:
        raise _malformed(
            f"session_state.loaded_skill_names holds {len(names)} names; "
            f"the limit is {MAX_LOADED_SKILLS}"
        )
    bodies = record.loaded_skill_bodies or ()
    if len(bodies) > MAX_LOADED_SKILLS:
        raise _malformed(
            f"session_state.loaded_skill_bodies holds {len(bodies)} bodies; "
            f"the limit is {MAX_LOADED_SKILLS}"
        )
    for name in (*names, *(body.name for body in bodies)):
        if not name or len(name) > MAX_SKILL_NAME_CHARS:
            raise _malformed(
                f"a loaded skill name must be 1..{MAX_SKILL_NAME_CHARS} characters, got {len(name)}"
            )
    total = 0
    for body in bodies:
        size = len(body.instructions.encode("utf-8"))
        total += size
        if size > MAX_SKILL_BODY_BYTES:
            raise _malformed(
                f"the body of skill {echo(body.name)} is {size} bytes; "
                f"the limit is {MAX_SKILL_BODY_BYTES}"
            )
    if total > MAX_SKILL_BODIES_BYTES:
        raise _malformed(
            f"loaded skill bodies total {total} bytes; the limit is {MAX_SKILL_BODIES_BYTES}"
        )


def _check_run_guardrails(rows: tuple[RunGuardrailRecord, ...]) -> None:
    if len(rows) > MAX_RUN_GUARDRAILS:
        raise _malformed(
            f"run_guardrails holds {len(rows)} guards; the limit is {MAX_RUN_GUARDRAILS}"
        )
    for row in rows:
        if row.stage not in GUARDRAIL_STAGES:
            raise _malformed(f"run_guardrails has an unknown stage {echo(row.stage)}")
        for value in (row.name, row.revision):
            if value is not None and not 1 <= len(value) <= MAX_RUN_GUARDRAIL_CHARS:
                raise _malformed(
                    f"a run guardrail's name and revision must be 1..{MAX_RUN_GUARDRAIL_CHARS} "
                    f"characters, got {len(value)}"
                )


def _check_fields(state: AgentRunState) -> None:
    from ._options import (
        HARD_MAX_AGENT_RUN_STATE_BYTES,
        HARD_MAX_PENDING_DECISIONS,
        HARD_MAX_STICKY_DECISIONS,
    )

    for name in ("run_id", "session_id", "agent_id", "definition_revision", "fingerprint"):
        if not getattr(state, name):
            raise _malformed(f"{name} must be a non-empty string")
    counters = state.counters
    for name in (
        "turns",
        "provider_attempts",
        "tool_rounds",
        "tool_calls",
        "stop_continuations",
        "output_retries",
    ):
        _count(getattr(counters, name), f"counters.{name}")
    _count(state.audit_omitted, "audit_omitted")
    if counters.usage is not None:
        for name in ("input_tokens", "output_tokens", "total_tokens"):
            _count(getattr(counters.usage, name), f"counters.usage.{name}")
        for name in ("cache_read_tokens", "cache_write_tokens"):
            _count(getattr(counters.usage, name), f"counters.usage.{name}")
    size = state.max_state_bytes
    if size is not None and not 1 <= size <= HARD_MAX_AGENT_RUN_STATE_BYTES:
        raise _malformed(
            f"max_state_bytes must be in 1..{HARD_MAX_AGENT_RUN_STATE_BYTES}, got {echo(size)}"
        )
    if state.limits is not None:
        _check_limits(state.limits)
    if state.interruption is not None:
        decisions = state.interruption.pending_decisions
        if len(decisions) > HARD_MAX_PENDING_DECISIONS:
            raise _malformed(
                f"interruption holds {len(decisions)} pending decisions; "
                f"the limit is {HARD_MAX_PENDING_DECISIONS}"
            )
    if len(state.sticky_decisions) > HARD_MAX_STICKY_DECISIONS:
        raise _malformed(
            f"sticky_decisions holds {len(state.sticky_decisions)} decisions; "
            f"the limit is {HARD_MAX_STICKY_DECISIONS}"
        )
    if state.session_state is not None:
        _check_session_state(state.session_state)
    if state.run_guardrails is not None:
        _check_run_guardrails(state.run_guardrails)


def parse_state(data: Any, *, max_bytes: int, run_id: str | None = None) -> AgentRunState:
    """Validate and structure a stored state; anything malformed is an
    :class:`AgentRunStateError` ("Malformed agent run state …", naming ``run_id`` when given).

    Parsing never coerces: a field of the wrong JSON type (a string for a list, a bool or a
    float for an integer) is refused, as is a counter below zero, a limit that is not a run
    limit, or more skills, decisions or bytes than a run ever writes.
    """
    try:
        return _parse(data, max_bytes)
    except AgentRunStateError as exc:
        if run_id is None:
            raise
        raise AgentRunStateError(f"agent run {echo(run_id)}: {exc.message}") from exc


def _parse(data: Any, max_bytes: int) -> AgentRunState:
    if not isinstance(data, dict):
        raise _malformed(f"it must be a JSON object, got {type(data).__name__}")
    check_state_bounds(data, max_bytes)
    version = data.get("schema_version")
    if type(version) is not int or version != SCHEMA_VERSION:
        raise AgentRunStateError(f"unsupported agent run state schema_version {echo(version)}")
    # The direct path first: it takes only exact JSON types, so what it builds has the shape
    # and gives back the stored JSON (``check_shape`` and ``check_same`` would pass). Whatever
    # it declines gets those checks, then the converter's result and errors.
    state = structure_exact(data, AgentRunState)
    exact = state is not None
    if state is None:
        check_shape(data, AgentRunState, "state")
        try:
            state = converter().structure(data, AgentRunState)
        except (cattrs.BaseValidationError, TypeError, ValueError, KeyError, AttributeError) as exc:
            raise _malformed(clip(_describe(exc), 300)) from exc
    if state.status not in ("running", "suspended", *TERMINAL_STATUSES):
        raise AgentRunStateError(f"unknown agent run status {echo(state.status)}")
    if state.status == "suspended" and state.interruption is None:
        # Every suspension records what it waits for; without it no decision can apply.
        raise _malformed("a suspended run records no interruption")
    if not exact:
        check_same(data, unstructure_known(state, _RECORDS), "state")
    _check_fields(state)
    return state


def _describe(exc: BaseException) -> str:
    if isinstance(exc, cattrs.BaseValidationError):
        notes = cattrs.transform_error(exc)
        return "; ".join(notes) if notes else type(exc).__name__
    return f"{type(exc).__name__}: {exc}"
