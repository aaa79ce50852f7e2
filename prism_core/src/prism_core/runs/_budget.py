"""What a run had spent when a limit ended it: the ``budget_exhausted`` event's attribution.

It must not end the run or emit anything: ``_terminals`` does, after ``run_limit_exceeded``.
"""

from __future__ import annotations

from typing import Any

import anyio

from ..content import ToolCallContent
from ..durable import arguments_hash
from ..events import BudgetExhaustedEvent
from ..limits import RunLimitBreach
from ._state import RunState

__all__ = ("MAX_RECENT_TOOL_CALLS", "budget_exhausted", "record_dispatch")

#: How many of the last dispatched calls the event names.
MAX_RECENT_TOOL_CALLS = 10
#: How many of the other axes it names, nearest their limit first.
MAX_CLOSEST_AXES = 3


def record_dispatch(run: RunState, call: ToolCallContent) -> None:
    """Remember that ``call`` is about to run (its arguments by hash only)."""
    run.recent_tool_calls.append(
        {
            "tool_name": call.name,
            "tool_call_id": call.id,
            "arg_hash": f"sha256:{arguments_hash(call.arguments)}",
        }
    )


def _consumed(run: RunState) -> dict[str, float]:
    counters = run.counters
    used: dict[str, float] = {
        "max_turns": counters.turns,
        "max_provider_attempts": counters.provider_attempts,
        "max_tool_rounds": counters.tool_rounds,
        "max_tool_calls": counters.tool_calls,
    }
    if counters.usage_reported:
        usage = counters.usage
        used["max_input_tokens"] = usage.input_tokens
        used["max_output_tokens"] = usage.output_tokens
        used["max_total_tokens"] = usage.total_tokens
        if usage.cost is not None:
            used["max_cost"] = usage.cost
    limit = run.plan.limits.max_wall_time_ms
    if limit is not None and run.deadline is not None:
        used["max_wall_time_ms"] = max(0.0, limit - (run.deadline - anyio.current_time()) * 1000)
    return used


def budget_exhausted(run: RunState, breach: RunLimitBreach) -> BudgetExhaustedEvent:
    """The event for ``breach``: the axis, what every axis used, the other axes nearest their
    limits, and the last dispatched calls."""
    consumed = _consumed(run)
    consumed[breach.axis] = breach.observed
    closest: list[dict[str, Any]] = []
    for axis, used in consumed.items():
        ceiling = getattr(run.plan.limits, axis, None)
        if axis == breach.axis or not ceiling:
            continue
        closest.append({"axis": axis, "used": used, "limit": ceiling, "ratio": used / ceiling})
    closest.sort(key=lambda row: row["ratio"], reverse=True)
    return BudgetExhaustedEvent(
        session_id=run.session_id,
        run_id=run.run_id,
        limit=breach.axis,
        consumed=consumed,
        closest_other_axes=tuple(closest[:MAX_CLOSEST_AXES]),
        recent_tool_calls=tuple(run.recent_tool_calls),
    )
