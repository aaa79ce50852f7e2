"""Decoding stored session entries: a direct path for the common shapes, cattrs for the rest.

:func:`decode_session_entry` returns exactly what ``codec.structure(data, SessionEntry)``
returns, and raises what it raises. The direct path takes only data whose every value already
has its field's exact JSON type (a message of text, thinking, tool-call and tool-result
blocks); anything else (a model change, an error result, a value cattrs would coerce or
refuse) goes through the kernel's converter, so results and errors stay those of cattrs.
It builds no code at run time, so the first read in a new process costs no code generation.

It decodes only; it must not read or write a store.
"""

from __future__ import annotations

from typing import Any

from .._decode import Declined, decode_message, load_json, new_record, optional_text, slot_setters
from ..codec import structure
from ._entries import ENTRY_KINDS, SessionEntry

__all__ = ("decode_entry_columns", "decode_session_entry")

_KINDS = frozenset(ENTRY_KINDS)
#: The entry's fields, in the order of its slots' setters below.
_FIELDS = (
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
_ENTRY_KEYS = frozenset(_FIELDS)


(
    _set_id,
    _set_session_id,
    _set_kind,
    _set_parent_id,
    _set_timestamp,
    _set_run_id,
    _set_message,
    _set_summary,
    _set_first_kept_entry_id,
    _set_model,
    _set_label,
    _set_data,
) = slot_setters(SessionEntry, _FIELDS)


def decode_session_entry(data: Any) -> SessionEntry:
    """A :class:`~prism_core.records.SessionEntry` from its JSON data (a decoded stored
    entry), equal to the kernel converter's result, and failing like it on malformed data."""
    try:
        return _entry(data)
    except Declined:
        return structure(data, SessionEntry)


def _entry(data: Any) -> SessionEntry:
    if type(data) is not dict or not _ENTRY_KEYS.issuperset(data):
        raise Declined
    get = data.get
    kind, timestamp, message = get("kind"), get("timestamp"), get("message")
    id_, session_id = get("id"), get("session_id")
    if (
        kind not in _KINDS
        or type(timestamp) is not float
        or type(id_) is not str
        or type(session_id) is not str
        or get("model") is not None
    ):
        raise Declined
    return SessionEntry(
        id=id_,
        session_id=session_id,
        kind=kind,
        parent_id=optional_text(get("parent_id")),
        timestamp=timestamp,
        run_id=optional_text(get("run_id")),
        message=None if message is None else decode_message(message),
        summary=optional_text(get("summary")),
        first_kept_entry_id=optional_text(get("first_kept_entry_id")),
        label=optional_text(get("label")),
        data=get("data"),
    )


def decode_entry_columns(
    payload: Any,
    id_: Any,
    session_id: Any,
    parent_id: Any,
    kind: Any,
    run_id: Any,
    timestamp: Any,
) -> SessionEntry:
    """The entry a store keeps as columns and a JSON ``payload`` text (its other fields).

    Exactly ``decode_session_entry(data)`` where ``data`` is ``json.loads(payload)`` with the
    column values set on it (so a payload that is not a JSON object fails as that assignment
    does), taking the column values as they are instead of through a merged dict.
    """
    data = load_json(payload)
    if type(data) is dict and _ENTRY_KEYS.issuperset(data):
        get = data.get
        message, summary, label = get("message"), get("summary"), get("label")
        first_kept = get("first_kept_entry_id")
        if (
            kind in _KINDS
            and type(timestamp) is float
            and type(id_) is str
            and type(session_id) is str
            and (parent_id is None or type(parent_id) is str)
            and (run_id is None or type(run_id) is str)
            and get("model") is None
            and (summary is None or type(summary) is str)
            and (first_kept is None or type(first_kept) is str)
            and (label is None or type(label) is str)
        ):
            try:
                # The payload was decoded here: its containers are the entry's own.
                decoded = None if message is None else decode_message(message, fresh=True)
            except Declined:
                pass
            else:
                # The slots set as the constructor sets them (see ``_decode``), minus its call.
                entry = new_record(SessionEntry)
                _set_id(entry, id_)
                _set_session_id(entry, session_id)
                _set_kind(entry, kind)
                _set_parent_id(entry, parent_id)
                _set_timestamp(entry, timestamp)
                _set_run_id(entry, run_id)
                _set_message(entry, decoded)
                _set_summary(entry, summary)
                _set_first_kept_entry_id(entry, first_kept)
                _set_model(entry, None)
                _set_label(entry, label)
                _set_data(entry, get("data"))
                return entry
    data["id"], data["session_id"], data["parent_id"] = id_, session_id, parent_id
    data["kind"], data["run_id"], data["timestamp"] = kind, run_id, timestamp
    return decode_session_entry(data)
