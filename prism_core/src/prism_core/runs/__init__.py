"""Runs: options, limits, the run loop, loop strategies, and event broadcasting.

It only re-exports the public names of ``runs/``; it must not hold behaviour.
"""

from ._broadcast import EventBroadcaster, EventSubscription, OverflowPolicy
from ._counters import RunCounters
from ._driver import RunEventStream
from ._loops import AgentLoopStrategy, GenerateValidateReviseLoop, LoopContext, SingleShotLoop
from ._options import RUN_OPTION_KEYS, InvalidOptionsError, RunOptions
from ._stop_hooks import StopHookContext
from ._turn_policy import MAX_STOP_DETAIL_BYTES, TurnPolicy, TurnPolicyContext, TurnPolicyError

__all__ = (
    "MAX_STOP_DETAIL_BYTES",
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
    "StopHookContext",
    "TurnPolicy",
    "TurnPolicyContext",
    "TurnPolicyError",
)
