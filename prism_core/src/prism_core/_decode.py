"""Direct decoding of messages from JSON data, for the kernel's fast read paths.

Each function takes only data whose every value already has its field's exact JSON type and
raises :class:`Declined` for anything else, so its caller can hand the whole value to the
kernel's cattrs converter instead: results then always equal the converter's, and errors are
always the converter's own. Nothing here builds code at run time.
"""

from __future__ import annotations

from typing import Any

from .content import (
    ContentBlock,
    Message,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolResultContent,
)

__all__ = ("Declined", "decode_message", "optional_text", "text")

_ROLES = frozenset(("system", "user", "assistant", "tool"))


class Declined(Exception):
    """The direct path does not take this data; the converter decides."""


def text(value: Any) -> str:
    """``value`` when it is a ``str``."""
    if type(value) is not str:
        raise Declined
    return value


def optional_text(value: Any) -> str | None:
    """``value`` when it is a ``str`` or ``None``."""
    if value is None or type(value) is str:
        return value
    raise Declined


def decode_message(data: Any) -> Message:
    """A message of text, thinking, tool-call and error-free tool-result blocks."""
    if type(data) is not dict or len(data) != 2:
        raise Declined
    role, content = data.get("role"), data.get("content")
    if role not in _ROLES or type(content) is not list:
        raise Declined
    return Message(role, tuple(_block(block) for block in content))


def _block(data: Any) -> ContentBlock:
    if type(data) is not dict:
        raise Declined
    kind = data.get("type")
    if kind == "text" and len(data) == 2:
        return TextContent(text(data.get("text")))
    if kind == "tool_call" and len(data) == 4:
        arguments = data.get("arguments")
        if type(arguments) is not dict:
            raise Declined
        return ToolCallContent(text(data.get("id")), text(data.get("name")), arguments)
    if kind == "tool_result" and len(data) == 5 and "value" in data:
        if data.get("error") is not None:
            raise Declined
        return ToolResultContent(
            text(data.get("tool_call_id")), text(data.get("name")), data["value"]
        )
    if kind == "thinking" and len(data) == 3:
        return ThinkingContent(text(data.get("text")), optional_text(data.get("signature")))
    raise Declined
