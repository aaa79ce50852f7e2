"""What a message says: the input of a new task, or the ``decisions`` of a waiting one.

Every part is first checked against what the agent reads (``MEDIA_TYPES``): a text part
(``text/plain``) or a data part (``application/json``); a file part, or a part declaring any
other media type, is :class:`ContentTypeRefused` (A2A's ``ContentTypeNotSupportedError``)
before anything else is read or written.

A message that starts a task becomes the run's input: its parts in order, joined by newlines,
each text part as it is and each data part as compact JSON text (keys sorted), so a caller
may start a task with structured data. A data part holding ``decisions`` is refused there:
a batch belongs on the task that waits for it (``taskId``), never in a new run's prompt.

A message on a task that waits for input is exactly one data part
``{"decisions": [{"approval_id", "outcome", "modified_arguments"?, "reason"?}, ...]}``; the
batch goes to the kernel as it is (which checks its shape, then each entry against the pending
calls), inside a resume input this module never lets the caller shape: only ``decisions``, so
``continue`` and ``resolutions`` cannot be reached from A2A.

A2A data parts carry JSON as ``google.protobuf.Value``, which holds every number as a double;
whole numbers are turned back into integers so an edited argument ``2`` stays ``2`` (and
hashes as the tool call would), and a data part ``{"n": 2}`` starts a task with ``{"n":2}``.
"""

from __future__ import annotations

import json
from typing import Any

from a2a.helpers import get_data_parts
from a2a.types import Message, Part

from ._card import MEDIA_TYPES
from ._errors import ContentTypeRefused, InputRefused

__all__ = ("check_media_types", "message_decisions", "message_text")

#: The media type each kind of part has when it declares none.
_IMPLIED = {"text": "text/plain", "data": "application/json"}


def _whole_numbers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]
    return value


def _media_type(part: Part) -> str:
    """The part's declared media type without parameters, else the one its kind implies."""
    declared = part.media_type.split(";", 1)[0].strip().lower()
    return declared or _IMPLIED.get(part.WhichOneof("content") or "", "")


def check_media_types(message: Message) -> None:
    """:class:`ContentTypeRefused` for a part the agent does not read (see the module);
    :class:`InputRefused` for a message without parts or with a part that holds nothing."""
    if not message.parts:
        raise InputRefused("a message needs at least one part")
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind is None:
            raise InputRefused("a message part holds no text, file or data")
        media_type = _media_type(part)
        if kind not in _IMPLIED or media_type != _IMPLIED[kind]:
            shown = media_type[:80] or f"a {kind} part without a media type"
            raise ContentTypeRefused(
                f"this agent does not read {shown!r}: it reads {', '.join(MEDIA_TYPES)} "
                "(text parts and JSON data parts)"
            )


def _data_text(part: Part) -> str:
    [data] = get_data_parts([part])
    value = _whole_numbers(data)
    if isinstance(value, dict) and "decisions" in value:
        raise InputRefused(
            "a decisions batch goes on the task that waits for it (set the message's taskId)"
        )
    try:
        return json.dumps(
            value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False
        )
    except ValueError as exc:
        raise InputRefused(f"a data part that is not JSON: {exc}") from exc


def message_text(message: Message) -> str:
    """The input of a message that starts a task (see the module), after
    :func:`check_media_types`; :class:`InputRefused` when it holds nothing but blanks."""
    check_media_types(message)
    text = "\n".join(
        part.text if part.WhichOneof("content") == "text" else _data_text(part)
        for part in message.parts
    )
    if not text.strip():
        raise InputRefused("a new task needs a message with text or data")
    return text


def message_decisions(message: Message) -> Any:
    """The ``decisions`` batch of a message on a waiting task (unchecked: the kernel checks
    it); :class:`InputRefused` unless the message is one data part that holds one."""
    parts = get_data_parts(message.parts)
    batches = [part for part in parts if isinstance(part, dict) and "decisions" in part]
    if len(batches) != 1 or len(message.parts) != 1:
        raise InputRefused(
            "this task waits for decisions: send one data part "
            '{"decisions": [{"approval_id": ..., "outcome": ...}]}'
        )
    [batch] = batches
    if set(batch) != {"decisions"}:
        # Nothing rides beside a batch: no "decision" (continue), no "resolutions".
        raise InputRefused('a decisions data part holds only "decisions"')
    return _whole_numbers(batch["decisions"])
