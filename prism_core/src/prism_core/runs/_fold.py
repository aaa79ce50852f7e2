"""Folding aged, large tool results in the provider input (``tool_result_fold``).

``tool_result_fold={"summarize": fn, "keep_last"?: int, "min_bytes"?: int}`` on the agent or a
run (the run's wins; ``False`` on a run turns the agent's off; without ``summarize`` it is
off). Each turn, a tool result older than the newest ``keep_last`` tool turns (default 2) whose
text is larger than ``min_bytes`` (default 8192) UTF-8 bytes reaches the provider as
``summarize(text)``'s answer (sync, in a worker thread, or async), a string. A call's summary is
made once per run and reused. The stored transcript keeps every result whole: only the request
changes. A summarizer that raises, or answers something that is not a string, fails the run
closed (``ERR_PRISM_TOOL_RESULT_FOLD``).

It must not write to the session or the store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, overload

import anyio
import attrs

from .._run_values import DEFAULT_FOLD_KEEP_LAST, DEFAULT_FOLD_MIN_BYTES, ToolResultFold
from .._threads import call_host
from ..codec import dumps
from ..content import ErrorInfo, Message, ToolResultContent
from ._failures import RunFailure

__all__ = (
    "DEFAULT_FOLD_KEEP_LAST",
    "DEFAULT_FOLD_MIN_BYTES",
    "ToolResultFold",
    "coerce_tool_result_fold",
    "fold_tool_results",
    "result_text",
)

_KEYS = ("keep_last", "min_bytes", "summarize")


def _count(value: Any, name: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"tool_result_fold.{name} must be a non-negative integer, got {value!r}")
    return value


@overload
def coerce_tool_result_fold(
    value: Any, *, for_run: Literal[False] = False
) -> ToolResultFold | None: ...


@overload
def coerce_tool_result_fold(value: Any, *, for_run: bool) -> ToolResultFold | bool | None: ...


def coerce_tool_result_fold(value: Any, *, for_run: bool = False) -> ToolResultFold | bool | None:
    """A :class:`ToolResultFold`, ``None`` (off: no ``summarize``) or, for a run, ``False``
    (off for this run: ``False``, or a mapping without ``summarize``). Anything malformed
    raises ``TypeError``/``ValueError``."""
    if value is None or isinstance(value, ToolResultFold):
        return value
    if value is False and for_run:
        return False
    if not isinstance(value, Mapping):
        allowed = "a mapping, False or None" if for_run else "a mapping or None"
        raise TypeError(f"tool_result_fold must be {allowed}, got {type(value).__name__}")
    unknown = sorted(set(value) - set(_KEYS))
    if unknown:
        raise ValueError(f"unknown tool_result_fold keys {unknown}; known: {list(_KEYS)}")
    summarize = value.get("summarize")
    keep_last = _count(value.get("keep_last"), "keep_last", DEFAULT_FOLD_KEEP_LAST)
    min_bytes = _count(value.get("min_bytes"), "min_bytes", DEFAULT_FOLD_MIN_BYTES)
    if summarize is None:
        # Off without a summarizer; a run's own mapping wins over the agent's even so.
        return False if for_run else None
    if not callable(summarize):
        raise TypeError("tool_result_fold.summarize must be callable(text) -> str")
    return ToolResultFold(summarize, keep_last, min_bytes)


def result_text(block: ToolResultContent) -> str:
    """The text a result is measured and summarized by: its error's message, a string value as
    it is, any other value as canonical JSON."""
    if block.error is not None:
        return block.error.message
    if isinstance(block.value, str):
        return block.value
    return dumps(block.value).decode("utf-8")


def _aged_calls(messages: Sequence[Message], keep_last: int) -> set[str]:
    """The call ids of tool turns older than the newest ``keep_last``."""
    turns = [
        {call.id for call in m.tool_calls}
        for m in messages
        if m.role == "assistant" and m.tool_calls
    ]
    aged = turns[: max(0, len(turns) - keep_last)]
    return set().union(*aged) if aged else set()


async def fold_tool_results(
    messages: tuple[Message, ...],
    fold: ToolResultFold,
    summaries: dict[str, str],
    limiter: anyio.CapacityLimiter | None = None,
) -> tuple[Message, ...]:
    """``messages`` with every aged, large tool result replaced by its summary (``summaries``
    caches them by call id); the same tuple when nothing folds."""
    aged = _aged_calls(messages, fold.keep_last)
    if not aged:
        return messages
    out: list[Message] = []
    changed = False
    for message in messages:
        if message.role != "tool":
            out.append(message)
            continue
        content: list[Any] = []
        for block in message.content:
            if isinstance(block, ToolResultContent) and block.tool_call_id in aged:
                text = result_text(block)
                if len(text.encode("utf-8")) > fold.min_bytes:
                    summary = await _summary(block, text, fold, summaries, limiter)
                    block = ToolResultContent(block.tool_call_id, block.name, value=summary)
                    changed = True
            content.append(block)
        out.append(attrs.evolve(message, content=tuple(content)))
    return tuple(out) if changed else messages


async def _summary(
    block: ToolResultContent,
    text: str,
    fold: ToolResultFold,
    summaries: dict[str, str],
    limiter: anyio.CapacityLimiter | None,
) -> str:
    cached = summaries.get(block.tool_call_id)
    if cached is not None:
        return cached
    try:
        summary = await call_host(fold.summarize, text, limiter=limiter)
    except Exception as exc:
        raise RunFailure(
            ErrorInfo(
                f"tool_result_fold.summarize raised {type(exc).__name__} for the result of "
                f"{block.name} ({block.tool_call_id})",
                code="ERR_PRISM_TOOL_RESULT_FOLD",
            ),
            cause=exc,
        ) from exc
    if not isinstance(summary, str):
        raise RunFailure(
            ErrorInfo(
                f"tool_result_fold.summarize must answer a string, got {type(summary).__name__}",
                code="ERR_PRISM_TOOL_RESULT_FOLD",
            )
        )
    summaries[block.tool_call_id] = summary
    return summary
