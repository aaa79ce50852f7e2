"""Reading a stored run state: the parse and every field check a stored state passes.

A state is read back only through :func:`parse_state`; the schema itself (the records, their
JSON form and the byte bounds a write checks) lives in :mod:`._state`. It must not read or
write a store.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import attrs
import cattrs

from .._approval_gate import MAX_APPROVAL_TIMEOUT_MS, MAX_APPROVERS
from .._echo import clip, echo
from ..codec import converter
from ..errors import AgentRunStateError
from ..guardrails._decisions import GUARDRAIL_STAGES
from ..limits import HARD_MAX_PROVIDER_BYTES, RunLimits
from ..skills import MAX_LOADED_SKILLS
from ._options import (
    HARD_MAX_AGENT_RUN_STATE_BYTES,
    HARD_MAX_PENDING_DECISIONS,
    HARD_MAX_STICKY_DECISIONS,
)
from ._state import (
    _RECORDS,
    MAX_PERSISTED_TOOL_NAMES,
    MAX_RUN_GUARDRAIL_CHARS,
    MAX_RUN_GUARDRAILS,
    MAX_SKILL_BODIES_BYTES,
    MAX_SKILL_BODY_BYTES,
    MAX_SKILL_NAME_CHARS,
    SCHEMA_VERSION,
    TERMINAL_STATUSES,
    AgentRunState,
    PendingDecision,
    RunGuardrailRecord,
    SessionStateRecord,
    check_state_bounds,
)
from ._state_codec import structure_exact, unstructure_known
from ._state_shape import check_same, check_shape
from ._state_shape import malformed as _malformed

__all__ = ("parse_state",)


def _count(value: int, path: str, *, high: int | None = None) -> None:
    if value < 0 or (high is not None and value > high):
        bound = f"0..{high}" if high is not None else "a non-negative integer"
        raise _malformed(f"{path} must be {bound}, got {echo(value)}")


@functools.cache
def _limit_kinds() -> dict[str, tuple[str, bool, int | None]]:
    """Each run limit's ``(kind, nullable, upper bound)``, kind ``"str"``, ``"int"`` or
    ``"number"``, read once from :class:`~prism_core.RunLimits`."""
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


def _check_approvals(decision: PendingDecision) -> None:
    """A pending decision's approvers, approvals so far and deadline are within what a run
    writes: 2..``MAX_APPROVERS`` approvers, fewer distinct actors so far (1..256 UTF-8 bytes
    each), a deadline no earlier than its start."""
    needed = decision.approvers
    if needed is not None and not 2 <= needed <= MAX_APPROVERS:
        raise _malformed(f"a pending decision's approvers must be in 2..{MAX_APPROVERS}")
    given = decision.approved_by
    if given is not None:
        if needed is None or not 1 <= len(given) < needed or len(set(given)) != len(given):
            raise _malformed("a pending decision's approved_by must name fewer distinct actors")
        if any(not 1 <= len(actor.encode("utf-8", "replace")) <= 256 for actor in given):
            raise _malformed("a pending decision's approved_by names must be 1..256 bytes")
    since, until = decision.pending_since, decision.expires_at
    if since is None and until is None:
        return
    if since is None or until is None or until < since:
        raise _malformed("a pending decision's pending_since and expires_at go together")


def _check_fields(state: AgentRunState) -> None:

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
    if state.started_by is not None and not 1 <= len(state.started_by.encode()) <= 256:
        raise _malformed("started_by must be 1..256 UTF-8 bytes")
    if state.parent_run_id is not None and not state.parent_run_id:
        raise _malformed("parent_run_id must be a non-empty string")
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
        for decision in decisions:
            _check_approvals(decision)
    timeout = state.approval_timeout_ms
    if timeout is not None and not 1 <= timeout <= MAX_APPROVAL_TIMEOUT_MS:
        raise _malformed(f"approval_timeout_ms must be in 1..{MAX_APPROVAL_TIMEOUT_MS}")
    for call in state.pending_calls:
        if call.dispatched_by is not None and not 1 <= len(call.dispatched_by) <= 512:
            raise _malformed("a pending call's dispatched_by must be 1..512 characters")
    if len(state.sticky_decisions) > HARD_MAX_STICKY_DECISIONS:
        raise _malformed(
            f"sticky_decisions holds {len(state.sticky_decisions)} decisions; "
            f"the limit is {HARD_MAX_STICKY_DECISIONS}"
        )
    if state.tool_names is not None and len(state.tool_names) > MAX_PERSISTED_TOOL_NAMES:
        raise _malformed(
            f"tool_names holds {len(state.tool_names)} names; "
            f"the limit is {MAX_PERSISTED_TOOL_NAMES}"
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
