"""Message contents in the GenAI conventions' JSON shape (recorded only when opted in)."""

from __future__ import annotations

from typing import Any

from prism_core import Message, TextContent, ThinkingContent, ToolCallContent
from prism_core.codec import dumps

__all__ = ("output_messages",)


def output_messages(message: Message, finish_reason: str) -> str:
    """``gen_ai.output.messages``: one assistant message with its parts, as JSON."""
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            parts.append({"type": "text", "content": block.text})
        elif isinstance(block, ThinkingContent):
            parts.append({"type": "reasoning", "content": block.text})
        elif isinstance(block, ToolCallContent):
            parts.append(
                {
                    "type": "tool_call",
                    "id": block.id,
                    "name": block.name,
                    "arguments": block.arguments,
                }
            )
    record = {"role": message.role, "parts": parts, "finish_reason": finish_reason}
    return dumps([record]).decode("utf-8")
