"""Decoding stored session entries: a direct path for the common shapes, cattrs for the rest.

:func:`decode_session_entry` returns exactly what ``codec.structure(data, SessionEntry)``
returns, and raises what it raises. The direct path takes only data whose every value already
has its field's exact JSON type (a message of text, thinking, tool-call and tool-result
blocks); anything else (a model change, an error result, a value cattrs would coerce or
refuse) goes through the kernel's converter, so results and errors stay those of cattrs.
It builds no code at run time, so the first read in a new process costs no code generation.
"""

from __future__ import annotations

from typing import Any

from ..codec import structure
from ..content import (
    ContentBlock,
    Message,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolResultContent,
)
from ._entries import ENTRY_KINDS, SessionEntry

__all__ = ("decode_session_entry",)

_ROLES = frozenset(("system", "user", "assistant", "tool"))
_KINDS = frozenset(ENTRY_KINDS)
_ENTRY_KEYS = frozenset(
    (
        "id",
        "session_id",
        "kind",
        "parent_id",
        "timestamp",
        "run_id",
        "message",
        "summary",
        "first_kept_entry_id",
        "model",
        "label",
        "data",
    )
)


class _Declined(Exception):
    """The direct path does not take this data; cattrs decides."""


def decode_session_entry(data: Any) -> SessionEntry:
    """A :class:`~prism_core.sessions.SessionEntry` from its JSON data (a decoded stored
    entry), equal to the kernel converter's result, and failing like it on malformed data."""
    try:
        return _entry(data)
    except _Declined:
        return structure(data, SessionEntry)


def _text(value: Any) -> str:
    if type(value) is not str:
        raise _Declined
    return value


def _optional_text(value: Any) -> str | None:
    if value is None or type(value) is str:
        return value
    raise _Declined


def _entry(data: Any) -> SessionEntry:
    if type(data) is not dict or not _ENTRY_KEYS.issuperset(data):
        raise _Declined
    get = data.get
    kind = get("kind")
    timestamp = get("timestamp")
    if kind not in _KINDS or get("model") is not None or type(timestamp) is not float:
        raise _Declined
    message = get("message")
    return SessionEntry(
        id=_text(get("id")),
        session_id=_text(get("session_id")),
        kind=kind,
        parent_id=_optional_text(get("parent_id")),
        timestamp=timestamp,
        run_id=_optional_text(get("run_id")),
        message=None if message is None else _message(message),
        summary=_optional_text(get("summary")),
        first_kept_entry_id=_optional_text(get("first_kept_entry_id")),
        label=_optional_text(get("label")),
        data=get("data"),
    )


def _message(data: Any) -> Message:
    if type(data) is not dict or len(data) != 2:
        raise _Declined
    role, content = data.get("role"), data.get("content")
    if role not in _ROLES or type(content) is not list:
        raise _Declined
    return Message(role, tuple(_block(block) for block in content))


def _block(data: Any) -> ContentBlock:
    if type(data) is not dict:
        raise _Declined
    kind = data.get("type")
    if kind == "text" and len(data) == 2:
        return TextContent(_text(data.get("text")))
    if kind == "tool_call" and len(data) == 4:
        arguments = data.get("arguments")
        if type(arguments) is not dict:
            raise _Declined
        return ToolCallContent(_text(data.get("id")), _text(data.get("name")), arguments)
    if kind == "tool_result" and len(data) == 5 and "value" in data:
        if data.get("error") is not None:
            raise _Declined
        return ToolResultContent(
            _text(data.get("tool_call_id")), _text(data.get("name")), data["value"]
        )
    if kind == "thinking" and len(data) == 3:
        return ThinkingContent(_text(data.get("text")), _optional_text(data.get("signature")))
    raise _Declined
