"""Direct decoding of messages from JSON data, for the kernel's fast read paths.

Each function takes only data whose every value already has its field's exact JSON type and
raises :class:`Declined` for anything else, so its caller can hand the whole value to the
kernel's cattrs converter instead: results then always equal the converter's, and errors are
always the converter's own. Nothing here builds code at run time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .content import (
    ContentBlock,
    Message,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolResultContent,
)

__all__ = ("Declined", "decode_message", "load_json", "optional_text", "text")

_ROLES = frozenset(("system", "user", "assistant", "tool"))
# The scanner ``json.loads`` runs for a ``str`` (the default decoder's settings); the stubs
# do not declare the attribute the decoder sets in its ``__init__``.
_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


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


def load_json(data: Any) -> Any:
    """``json.loads(data)``, with the same result and errors, reading a ``str`` that is one
    JSON value and nothing else (what :func:`~prism_core.codec.dumps` writes) straight
    through the decoder's scanner; anything else (bytes, surrounding whitespace, extra data,
    no value) goes through ``json.loads`` itself."""
    if type(data) is str:
        try:
            value, end = _scan(data, 0)
        except StopIteration:
            pass
        else:
            if end == len(data):
                return value
    return json.loads(data)


def decode_message(data: Any) -> Message:
    """A message of text, thinking, tool-call and error-free tool-result blocks."""
    if type(data) is not dict or len(data) != 2:
        raise Declined
    role, content = data.get("role"), data.get("content")
    if role not in _ROLES or type(content) is not list:
        raise Declined
    return Message(role, tuple([_block(block) for block in content]))


def _block(data: Any) -> ContentBlock:
    # The checks of ``text``/``optional_text`` inlined: this runs once per stored block.
    if type(data) is not dict:
        raise Declined
    kind = data.get("type")
    size = len(data)
    if kind == "tool_result" and size == 5 and "value" in data:
        call_id, name = data.get("tool_call_id"), data.get("name")
        if type(call_id) is not str or type(name) is not str or data.get("error") is not None:
            raise Declined
        return ToolResultContent(call_id, name, data["value"])
    if kind == "tool_call" and size == 4:
        call_id, name, arguments = data.get("id"), data.get("name"), data.get("arguments")
        if type(call_id) is not str or type(name) is not str or type(arguments) is not dict:
            raise Declined
        return ToolCallContent(call_id, name, arguments)
    if kind == "text" and size == 2:
        value = data.get("text")
        if type(value) is not str:
            raise Declined
        return TextContent(value)
    if kind == "thinking" and size == 3:
        value, signature = data.get("text"), data.get("signature")
        if type(value) is not str or (signature is not None and type(signature) is not str):
            raise Declined
        return ThinkingContent(value, signature)
    raise Declined
