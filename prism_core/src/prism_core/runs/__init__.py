"""Runs: options, limits, the run loop, loop strategies, and event broadcasting."""

from ._broadcast import EventBroadcaster, EventSubscription, OverflowPolicy
from ._counters import RunCounters
from ._driver import RunEventStream
from ._loops import AgentLoopStrategy, GenerateValidateReviseLoop, LoopContext, SingleShotLoop
from ._options import RUN_OPTION_KEYS, InvalidOptionsError, RunOptions

__all__ = (
    "RUN_OPTION_KEYS",
    "AgentLoopStrategy",
    "EventBroadcaster",
    "EventSubscription",
    "GenerateValidateReviseLoop",
    "InvalidOptionsError",
    "LoopContext",
    "OverflowPolicy",
    "RunCounters",
    "RunEventStream",
    "RunOptions",
    "SingleShotLoop",
)
