"""``decode_session_entry`` returns and raises exactly what the cattrs converter does."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import codec
from prism_core.content import (
    ErrorInfo,
    Message,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolResultContent,
)
from prism_core.models import ModelConfig
from prism_core.sessions import SessionEntry, create_session_entry, decode_session_entry

TRICKY = 'quote " backslash \\ nul \x00 é ✓ 😀 \u2028'


def _entries() -> list[SessionEntry]:
    payloads: list[dict[str, Any]] = [
        {"kind": "message", "message": Message.user("hello")},
        {"kind": "message", "message": Message("system", (TextContent(TRICKY),))},
        {
            "kind": "message",
            "run_id": "run-1",
            "message": Message(
                "assistant",
                (
                    ThinkingContent("think", signature="sig"),
                    ThinkingContent(TRICKY),
                    TextContent("calling"),
                    ToolCallContent("c1", "probe", {"step": 3, "nested": {"a": [1, 2.5, None]}}),
                    ToolCallContent("c2", "noop"),
                ),
            ),
        },
        {
            "kind": "message",
            "run_id": "run-1",
            "message": Message(
                "tool",
                (
                    ToolResultContent("c1", "probe", "log line\n" * 50),
                    ToolResultContent("c2", "noop", None),
                    ToolResultContent("c3", "count", {"n": [1, {"k": True}], "f": 0.5}),
                    ToolResultContent(
                        "c4", "fail", None, ErrorInfo("boom", code="E", retryable=True)
                    ),
                    ToolResultContent("c5", "empty", ""),
                ),
            ),
        },
        {"kind": "message", "message": Message("assistant", ())},
        {"kind": "model_change", "model": ModelConfig("mock", "demo-2")},
        {"kind": "label", "label": "A"},
        {"kind": "summary", "summary": "so far"},
        {"kind": "metadata", "data": {"title": "t", "pinned": True}},
        {"kind": "event", "data": {"type": "x", "list": [1, "2"]}},
        {"kind": "custom", "data": None},
        {"kind": "custom", "data": [1, 2, 3]},
    ]
    entries = [
        create_session_entry(session_id="s1", parent_id="entry_parent", **payload)
        for payload in payloads
    ]
    entries.append(
        create_session_entry(
            session_id="s1",
            kind="compaction",
            summary="compacted",
            first_kept_entry_id="entry_kept",
            run_id="run-1",
        )
    )
    return entries


@pytest.mark.parametrize("entry", _entries(), ids=lambda entry: entry.kind)
def test_decoding_a_stored_entry_equals_the_converter(entry: SessionEntry) -> None:
    """The JSON form of every kind and block type decodes to an equal entry, with the same
    field types (tuples, dicts, floats) as the converter's result."""
    data = codec.loads(codec.dumps(entry))
    expected = codec.structure(codec.loads(codec.dumps(entry)), SessionEntry)
    decoded = decode_session_entry(data)
    assert decoded == expected == entry
    assert repr(decoded) == repr(expected)
    assert type(decoded.message.content if decoded.message else ()) is tuple


def _stored(**changes: Any) -> dict[str, Any]:
    entry = create_session_entry(
        session_id="s1",
        kind="message",
        run_id="r",
        message=Message(
            "assistant", (TextContent("t"), ToolCallContent("c1", "probe", {"step": 1}))
        ),
    )
    data: dict[str, Any] = codec.loads(codec.dumps(entry))
    data.update(changes)
    return data


@pytest.mark.parametrize(
    "data",
    [
        _stored(timestamp=1700000000),  # an int the converter turns into a float
        _stored(extra_key="ignored"),
        _stored(id=7, session_id=None),  # values the converter coerces or lets through
        _stored(parent_id=None, run_id=None),
        {
            k: v
            for k, v in _stored().items()
            if k not in ("summary", "label", "data", "model", "first_kept_entry_id")
        },
        _stored(message={"role": "user", "content": [{"type": "text", "text": "x", "more": 1}]}),
        _stored(message={"role": "user", "content": [{"type": "text", "text": 5}]}),
        _stored(
            message={
                "role": "tool",
                "content": [{"type": "tool_result", "name": "n", "tool_call_id": "c"}],
            }
        ),
        _stored(message={"role": "user", "content": ({"type": "text", "text": "tuple"},)}),
    ],
)
def test_uncommon_shapes_decode_like_the_converter(data: dict[str, Any]) -> None:
    """Data outside the common shapes (coercions, defaults, extra keys) gets the converter's
    own answer."""
    expected = codec.structure(dict(data), SessionEntry)
    decoded = decode_session_entry(data)
    assert decoded == expected
    assert repr(decoded) == repr(expected)


def _failure(data: Any) -> tuple[type[BaseException], str]:
    try:
        codec.structure(data, SessionEntry)
    except Exception as exc:  # the converter's own error is the reference
        return type(exc), str(exc)
    raise AssertionError("the converter accepted malformed data")


@pytest.mark.parametrize(
    "data",
    [
        _stored(kind="nonsense"),
        _stored(message="text"),
        _stored(message={"role": "robot", "content": []}),
        _stored(message={"role": "user", "content": [{"type": "video"}]}),
        _stored(message={"role": "user", "content": ["not a block"]}),
        {"id": "x"},
    ],
)
def test_malformed_data_fails_like_the_converter(data: dict[str, Any]) -> None:
    """Malformed data raises the converter's error, with its message."""
    kind, message = _failure(dict(data))
    with pytest.raises(kind) as raised:
        decode_session_entry(data)
    assert str(raised.value) == message
