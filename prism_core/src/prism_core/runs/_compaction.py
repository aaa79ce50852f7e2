"""Compaction: replacing the older part of a branch with one summary entry.

It owns coercing the compaction configuration (the value, ``CompactionConfig``, lives in
``prism_core._run_values``), the strategy contract and the kept window; it must not append
entries (``_compact`` does).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .._run_values import (
    DEFAULT_KEEP_RECENT_ENTRIES,
    CompactionConfig,
    CompactionStrategy,
)
from ..content import message_text
from ..errors import PrismError
from ..records._entries import SessionEntry
from ..signals import AbortSignal
from ._options import InvalidOptionsError

__all__ = (
    "DEFAULT_KEEP_RECENT_ENTRIES",
    "CompactionConfig",
    "CompactionContext",
    "CompactionResult",
    "CompactionStrategy",
    "coerce_compaction",
    "digest_summary",
    "kept_window_start",
)

#: Each message in the default digest is shortened to this many characters, marked with "…".
DIGEST_MESSAGE_CHARS = 200


@attrs.frozen(kw_only=True)
class CompactionContext:
    """What a compaction strategy sees: the branch and what will be kept verbatim."""

    session_id: str
    run_id: str | None
    entries: tuple[SessionEntry, ...]
    compacted: tuple[SessionEntry, ...]
    kept: tuple[SessionEntry, ...]
    signal: AbortSignal | None = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen(kw_only=True)
class CompactionResult:
    """What compaction produced: the ``summary``, the first entry kept verbatim, and (after the
    append) the compaction ``entry_id``."""

    summary: str
    first_kept_entry_id: str | None = None
    compacted_entries: int = 0
    entry_id: str | None = None
    data: Any = None


def coerce_compaction(value: Any) -> CompactionConfig | None:
    """Accept ``None``/``False`` (off), a :class:`CompactionConfig`, or a mapping of its fields."""
    if value is None or value is False:
        return None
    if isinstance(value, CompactionConfig):
        return value
    if not isinstance(value, Mapping):
        raise InvalidOptionsError(f"compaction must be a mapping or False, got {value!r}")
    known = {f.name for f in attrs.fields(CompactionConfig)}
    unknown = sorted(set(value) - known)
    if unknown:
        raise InvalidOptionsError(f"unknown compaction keys {unknown}; known: {sorted(known)}")
    config = CompactionConfig(**value)
    for name in ("threshold_entries", "context_window"):
        number = getattr(config, name)
        if number is not None and (
            isinstance(number, bool) or not isinstance(number, int) or number < 1
        ):
            raise InvalidOptionsError(f"compaction.{name} must be a positive integer")
    keep = config.keep_recent_entries
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
        raise InvalidOptionsError("compaction.keep_recent_entries must be an integer >= 0")
    ratio = config.input_ratio
    if ratio is not None:
        if not isinstance(ratio, int | float) or not 0 < ratio <= 1:
            raise InvalidOptionsError("compaction.input_ratio must be in (0, 1]")
        if config.context_window is None:
            raise InvalidOptionsError("compaction.input_ratio needs compaction.context_window")
    for name in ("trigger", "strategy"):
        if getattr(config, name) is not None and not callable(getattr(config, name)):
            raise InvalidOptionsError(f"compaction.{name} must be callable")
    return config


def kept_window_start(path: Sequence[SessionEntry], keep_recent: int) -> int:
    """Index of the first entry kept verbatim.

    The window never starts on a tool result, whose tool call would otherwise be summarised
    away and leave the provider an orphan result.
    """
    start = max(0, len(path) - keep_recent)
    while 0 < start < len(path):
        message = path[start].message
        if message is None or message.role != "tool":
            break
        start -= 1
    return start


def digest_summary(context: CompactionContext) -> str:
    """The default strategy: one line per compacted message, each shortened to
    :data:`DIGEST_MESSAGE_CHARS` characters with a visible "…" when cut."""
    lines: list[str] = []
    for entry in context.compacted:
        if entry.kind == "compaction" and entry.summary:
            lines.append(entry.summary)
            continue
        if entry.message is None:
            continue
        text = message_text(entry.message)
        if not text:
            calls = ", ".join(c.name for c in entry.message.tool_calls)
            text = f"called {calls}" if calls else f"[{entry.message.role} content]"
        if len(text) > DIGEST_MESSAGE_CHARS:
            text = text[:DIGEST_MESSAGE_CHARS] + "…"
        lines.append(f"{entry.message.role}: {text}")
    return "\n".join(lines)


async def run_strategy(
    strategy: CompactionStrategy | None, context: CompactionContext
) -> CompactionResult:
    """Run ``strategy`` (or the digest) and normalise what it returns."""
    first_kept = context.kept[0].id if context.kept else None
    if strategy is None:
        return CompactionResult(
            summary=digest_summary(context),
            first_kept_entry_id=first_kept,
            compacted_entries=len(context.compacted),
        )
    outcome = strategy(context)
    if inspect.isawaitable(outcome):
        outcome = await outcome
    if isinstance(outcome, str):
        return CompactionResult(
            summary=outcome,
            first_kept_entry_id=first_kept,
            compacted_entries=len(context.compacted),
        )
    if isinstance(outcome, CompactionResult):
        return outcome
    raise PrismError(
        f"compaction strategy returned {type(outcome).__name__}; return a str or CompactionResult",
        code="ERR_PRISM_COMPACTION",
    )
