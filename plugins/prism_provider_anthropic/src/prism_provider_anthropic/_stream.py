"""Decoding the Messages-API event stream into Prism provider events."""

from __future__ import annotations

import json
from typing import Any

import attrs

from prism_core import (
    ErrorInfo,
    ProviderEvent,
    Usage,
    provider_done,
    provider_error,
    provider_text_delta,
    provider_thinking_delta,
    provider_tool_call_delta,
)
from prism_core.provider_errors import PROVIDER_STREAM

__all__ = ("FINISH_REASONS", "StreamDecoder")

#: Anthropic ``stop_reason`` → Prism finish reason; unknown values pass through unchanged.
FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
    "pause_turn": "pause",
}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@attrs.define
class _Block:
    kind: str
    tool_input: Any = None
    saw_json: bool = False


@attrs.define
class StreamDecoder:
    """Feeds on SDK stream events (``message_start`` … ``message_stop``), one at a time.

    Text and thinking stream as deltas; a ``tool_use`` block becomes tool-call fragments keyed
    by its content-block index (the id and name first, then each ``input_json_delta``), which
    Prism's assembler joins and parses; the output tool's input (typed output, see
    ``_output``) streams as text instead. Usage is counted Prism's way: ``input_tokens`` is the
    whole prompt (uncached + cache reads + cache writes), as the context meter expects.
    """

    #: The output tool's name (see ``_output``): its input streams as the answer's text.
    output_tool: str | None = None
    blocks: dict[int, _Block] = attrs.field(factory=dict)
    #: Whether the model called a tool other than the output tool.
    other_tools: bool = False
    input_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output_tokens: int = 0
    stop_reason: str | None = None
    finished: bool = False

    def usage(self) -> Usage:
        """The usage seen so far."""
        prompt = self.input_tokens + self.cache_read + self.cache_write
        return Usage(
            input_tokens=prompt,
            output_tokens=self.output_tokens,
            total_tokens=prompt + self.output_tokens,
            cache_read_tokens=self.cache_read,
            cache_write_tokens=self.cache_write,
        )

    def _take_usage(self, usage: Any) -> None:
        if usage is None:
            return
        # message_delta usage is cumulative; fields it leaves out keep message_start's values.
        for field, attr in (
            ("input_tokens", "input_tokens"),
            ("cache_read_input_tokens", "cache_read"),
            ("cache_creation_input_tokens", "cache_write"),
            ("output_tokens", "output_tokens"),
        ):
            value = _int(getattr(usage, field, None))
            if value is not None:
                setattr(self, attr, value)

    def feed(self, event: Any) -> list[ProviderEvent]:
        """The Prism events for one SDK stream event (often none)."""
        kind = getattr(event, "type", None)
        if kind == "message_start":
            self._take_usage(getattr(event.message, "usage", None))
            return []
        if kind == "content_block_start":
            return self._start(event.index, event.content_block)
        if kind == "content_block_delta":
            return self._delta(event.index, event.delta)
        if kind == "content_block_stop":
            return self._stop(event.index)
        if kind == "message_delta":
            self.stop_reason = getattr(event.delta, "stop_reason", None) or self.stop_reason
            self._take_usage(getattr(event, "usage", None))
            return []
        if kind == "message_stop":
            self.finished = True
            reason = self.stop_reason
            if reason == "tool_use" and not self.other_tools:
                # The answer came as the output tool's input: the turn ended with an answer.
                reason = "end_turn"
            return [
                provider_done(
                    self.usage(),
                    finish_reason=FINISH_REASONS.get(reason, reason) if reason else None,
                )
            ]
        return []

    def _start(self, index: int, block: Any) -> list[ProviderEvent]:
        kind = str(getattr(block, "type", ""))
        self.blocks[index] = _Block(kind, getattr(block, "input", None))
        initial_text: str | None = getattr(block, "text", None)
        if kind == "text" and initial_text:
            return [provider_text_delta(initial_text)]
        if kind == "thinking":
            text: str = getattr(block, "thinking", "") or ""
            signature: str | None = getattr(block, "signature", None) or None
            if text or signature:
                return [provider_thinking_delta(text, signature)]
        if kind == "tool_use" and self.output_tool is not None and block.name == self.output_tool:
            self.blocks[index] = _Block("output", getattr(block, "input", None))
            return []
        if kind == "tool_use":
            self.other_tools = True
            return [provider_tool_call_delta(index, id=block.id, name=block.name)]
        return []

    def _delta(self, index: int, delta: Any) -> list[ProviderEvent]:
        kind = getattr(delta, "type", None)
        block = self.blocks.get(index)
        if kind == "text_delta" and delta.text:
            return [provider_text_delta(delta.text)]
        if kind == "thinking_delta" and delta.thinking:
            return [provider_thinking_delta(delta.thinking)]
        if kind == "signature_delta" and delta.signature:
            return [provider_thinking_delta("", delta.signature)]
        if kind == "input_json_delta" and block is not None and block.kind == "output":
            block.saw_json = True
            if delta.partial_json:
                return [provider_text_delta(delta.partial_json)]
        if kind == "input_json_delta" and block is not None and block.kind == "tool_use":
            block.saw_json = True
            if delta.partial_json:
                return [provider_tool_call_delta(index, arguments_text=delta.partial_json)]
        return []

    def _stop(self, index: int) -> list[ProviderEvent]:
        block = self.blocks.get(index)
        if block is not None and block.kind == "output" and not block.saw_json:
            return [provider_text_delta(json.dumps(block.tool_input or {}))]
        if block is None or block.kind != "tool_use" or block.saw_json:
            return []
        # A tool_use block that arrived whole (no input_json_delta) carries its input here.
        if block.tool_input:
            return [provider_tool_call_delta(index, arguments_text=json.dumps(block.tool_input))]
        return []

    def truncated(self) -> ProviderEvent:
        """The error for a stream that ended without ``message_stop`` (a dropped connection)."""
        return provider_error(
            ErrorInfo(
                "The Anthropic stream ended before message_stop (the connection was cut)",
                code=PROVIDER_STREAM,
                retryable=True,
            )
        )
