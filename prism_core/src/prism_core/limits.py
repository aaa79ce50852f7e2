"""Run limits: ceilings on every axis, narrow-only per run, and the breach record."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

__all__ = (
    "DEFAULT_MAX_OUTPUT_RETRIES",
    "DEFAULT_MAX_STOP_CONTINUATIONS",
    "HARD_MAX_PROVIDER_BYTES",
    "RunLimitBreach",
    "RunLimits",
    "coerce_limits",
)

#: How often stop hooks may continue a finishing run unless the limits say otherwise.
DEFAULT_MAX_STOP_CONTINUATIONS = 3

#: Request and response bytes can never exceed this, whatever a host configures.
HARD_MAX_PROVIDER_BYTES = 64 * 1024 * 1024
#: How often a run with an ``output_type`` asks the model again for a valid answer.
DEFAULT_MAX_OUTPUT_RETRIES = 2

_POLICY_AXES = (
    "max_turns",
    "max_provider_attempts",
    "max_tool_rounds",
    "max_tool_calls",
    "max_wall_time_ms",
    "max_input_tokens",
    "max_output_tokens",
    "max_total_tokens",
    "max_cost",
    "max_stop_continuations",
)
_BYTE_AXES = ("max_request_bytes", "max_response_bytes")
#: Axes that are always enforced, with a default instead of ``None``.
_COUNT_AXES = ("max_output_retries",)


@attrs.frozen
class RunLimits:
    """Ceilings for one run. ``None`` on a policy axis disables that axis.

    ``max_request_bytes``/``max_response_bytes`` cannot be disabled and never exceed
    :data:`HARD_MAX_PROVIDER_BYTES`. ``max_cost`` is in ``cost_currency`` when given.
    ``max_stop_continuations`` bounds how often stop hooks may continue a finishing run
    (default :data:`DEFAULT_MAX_STOP_CONTINUATIONS`; ``0`` lets them observe only);
    ``max_output_retries`` how often a run with an ``output_type`` sends an invalid answer
    back to the model (default 2; it cannot be disabled).
    """

    max_turns: int | None = None
    max_provider_attempts: int | None = None
    max_tool_rounds: int | None = None
    max_tool_calls: int | None = None
    max_wall_time_ms: float | None = None
    max_request_bytes: int = HARD_MAX_PROVIDER_BYTES
    max_response_bytes: int = HARD_MAX_PROVIDER_BYTES
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    max_cost: float | None = None
    cost_currency: str | None = None
    max_stop_continuations: int | None = DEFAULT_MAX_STOP_CONTINUATIONS
    max_output_retries: int = DEFAULT_MAX_OUTPUT_RETRIES

    def narrowed(self, run: RunLimits | Mapping[str, Any] | None) -> RunLimits:
        """The effective limits when a run asks for ``run``: every axis may only narrow."""
        if run is None:
            return self
        requested = _validated_mapping(run, for_run=True)
        changes: dict[str, Any] = {}
        for axis in (*_POLICY_AXES, *_BYTE_AXES, *_COUNT_AXES):
            if axis not in requested or requested[axis] is None:
                continue
            mine = getattr(self, axis)
            value = requested[axis]
            changes[axis] = value if mine is None else min(mine, value)
        currency = requested.get("cost_currency")
        if currency is not None:
            if self.cost_currency is not None and currency != self.cost_currency:
                raise ValueError(
                    f"limits.cost_currency {currency!r} differs from the agent's "
                    f"{self.cost_currency!r}; a run may only narrow limits"
                )
            changes["cost_currency"] = currency
        return attrs.evolve(self, **changes)


@attrs.frozen
class RunLimitBreach:
    """Which limit a run crossed: the axis, its ceiling and the observed value."""

    axis: str
    limit: float
    observed: float


def _validated_mapping(value: RunLimits | Mapping[str, Any], *, for_run: bool) -> dict[str, Any]:
    if isinstance(value, RunLimits):
        data = attrs.asdict(value)
        if for_run:
            # A RunLimits value has every byte axis filled in; only narrowing axes count.
            for axis in _BYTE_AXES:
                if data[axis] == HARD_MAX_PROVIDER_BYTES:
                    data[axis] = None
            if data["max_output_retries"] == DEFAULT_MAX_OUTPUT_RETRIES:
                data["max_output_retries"] = None
        return data
    if not isinstance(value, Mapping):
        raise TypeError(f"limits must be a mapping or RunLimits, got {type(value).__name__}")
    known = {*_POLICY_AXES, *_BYTE_AXES, *_COUNT_AXES, "cost_currency"}
    unknown = sorted(set(value) - known)
    if unknown:
        raise ValueError(f"unknown limits keys {unknown}; known keys: {sorted(known)}")
    data = dict(value)
    for axis in (*_POLICY_AXES, *_BYTE_AXES):
        v = data.get(axis)
        if v is None:
            if axis in _BYTE_AXES and axis in data and not for_run:
                raise ValueError(f"limits.{axis} cannot be None: byte limits are always enforced")
            continue
        if isinstance(v, bool) or not isinstance(v, int | float) or v != v or v < 0:
            raise ValueError(f"limits.{axis} must be a non-negative number or None, got {v!r}")
        if axis in _BYTE_AXES and v > HARD_MAX_PROVIDER_BYTES:
            raise ValueError(f"limits.{axis} may not exceed {HARD_MAX_PROVIDER_BYTES} bytes")
    for axis in _COUNT_AXES:
        v = data.get(axis)
        if v is None:
            if axis in data and not for_run:
                raise ValueError(f"limits.{axis} cannot be None: it is always enforced")
        elif isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"limits.{axis} must be a non-negative integer, got {v!r}")
    currency = data.get("cost_currency")
    if currency is not None and not isinstance(currency, str):
        raise ValueError("limits.cost_currency must be a string")
    return data


def coerce_limits(value: RunLimits | Mapping[str, Any] | None) -> RunLimits:
    """Validate agent-level limits (a mapping or :class:`RunLimits`)."""
    if value is None:
        return RunLimits()
    if isinstance(value, RunLimits):
        return value
    data = _validated_mapping(value, for_run=False)
    return RunLimits(
        **{k: v for k, v in data.items() if not (k in (*_BYTE_AXES, *_COUNT_AXES) and v is None)}
    )
