"""``decode_session_entry`` returns and raises exactly what the cattrs converter does."""

from __future__ import annotations

import json
from typing import Any

import pytest

from prism_core import codec
from prism_core._decode import load_json
from prism_core.content import (
    ErrorInfo,
    Message,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolResultContent,
)
from prism_core.models import ModelConfig
from prism_core.records import SessionEntry, create_session_entry, decode_session_entry
from prism_core.records._decode import decode_entry_columns

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


_COLUMN_NAMES = ("id", "session_id", "parent_id", "kind", "run_id", "timestamp")


def _split(data: dict[str, Any]) -> tuple[str, tuple[Any, ...]]:
    """A store's form of ``data``: the payload text and the column values."""
    payload = {k: v for k, v in data.items() if k not in _COLUMN_NAMES}
    return codec.dumps(payload).decode("utf-8"), tuple(data.get(k) for k in _COLUMN_NAMES)


@pytest.mark.parametrize("entry", _entries(), ids=lambda entry: entry.kind)
def test_decoding_columns_and_payload_equals_the_converter(entry: SessionEntry) -> None:
    """An entry stored as columns and a payload decodes to the converter's entry."""
    data = codec.loads(codec.dumps(entry))
    payload, columns = _split(data)
    decoded = decode_entry_columns(payload, *columns)
    expected = codec.structure(data, SessionEntry)
    assert decoded == expected == entry
    assert repr(decoded) == repr(expected)


@pytest.mark.parametrize(
    "data",
    [
        _stored(timestamp=1700000000),
        _stored(extra_key="ignored"),
        _stored(id=7, session_id=None),
        _stored(parent_id=7),
        _stored(run_id=b"r"),
        _stored(message={"role": "user", "content": [{"type": "text", "text": 5}]}),
        _stored(
            message={
                "role": "assistant",
                "content": [{"type": "thinking", "text": "t", "signature": 3}],
            }
        ),
        _stored(
            message={
                "role": "tool",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_call_id": 1,
                        "name": "n",
                        "value": 1,
                        "error": None,
                    }
                ],
            }
        ),
    ],
)
def test_uncommon_columns_and_payloads_decode_like_the_converter(data: dict[str, Any]) -> None:
    """Column values or payloads outside the common shapes get the converter's answer."""
    payload, columns = _split(data)
    expected = codec.structure(dict(data), SessionEntry)
    decoded = decode_entry_columns(payload, *columns)
    assert decoded == expected
    assert repr(decoded) == repr(expected)


def test_a_payload_column_wins_over_nothing_and_a_column_wins_over_the_payload() -> None:
    """A payload key that names a column is overwritten by the column, as a merged dict is."""
    data = _stored()
    payload, columns = _split(data)
    with_id = codec.dumps({**codec.loads(payload), "id": "from-payload"}).decode("utf-8")
    assert decode_entry_columns(with_id, *columns).id == data["id"]


@pytest.mark.parametrize("payload", ["[1, 2]", '"text"', "7", "null"])
def test_a_payload_that_is_not_an_object_fails_like_the_merge(payload: str) -> None:
    """A payload that is JSON but not an object fails as setting the columns on it does."""
    data = json.loads(payload)
    with pytest.raises(TypeError) as expected:
        data["id"] = "x"
    with pytest.raises(TypeError) as raised:
        decode_entry_columns(payload, "x", "s1", None, "message", None, 1.0)
    assert str(raised.value) == str(expected.value)


@pytest.mark.parametrize(
    "text",
    [
        '{"a":1}',
        ' {"a":1}',
        '{"a":1} ',
        '{"a":1}{"b":2}',
        '{"a":1',
        "",
        "\ufeff{}",
        '"\\ud800"',
        "[1,2.5,null,true]",
        '{"a":NaN}',
        b'{"a":1}',
        '{"é":"😀"}',
    ],
)
def test_load_json_is_json_loads(text: str | bytes) -> None:
    """The scanner path returns what ``json.loads`` returns and fails with its error."""
    try:
        expected: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        error: json.JSONDecodeError | None = exc
    else:
        error = None
    if error is not None:
        with pytest.raises(json.JSONDecodeError) as raised:
            load_json(text)
        assert (str(raised.value), raised.value.pos) == (str(error), error.pos)
    else:
        loaded = load_json(text)
        assert loaded == expected
        assert repr(loaded) == repr(expected)


def test_decoded_data_shares_no_container_unless_fresh() -> None:
    """A message decoded from data the caller keeps copies its containers, as the
    constructors do; decoded from data decoded for it (``fresh``), it takes them as they are,
    and both equal the constructors' message."""
    from prism_core._decode import decode_message

    data: dict[str, Any] = {
        "role": "assistant",
        "content": [
            {"type": "tool_call", "id": "c1", "name": "probe", "arguments": {"step": [1]}},
            {
                "type": "tool_result",
                "tool_call_id": "c1",
                "name": "probe",
                "value": {"rows": [1, 2]},
                "error": None,
            },
        ],
    }
    expected = Message(
        "assistant",
        (
            ToolCallContent("c1", "probe", {"step": [1]}),
            ToolResultContent("c1", "probe", {"rows": [1, 2]}),
        ),
    )
    kept = decode_message(data)
    fresh = decode_message(codec.loads(codec.dumps(data)), fresh=True)
    assert kept == fresh == expected
    assert repr(kept) == repr(fresh) == repr(expected)
    data["content"][0]["arguments"]["step"].append(2)
    data["content"][1]["value"]["rows"].append(3)
    assert kept == expected


def test_records_built_slot_by_slot_must_be_the_ones_the_decoder_knows() -> None:
    """The direct decoder builds a record by setting its slots only for a class whose
    fields it names exactly and that has no validator: anything else is refused when the
    module loads, not decoded wrongly."""
    import attrs

    from prism_core._decode import slot_setters

    @attrs.frozen
    class Checked:
        value: int = attrs.field(validator=attrs.validators.instance_of(int))

    @attrs.frozen
    class Plain:
        a: str
        b: str

    @attrs.frozen
    class Converted:
        a: str = attrs.field(converter=str.strip)

    assert len(slot_setters(Plain, ("a", "b"))) == 2
    with pytest.raises(TypeError):
        slot_setters(Plain, ("a",))
    with pytest.raises(TypeError):
        slot_setters(Plain, ("b", "a"))
    with pytest.raises(TypeError):
        slot_setters(Checked, ("value",))
    with pytest.raises(TypeError):
        slot_setters(Converted, ("a",))
    assert len(slot_setters(Converted, ("a",), copied=("a",))) == 1
