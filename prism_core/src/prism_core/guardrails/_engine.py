"""Guardrail definitions, configuration and fail-closed evaluation.

It must not know the run loop or packs: the run's phases call it, the pack compiler builds on it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
import attrs

from .._threads import call_host
from ..codec import dumps
from ..redaction import Redactor, redact_value
from ..signals import AbortSignal
from ._decisions import (
    GUARDRAIL_ACTIONS,
    GUARDRAIL_STAGES,
    GuardrailDecision,
    GuardrailRecord,
    GuardrailStage,
)

__all__ = (
    "MAX_GUARDRAIL_ERROR_CHARS",
    "MAX_GUARDRAIL_METADATA_BYTES",
    "MAX_GUARDRAIL_REASON_BYTES",
    "Guardrail",
    "GuardrailConfig",
    "GuardrailContext",
    "coerce_guardrails",
    "evaluate_guardrails",
)

MAX_GUARDRAIL_REASON_BYTES = 4096
MAX_GUARDRAIL_METADATA_BYTES = 16384
MAX_GUARDRAIL_CONCURRENCY = 16
#: Longest exception message a failed guard's record keeps (in ``metadata["error"]``).
MAX_GUARDRAIL_ERROR_CHARS = 500

logger = logging.getLogger(__package__ or __name__)


@attrs.frozen(kw_only=True)
class GuardrailContext:
    """What a guard sees: the stage, the ``value`` checked, and where the run is."""

    stage: GuardrailStage
    value: Any
    session_id: str
    run_id: str
    metadata: Mapping[str, Any] = attrs.field(factory=dict)
    tool_name: str | None = None
    tool_call_id: str | None = None
    signal: AbortSignal | None = attrs.field(default=None, eq=False, repr=False)


def _check_stage(_: Any, __: Any, value: Any) -> None:
    if value not in GUARDRAIL_STAGES:
        raise ValueError(f"guardrail stage must be one of {list(GUARDRAIL_STAGES)}, got {value!r}")


def _check_guard_name(_: Any, __: Any, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError("a guardrail needs a non-empty string name")


@attrs.frozen
class Guardrail:
    """A check at one stage. ``evaluate(context)`` (sync or async) returns a
    :class:`GuardrailDecision` or ``{"action", "reason"?, "metadata"?}``."""

    name: str = attrs.field(validator=_check_guard_name)
    stage: GuardrailStage = attrs.field(validator=_check_stage)
    evaluate: Callable[[GuardrailContext], Any] = attrs.field(eq=False, repr=False)
    revision: str | None = attrs.field(default=None, kw_only=True)


@attrs.frozen
class GuardrailConfig:
    """Guards per stage, in declaration order, and how many may run at once (1..16)."""

    input: tuple[Guardrail, ...] = ()
    output: tuple[Guardrail, ...] = ()
    tool_input: tuple[Guardrail, ...] = ()
    tool_output: tuple[Guardrail, ...] = ()
    max_concurrency: int = 1

    def for_stage(self, stage: GuardrailStage) -> tuple[Guardrail, ...]:
        """The guards of ``stage``."""
        guards: tuple[Guardrail, ...] = getattr(self, stage)
        return guards

    def all(self) -> tuple[Guardrail, ...]:
        """Every guard, stage by stage."""
        return self.input + self.output + self.tool_input + self.tool_output

    def merged(self, other: GuardrailConfig) -> GuardrailConfig:
        """This config with ``other``'s guards appended (the lower concurrency wins)."""
        return GuardrailConfig(
            input=self.input + other.input,
            output=self.output + other.output,
            tool_input=self.tool_input + other.tool_input,
            tool_output=self.tool_output + other.tool_output,
            max_concurrency=min(self.max_concurrency, other.max_concurrency),
        )


def coerce_guardrails(value: Any) -> GuardrailConfig:
    """Accept ``None``, a :class:`GuardrailConfig`, a sequence of guards, or a mapping
    ``{"input": [...], ..., "max_concurrency": n}``; fail with a clear message otherwise."""
    if value is None:
        return GuardrailConfig()
    if isinstance(value, GuardrailConfig):
        return value
    stages: dict[str, list[Guardrail]] = {stage: [] for stage in GUARDRAIL_STAGES}
    concurrency = 1
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - {*GUARDRAIL_STAGES, "max_concurrency"})
        if unknown:
            raise ValueError(f"unknown guardrails keys {unknown}")
        concurrency = value.get("max_concurrency", 1)
        for stage in GUARDRAIL_STAGES:
            for guard in value.get(stage) or ():
                if not isinstance(guard, Guardrail):
                    raise TypeError(f"guardrails.{stage} entries must be Guardrail values")
                if guard.stage != stage:
                    raise ValueError(
                        f"guardrail {guard.name!r} has stage {guard.stage!r} but is listed "
                        f"under {stage!r}"
                    )
                stages[stage].append(guard)
    elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
        for guard in value:
            if not isinstance(guard, Guardrail):
                raise TypeError("guardrails entries must be Guardrail values")
            stages[guard.stage].append(guard)
    else:
        raise TypeError(f"guardrails must be a mapping or a sequence, got {type(value).__name__}")
    if (
        isinstance(concurrency, bool)
        or not isinstance(concurrency, int)
        or not 1 <= concurrency <= MAX_GUARDRAIL_CONCURRENCY
    ):
        raise ValueError(
            f"guardrails.max_concurrency must be an integer in 1..{MAX_GUARDRAIL_CONCURRENCY}, "
            f"got {concurrency!r}"
        )
    return GuardrailConfig(
        input=tuple(stages["input"]),
        output=tuple(stages["output"]),
        tool_input=tuple(stages["tool_input"]),
        tool_output=tuple(stages["tool_output"]),
        max_concurrency=concurrency,
    )


def _tripwire(guard: Guardrail, stage: GuardrailStage, reason: str) -> GuardrailRecord:
    return GuardrailRecord(guard.name, stage, "tripwire", reason, None)


def _normalise(guard: Guardrail, stage: GuardrailStage, outcome: Any) -> GuardrailRecord:
    action: Any
    reason: Any
    metadata: Any
    if isinstance(outcome, GuardrailDecision):
        action, reason, metadata = outcome.action, outcome.reason, outcome.metadata
    elif isinstance(outcome, Mapping):
        action, reason, metadata = (
            outcome.get("action"),
            outcome.get("reason"),
            outcome.get("metadata"),
        )
        if set(outcome) - {"action", "reason", "metadata"}:
            return _tripwire(guard, stage, "guardrail_invalid_decision")
    else:
        return _tripwire(guard, stage, "guardrail_invalid_decision")
    if action not in GUARDRAIL_ACTIONS:
        return _tripwire(guard, stage, "guardrail_invalid_decision")
    if reason is not None and (
        not isinstance(reason, str) or len(reason.encode("utf-8")) > MAX_GUARDRAIL_REASON_BYTES
    ):
        return _tripwire(guard, stage, "guardrail_invalid_decision")
    if metadata is not None:
        if not isinstance(metadata, Mapping):
            return _tripwire(guard, stage, "guardrail_invalid_decision")
        try:
            size = len(dumps(dict(metadata)))
        except (TypeError, ValueError):
            return _tripwire(guard, stage, "guardrail_invalid_decision")
        if size > MAX_GUARDRAIL_METADATA_BYTES:
            return _tripwire(guard, stage, "guardrail_invalid_decision")
        metadata = dict(metadata)
    return GuardrailRecord(guard.name, stage, action, reason, metadata)


def _failed(guard: Guardrail, stage: GuardrailStage, exc: Exception) -> GuardrailRecord:
    """Fail closed, keeping the cause: a tripwire whose metadata names the exception type and
    its bounded message (the record is redacted with the others) and which holds the
    exception itself for the run's error."""
    message = str(exc)
    if len(message) > MAX_GUARDRAIL_ERROR_CHARS:
        message = message[: MAX_GUARDRAIL_ERROR_CHARS - 1] + "…"
    metadata = {"error_type": type(exc).__name__, "error": message}
    return GuardrailRecord(
        guard.name, stage, "tripwire", "guardrail_failed", metadata, exception=exc
    )


async def _evaluate_one(
    guard: Guardrail, context: GuardrailContext, limiter: anyio.CapacityLimiter | None
) -> GuardrailRecord:
    try:
        outcome = await call_host(guard.evaluate, context, limiter=limiter)
    except Exception as exc:
        logger.warning(
            "guardrail %s raised %s at the %s stage; failing closed",
            guard.name,
            type(exc).__name__,
            context.stage,
        )
        return _failed(guard, context.stage, exc)
    record = _normalise(guard, context.stage, outcome)
    if record.reason == "guardrail_invalid_decision" and record.action == "tripwire":
        logger.warning("guardrail %s returned an invalid decision; failing closed", guard.name)
    elif record.action != "allow":
        logger.debug("guardrail %s decided %s at %s", guard.name, record.action, context.stage)
    return record


async def evaluate_guardrails(
    guards: Sequence[Guardrail],
    context: GuardrailContext,
    *,
    max_concurrency: int = 1,
    redactor: Redactor | None = None,
    limiter: anyio.CapacityLimiter | None = None,
) -> list[GuardrailRecord]:
    """Evaluate ``guards`` and return their records in declaration order.

    Sequential evaluation stops at the first guard that does not allow; concurrent
    evaluation (``max_concurrency > 1``) evaluates every guard. Either way the caller acts
    on the first non-``allow`` record in declaration order. Records are redacted.

    A sync ``evaluate`` runs in a worker thread under ``limiter`` (``None``: anyio's default
    limiter). A guard that raises yields a ``tripwire`` record with reason
    ``guardrail_failed``, the exception type and message in its metadata and the exception
    in ``record.exception``.
    """
    records: list[GuardrailRecord] = []
    if max_concurrency <= 1:
        for guard in guards:
            record = await _evaluate_one(guard, context, limiter)
            records.append(redact_value(record, redactor))
            if record.action != "allow":
                break
        return records
    slots: list[GuardrailRecord | None] = [None] * len(guards)
    limiter = anyio.CapacityLimiter(max_concurrency)

    async def run(index: int, guard: Guardrail) -> None:
        async with limiter:
            slots[index] = await _evaluate_one(guard, context, limiter)

    async with anyio.create_task_group() as group:
        for index, guard in enumerate(guards):
            group.start_soon(run, index, guard)
    for slot in slots:
        assert slot is not None
        records.append(redact_value(slot, redactor))
    return records


def first_decisive(records: Sequence[GuardrailRecord]) -> GuardrailRecord | None:
    """The first record that is not ``allow``, or ``None``."""
    for record in records:
        if record.action != "allow":
            return record
    return None
