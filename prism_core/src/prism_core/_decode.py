"""Direct decoding of messages from JSON data, for the kernel's fast read paths.

Each function takes only data whose every value already has its field's exact JSON type and
raises :class:`Declined` for anything else, so its caller can hand the whole value to the
kernel's cattrs converter instead: results then always equal the converter's, and errors are
always the converter's own. Nothing here builds code at run time.

The records are built without their ``__init__``: each field's slot is set directly
(:func:`slot_setters`), which is what the generated ``__init__`` does, minus its call and
converters. A converter only copies containers (``_freeze``, ``tuple``), so a value built
here is equal to the constructor's; containers are taken as they are only from data the
caller decoded itself (``fresh``), which nothing else holds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs

from .content import (
    ContentBlock,
    Message,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolResultContent,
)

__all__ = (
    "Declined",
    "decode_message",
    "load_json",
    "new_record",
    "optional_text",
    "slot_setters",
    "text",
)

_ROLES = frozenset(("system", "user", "assistant", "tool"))
# The scanner ``json.loads`` runs for a ``str`` (the default decoder's settings); the stubs
# do not declare the attribute the decoder sets in its ``__init__``.
_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
#: ``object.__new__``: an instance whose slots are then set one by one.
new_record = object.__new__
_Setter = Callable[[Any, Any], None]


class Declined(Exception):
    """The direct path does not take this data; the converter decides."""


def slot_setters(
    cls: type[Any], names: tuple[str, ...], copied: tuple[str, ...] = ()
) -> tuple[_Setter, ...]:
    """The setter of each slot of the attrs class ``cls``, for its fields ``names`` in order.

    Raises ``TypeError`` unless ``names`` are exactly the class's fields, each a slot with no
    validator, none but the ``copied`` ones with a converter (the caller knows those only
    copy their value), and the class has no ``__attrs_post_init__``: a record built by
    setting its slots is then the one its ``__init__`` builds.
    """
    fields = attrs.fields(cls)
    if (
        tuple(field.name for field in fields) != names
        or any(field.validator is not None for field in fields)
        or any(field.converter is not None and field.name not in copied for field in fields)
        or hasattr(cls, "__attrs_post_init__")
        or not all(type(cls.__dict__.get(name)).__name__ == "member_descriptor" for name in names)
    ):
        raise TypeError(f"{cls.__name__} is not the record the direct decoder builds")
    return tuple(cls.__dict__[name].__set__ for name in names)


_set_text, _set_text_type = slot_setters(TextContent, ("text", "type"))
_set_thought, _set_signature, _set_thinking_type = slot_setters(
    ThinkingContent, ("text", "signature", "type")
)
_set_call_id, _set_call_name, _set_arguments, _set_call_type = slot_setters(
    ToolCallContent, ("id", "name", "arguments", "type"), copied=("arguments",)
)
_set_result_id, _set_result_name, _set_value, _set_error, _set_result_type = slot_setters(
    ToolResultContent, ("tool_call_id", "name", "value", "error", "type"), copied=("value",)
)
_set_role, _set_content = slot_setters(Message, ("role", "content"), copied=("content",))
_PLAIN = frozenset((str, int, float, bool, type(None)))


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


def decode_message(data: Any, *, fresh: bool = False) -> Message:
    """A message of text, thinking, tool-call and error-free tool-result blocks.

    ``fresh``: ``data`` was just decoded by the caller and nothing else holds it, so the
    containers in it (tool arguments, a tool result's value) become the blocks' own without
    the copy a constructor makes."""
    if type(data) is not dict or len(data) != 2:
        raise Declined
    role, content = data.get("role"), data.get("content")
    if role not in _ROLES or type(content) is not list:
        raise Declined
    # Most stored messages hold one block: no list to build and copy for those.
    if len(content) == 1:
        blocks: tuple[ContentBlock, ...] = (_block(content[0], fresh),)
    else:
        blocks = tuple([_block(block, fresh) for block in content])
    message = new_record(Message)
    _set_role(message, role)
    _set_content(message, blocks)
    return message


def _block(data: Any, fresh: bool) -> ContentBlock:
    # The checks of ``text``/``optional_text`` inlined: this runs once per stored block.
    if type(data) is not dict:
        raise Declined
    kind = data.get("type")
    size = len(data)
    if kind == "tool_result" and size == 5 and "value" in data:
        call_id, name, value = data.get("tool_call_id"), data.get("name"), data["value"]
        if type(call_id) is not str or type(name) is not str or data.get("error") is not None:
            raise Declined
        if not fresh and type(value) not in _PLAIN:
            return ToolResultContent(call_id, name, value)
        result: ToolResultContent = new_record(ToolResultContent)
        _set_result_id(result, call_id)
        _set_result_name(result, name)
        _set_value(result, value)
        _set_error(result, None)
        _set_result_type(result, "tool_result")
        return result
    if kind == "tool_call" and size == 4:
        call_id, name, arguments = data.get("id"), data.get("name"), data.get("arguments")
        if type(call_id) is not str or type(name) is not str or type(arguments) is not dict:
            raise Declined
        if not fresh:
            return ToolCallContent(call_id, name, arguments)
        call: ToolCallContent = new_record(ToolCallContent)
        _set_call_id(call, call_id)
        _set_call_name(call, name)
        _set_arguments(call, arguments)
        _set_call_type(call, "tool_call")
        return call
    if kind == "text" and size == 2:
        value = data.get("text")
        if type(value) is not str:
            raise Declined
        text_block: TextContent = new_record(TextContent)
        _set_text(text_block, value)
        _set_text_type(text_block, "text")
        return text_block
    if kind == "thinking" and size == 3:
        value, signature = data.get("text"), data.get("signature")
        if type(value) is not str or (signature is not None and type(signature) is not str):
            raise Declined
        thought: ThinkingContent = new_record(ThinkingContent)
        _set_thought(thought, value)
        _set_signature(thought, signature)
        _set_thinking_type(thought, "thinking")
        return thought
    raise Declined
