"""The value types of an agent's run options: turn policy, compaction, tool-result folding,
the attention compiler and loop strategies.

They sit at the bottom of the kernel, below the run loop, so that :class:`~prism_core.AgentConfig`
names them and ``runs/`` uses them. This module holds values and protocols only: it must not
coerce options (``runs/`` does: ``_turn_policy``, ``_compaction``, ``_fold``, ``_attention``,
``_loops``) or import anything above the kernel's lowest layer.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import attrs

from .content import Message, Usage

__all__ = (
    "DEFAULT_ATTENTION_KEEP_LAST",
    "DEFAULT_ATTENTION_TRIGGER_RATIO",
    "DEFAULT_FOLD_KEEP_LAST",
    "DEFAULT_FOLD_MIN_BYTES",
    "DEFAULT_KEEP_RECENT_ENTRIES",
    "AgentLoopStrategy",
    "AttentionSettings",
    "CompactionConfig",
    "CompactionStrategy",
    "CompactionTrigger",
    "LoopContext",
    "StopHook",
    "ToolResultFold",
    "TurnPolicy",
    "TurnPolicyContext",
)

DEFAULT_KEEP_RECENT_ENTRIES = 4
DEFAULT_FOLD_KEEP_LAST = 2
DEFAULT_FOLD_MIN_BYTES = 8192
DEFAULT_ATTENTION_TRIGGER_RATIO = 0.75
DEFAULT_ATTENTION_KEEP_LAST = 3

#: A compaction strategy: called with a ``CompactionContext`` (``runs/_compaction``), answers
#: a summary string or a ``CompactionResult``, possibly awaitable.
CompactionStrategy = Callable[[Any], Any]
#: A host compaction trigger: called with the context meter, answers whether to compact.
CompactionTrigger = Callable[[Any], Any]
#: A stop hook: called with a ``StopHookContext`` (``runs/_stop_hooks``) when a run would
#: finish; its answer decides whether the run goes on.
StopHook = Callable[[Any], Any]


@attrs.frozen(kw_only=True)
class TurnPolicyContext:
    """What a turn policy sees at a turn boundary: the run and its counters so far.

    ``turns`` is the number of provider turns already run (``0`` before the first);
    ``pending_steers`` counts steered messages still queued (those that reached the boundary
    are already in the history, so a stop keeps them).
    """

    session_id: str
    run_id: str
    turns: int
    provider_attempts: int
    tool_rounds: int
    tool_calls: int
    usage: Usage | None
    last_message: Message | None
    pending_steers: int
    metadata: Mapping[str, Any]


def _positive_int(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer or None, got {value!r}")
    return value


@attrs.frozen
class TurnPolicy:
    """A host turn policy: ``stop(context)`` and/or ``max_turns`` (see ``runs/_turn_policy``)."""

    stop: Callable[[TurnPolicyContext], Any] | None = None
    max_turns: int | None = None

    def __attrs_post_init__(self) -> None:
        if self.stop is not None and not callable(self.stop):
            raise TypeError("turn_policy.stop must be callable(context)")
        _positive_int(self.max_turns, "turn_policy.max_turns")


@attrs.frozen(kw_only=True)
class CompactionConfig:
    """Automatic compaction: when to compact (``threshold_entries`` messages in the effective
    history, ``input_ratio`` of ``context_window`` reached by the latest turn's input tokens,
    or a host ``trigger(meter) -> bool``), how much to keep, and the summary ``strategy``."""

    threshold_entries: int | None = None
    input_ratio: float | None = None
    context_window: int | None = None
    trigger: CompactionTrigger | None = attrs.field(default=None, eq=False)
    keep_recent_entries: int = DEFAULT_KEEP_RECENT_ENTRIES
    strategy: CompactionStrategy | None = attrs.field(default=None, eq=False)

    @property
    def automatic(self) -> bool:
        """Whether any trigger is configured."""
        return (
            self.threshold_entries is not None
            or self.input_ratio is not None
            or self.trigger is not None
        )


@attrs.frozen
class ToolResultFold:
    """How aged large tool results are folded (see ``runs/_fold``)."""

    summarize: Callable[[str], Any] = attrs.field(eq=False)
    keep_last: int = DEFAULT_FOLD_KEEP_LAST
    min_bytes: int = DEFAULT_FOLD_MIN_BYTES


@attrs.frozen
class AttentionSettings:
    """A resolved compiler: the input cap in tokens, the trigger ratio and ``keep_last``."""

    max_input_tokens: int
    trigger_ratio: float = DEFAULT_ATTENTION_TRIGGER_RATIO
    keep_last: int = DEFAULT_ATTENTION_KEEP_LAST


@runtime_checkable
class LoopContext(Protocol):
    """What a loop strategy drives."""

    run_id: str
    session_id: str

    def run_turns(self) -> AsyncGenerator[Any, None]:
        """Provider turns (with their tool rounds) until the provider stops calling tools."""
        ...

    @property
    def last_message(self) -> Message | None:
        """The newest assistant message of the run."""
        ...

    async def add_user_message(self, message: Message) -> None:
        """Append a user message to the run's history and the session store."""
        ...


@runtime_checkable
class AgentLoopStrategy(Protocol):
    """A replaceable per-run control loop."""

    name: str
    revision: str

    def run(self, context: LoopContext) -> AsyncIterator[Any]:
        """Drive the run, yielding every event ``context.run_turns()`` yields."""
        ...
