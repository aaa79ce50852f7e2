"""The attention compiler: keeping a long run's provider input under a share of its cap.

``attention_compiler=True`` or ``{"max_input_tokens", "trigger_ratio", "keep_last"}`` on the
agent (the cap defaults to the agent's ``context_window``; the ratio to 0.75, ``keep_last`` to
3). A run may pass ``False`` (off for that run) or a mapping that only relaxes the agent's: a
higher ``trigger_ratio`` or ``keep_last``; a lower one, another cap, or any mapping when the
agent has no compiler is refused. When a turn's estimated input (canonical JSON bytes / 4)
exceeds ``trigger_ratio * cap``, oldest first until it no longer does: thinking is stripped
from assistant turns but the newest one, then tool results outside the newest ``keep_last``
are replaced by stubs, in the provider input only (the stored transcript is untouched). Every
change joins the session's sticky frontier (:class:`~prism_core._attention_frontier
.AttentionFrontier`) and is made again on later turns and runs whatever the ratio. A turn whose
estimate crossed the threshold emits ``attention_compiled`` (``used`` after, ``cap``).

It must not write to the session or the store.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any

import attrs

from .._attention_frontier import AttentionFrontier
from .._run_values import (
    DEFAULT_ATTENTION_KEEP_LAST,
    DEFAULT_ATTENTION_TRIGGER_RATIO,
    AttentionSettings,
)
from ..codec import dumps
from ..content import Message, TextContent, ThinkingContent, ToolResultContent
from ..events import AttentionCompiledEvent

__all__ = (
    "DEFAULT_ATTENTION_KEEP_LAST",
    "DEFAULT_ATTENTION_TRIGGER_RATIO",
    "AttentionSettings",
    "coerce_attention_compiler",
    "compile_attention",
    "resolve_run_attention",
    "thinking_key",
)

#: Assistant turns whose thinking is always kept (the newest).
THINKING_KEEP_TURNS = 1
_KEYS = ("keep_last", "max_input_tokens", "trigger_ratio")
_NO_COMPILER = (
    "attention_compiler: a run may only relax the agent's compiler, and the agent has none"
)


def _fields(value: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(value) - set(_KEYS))
    if unknown:
        raise ValueError(f"unknown attention_compiler keys {unknown}; known: {list(_KEYS)}")
    out: dict[str, Any] = {}
    cap = value.get("max_input_tokens")
    if cap is not None:
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise ValueError(f"attention_compiler.max_input_tokens must be >= 1, got {cap!r}")
        out["max_input_tokens"] = cap
    ratio = value.get("trigger_ratio")
    if ratio is not None:
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 < ratio < 1:
            raise ValueError(f"attention_compiler.trigger_ratio must be in (0, 1), got {ratio!r}")
        out["trigger_ratio"] = float(ratio)
    keep = value.get("keep_last")
    if keep is not None:
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
            raise ValueError(f"attention_compiler.keep_last must be >= 0, got {keep!r}")
        out["keep_last"] = keep
    return out


def coerce_attention_compiler(value: Any, context_window: int | None) -> AttentionSettings | None:
    """The agent's compiler from ``True``, a mapping, ``False`` or ``None``; ``ValueError``
    or ``TypeError`` for anything else, or when no cap can be found."""
    if value is None or value is False:
        return None
    if isinstance(value, AttentionSettings):
        return value
    if value is True:
        fields: dict[str, Any] = {}
    elif isinstance(value, Mapping):
        fields = _fields(value)
    else:
        raise TypeError(
            f"attention_compiler must be True, False or a mapping, got {type(value).__name__}"
        )
    fields.setdefault("max_input_tokens", context_window)
    if fields["max_input_tokens"] is None:
        raise ValueError(
            "attention_compiler needs a cap: give max_input_tokens or the agent's context_window"
        )
    return AttentionSettings(**fields)


def resolve_run_attention(agent: AttentionSettings | None, run: Any) -> AttentionSettings | None:
    """The run's compiler: the agent's, off (``False``), or the agent's relaxed by a mapping;
    ``ValueError``/``TypeError`` for a run that would tighten it or enable one."""
    if run is None or run is True:
        if run is True and agent is None:
            raise ValueError(_NO_COMPILER)
        return agent
    if run is False:
        return None
    if not isinstance(run, Mapping):
        raise TypeError(
            f"attention_compiler per run must be False or a mapping, got {type(run).__name__}"
        )
    if agent is None:
        raise ValueError(_NO_COMPILER)
    fields = _fields(run)
    if fields.get("max_input_tokens", agent.max_input_tokens) != agent.max_input_tokens:
        raise ValueError("attention_compiler.max_input_tokens is the agent's; a run cannot move it")
    if fields.get("trigger_ratio", agent.trigger_ratio) < agent.trigger_ratio:
        raise ValueError(
            f"attention_compiler.trigger_ratio {fields['trigger_ratio']} would tighten the "
            f"agent's {agent.trigger_ratio}; a run may only relax it"
        )
    if fields.get("keep_last", agent.keep_last) < agent.keep_last:
        raise ValueError(
            f"attention_compiler.keep_last {fields['keep_last']} would tighten the agent's "
            f"{agent.keep_last}; a run may only relax it"
        )
    return attrs.evolve(agent, **fields)


def thinking_key(message: Message) -> str:
    """The 32-hex key of an assistant message's thinking (a hash: no text is kept)."""
    text = "\u0001".join(
        f"{block.signature or ''}\u0000{block.text}"
        for block in message.content
        if isinstance(block, ThinkingContent)
    )
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()[:32]


def _tokens(size: int) -> int:
    return math.ceil(size / 4)


def _size(message: Message) -> int:
    return len(dumps(message))


def _stub(block: ToolResultContent, size: int) -> ToolResultContent:
    return ToolResultContent(
        block.tool_call_id,
        block.name,
        value=f"[result of {block.name} omitted to keep the context small: {size} bytes]",
    )


def compile_attention(
    messages: tuple[Message, ...],
    extra_bytes: int,
    settings: AttentionSettings,
    frontier: AttentionFrontier,
    *,
    session_id: str,
    run_id: str,
) -> tuple[tuple[Message, ...], AttentionCompiledEvent | None]:
    """``messages`` as the provider should see them this turn, and the event to emit (only
    when the estimate crossed the threshold). ``extra_bytes``: the rest of the request."""
    sizes = [_size(m) for m in messages]
    before = _tokens(sum(sizes) + extra_bytes)
    threshold = settings.trigger_ratio * settings.max_input_tokens
    gate_open = before > threshold
    if not gate_open and not frontier:
        return messages, None
    out = list(messages)
    used = before
    dropped = stubbed = 0

    def needs_more() -> bool:
        return gate_open and used > threshold

    thinking = [i for i, m in enumerate(out) if m.role == "assistant" and _has_thinking(m)]
    for index in thinking[: max(0, len(thinking) - THINKING_KEEP_TURNS)]:
        message = out[index]
        key = thinking_key(message)
        if not frontier.has_thinking(key) and not needs_more():
            continue
        kept = tuple(b for b in message.content if not isinstance(b, ThinkingContent))
        stripped = attrs.evolve(message, content=kept or (TextContent(""),))
        used -= _tokens(sizes[index]) - _tokens(_size(stripped))
        out[index], sizes[index] = stripped, _size(stripped)
        frontier.add_thinking(key)
        dropped += 1
    rows = [
        (index, position, block)
        for index, message in enumerate(out)
        if message.role == "tool"
        for position, block in enumerate(message.content)
        if isinstance(block, ToolResultContent) and block.error is None
    ]
    for index, position, block in rows[: max(0, len(rows) - settings.keep_last)]:
        sticky = frontier.has_tool_call(block.tool_call_id)
        if not sticky and not needs_more():
            continue
        message = out[index]
        content = list(message.content)
        content[position] = _stub(block, len(dumps(block)))
        changed = attrs.evolve(message, content=tuple(content))
        after = _size(changed)
        if after >= sizes[index] and not sticky:
            continue  # the stub would cost more than what it replaces
        used -= _tokens(sizes[index]) - _tokens(after)
        out[index], sizes[index] = changed, after
        frontier.add_tool_call(block.tool_call_id)
        stubbed += 1
    compiled = tuple(out) if dropped or stubbed else messages
    if not gate_open:
        return compiled, None
    event = AttentionCompiledEvent(
        session_id=session_id,
        run_id=run_id,
        used=max(0, used),
        cap=settings.max_input_tokens,
        used_before=before,
        trigger_ratio=settings.trigger_ratio,
        stubbed_tool_results=stubbed,
        dropped_thinking_turns=dropped,
    )
    return compiled, event


def _has_thinking(message: Message) -> bool:
    return any(isinstance(block, ThinkingContent) for block in message.content)
