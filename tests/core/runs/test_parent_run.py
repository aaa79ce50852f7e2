"""What a sub-agent sees of its parent: the narrow ``ParentRun`` view, and the budget lent and
charged back through it, without a session."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import AbortSignal, GuardrailConfig, RunLimits, Usage
from prism_core.runs._counters import LimitBreached, RunCounters
from prism_core.runs._delegation import ParentRun, charge_child, child_budget


def _parent(limits: RunLimits, counters: RunCounters, **fields: Any) -> ParentRun:
    values: dict[str, Any] = {
        "run_id": "run_parent",
        "session_id": "s1",
        "session_store": None,
        "started_by": None,
        "signal": AbortSignal(),
        "guardrails": GuardrailConfig(),
        "limits": limits,
        "counters": counters,
        "deadline": None,
        "durable": None,
        "pending_calls": (),
        "children": {},
        "emit": lambda event: event,
    }
    values.update(fields)
    return ParentRun(**values)


def test_the_child_gets_what_is_left_of_the_parents_limits() -> None:
    """On each counted axis the child's limit is what it spent before plus what the parent has
    left; byte caps and the currency are the parent's; unset axes stay unset."""
    limits = RunLimits(max_turns=5, max_total_tokens=100, max_request_bytes=2048)
    counters = RunCounters(turns=2, usage=Usage(total_tokens=40))
    spent = RunCounters(turns=1, usage=Usage(total_tokens=10))
    budget = child_budget(_parent(limits, counters), spent)
    assert budget["max_turns"] == 1 + 3
    assert budget["max_total_tokens"] == 10 + 60
    assert budget["max_request_bytes"] == 2048
    assert "max_tool_calls" not in budget
    assert "max_wall_time_ms" not in budget


def test_what_the_child_spent_is_charged_to_the_parent() -> None:
    """The child's turns and usage between two counter readings are added to the parent's
    live counters."""
    counters = RunCounters(turns=1)
    parent = _parent(RunLimits(max_turns=10), counters)
    before = RunCounters(turns=2)
    after = RunCounters(turns=5, usage=Usage(input_tokens=7), usage_reported=True)
    charge_child(parent, before, after)
    assert (counters.turns, counters.usage.input_tokens) == (4, 7)


def test_a_child_that_overspends_breaches_the_parents_limit() -> None:
    """A charge that takes the parent over one of its limits raises the parent's breach."""
    parent = _parent(RunLimits(max_turns=3), RunCounters(turns=2))
    with pytest.raises(LimitBreached) as caught:
        charge_child(parent, RunCounters(), RunCounters(turns=2))
    assert (caught.value.breach.axis, caught.value.breach.observed) == ("max_turns", 4)
