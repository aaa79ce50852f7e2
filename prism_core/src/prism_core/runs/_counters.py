"""Run counters: what a run has spent so far, checked against its limits.

It must not end a run: it reports a breach, and the phases decide.
"""

from __future__ import annotations

import attrs

from ..content import Usage
from ..limits import RunLimitBreach, RunLimits

__all__ = ("LimitBreached", "RunCounters")


class LimitBreached(Exception):
    """Internal: a run limit was crossed (turned into ``run_limit_exceeded`` + failure)."""

    def __init__(self, breach: RunLimitBreach) -> None:
        super().__init__(
            f"Run limit exceeded: {breach.axis} is {breach.limit:g}, the run reached "
            f"{breach.observed:g}"
        )
        self.breach = breach


@attrs.define
class RunCounters:
    """Turns, provider attempts, tool rounds and calls, and usage so far."""

    turns: int = 0
    provider_attempts: int = 0
    tool_rounds: int = 0
    tool_calls: int = 0
    #: How often stop hooks continued the run instead of letting it finish.
    stop_continuations: int = 0
    #: How often an invalid typed answer went back to the model (see ``_output``).
    output_retries: int = 0
    usage: Usage = attrs.field(factory=Usage)
    usage_reported: bool = False

    def charge(self, axis: str, observed: float, limits: RunLimits) -> None:
        """Raise :class:`LimitBreached` when ``observed`` exceeds the ceiling of ``axis``."""
        ceiling = getattr(limits, axis)
        if ceiling is not None and observed > ceiling:
            raise LimitBreached(RunLimitBreach(axis, ceiling, observed))

    def add_usage(self, usage: Usage, limits: RunLimits) -> None:
        """Add one turn's usage and check the token and cost axes."""
        if limits.cost_currency is not None and usage.currency not in (None, limits.cost_currency):
            raise LimitBreached(
                RunLimitBreach("cost_currency", limits.max_cost or 0.0, usage.cost or 0.0)
            )
        self.usage = self.usage + usage
        self.usage_reported = True
        self.charge("max_input_tokens", self.usage.input_tokens, limits)
        self.charge("max_output_tokens", self.usage.output_tokens, limits)
        self.charge("max_total_tokens", self.usage.total_tokens, limits)
        if self.usage.cost is not None:
            self.charge("max_cost", self.usage.cost, limits)
