"""What a message says: the text of a new task, or the ``decisions`` of a waiting one.

A message that starts a task carries text parts only; a message on a task that waits for
input is exactly one data part
``{"decisions": [{"approval_id", "outcome", "modified_arguments"?, "reason"?}, ...]}``; the
batch goes to the kernel as it is (which checks its shape, then each entry against the pending
calls), inside a resume input this module never lets the caller shape: only ``decisions``, so
``continue`` and ``resolutions`` cannot be reached from A2A.

A2A data parts carry JSON as ``google.protobuf.Value``, which holds every number as a double;
whole numbers are turned back into integers so an edited argument ``2`` stays ``2`` (and
hashes as the tool call would).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from a2a.helpers import get_data_parts, get_text_parts
from a2a.types import Message

from ._errors import InputRefused

__all__ = ("message_decisions", "message_text")


def _whole_numbers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]
    return value


def message_text(message: Message) -> str:
    """The text of a message that starts a task (its text parts, joined by newlines);
    :class:`InputRefused` without any, or with parts that are not text."""
    texts: Sequence[str] = get_text_parts(message.parts)
    if len(texts) != len(message.parts):
        raise InputRefused("a new task is started with text parts only")
    text = "\n".join(texts)
    if not text.strip():
        raise InputRefused("a new task needs a message with a text part")
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
