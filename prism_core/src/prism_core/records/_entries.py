"""Session entries: the append-only, branch-aware records a session store holds.

It defines the record; it must not read or write a store.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal, TypeAlias

import attrs

from ..content import Message
from ..models import ModelConfig

__all__ = ("ENTRY_KINDS", "EntryKind", "SessionEntry", "create_session_entry", "new_entry_id")

EntryKind: TypeAlias = Literal[
    "message", "event", "summary", "metadata", "model_change", "label", "custom", "compaction"
]
ENTRY_KINDS: tuple[str, ...] = (
    "message",
    "event",
    "summary",
    "metadata",
    "model_change",
    "label",
    "custom",
    "compaction",
)


@attrs.frozen(kw_only=True)
class SessionEntry:
    """One entry of a session: ``parent_id`` links it into a branch; ``kind`` picks the payload.

    - ``message``: ``message``
    - ``summary`` / ``compaction``: ``summary`` (compaction also ``first_kept_entry_id``)
    - ``model_change``: ``model``
    - ``label``: ``label``
    - ``metadata`` / ``event`` / ``custom``: ``data``
    """

    id: str
    session_id: str
    kind: EntryKind
    parent_id: str | None = None
    timestamp: float = attrs.field(factory=time.time)
    run_id: str | None = None
    message: Message | None = None
    summary: str | None = None
    first_kept_entry_id: str | None = None
    model: ModelConfig | None = None
    label: str | None = None
    data: Any = None


def new_entry_id() -> str:
    """A fresh, globally unique entry id."""
    return f"entry_{uuid.uuid4().hex}"


_PAYLOAD = {
    "message": "message",
    "summary": "summary",
    "compaction": "summary",
    "model_change": "model",
    "label": "label",
}


def create_session_entry(
    *,
    session_id: str,
    kind: EntryKind,
    id: str | None = None,
    parent_id: str | None = None,
    **payload: Any,
) -> SessionEntry:
    """Build a :class:`SessionEntry`, checking that ``kind`` has its payload field."""
    if kind not in ENTRY_KINDS:
        raise ValueError(f"unknown session entry kind {kind!r}; known kinds: {list(ENTRY_KINDS)}")
    if not isinstance(session_id, str) or not session_id:
        raise ValueError("session_id must be a non-empty string")
    required = _PAYLOAD.get(kind)
    if required is not None and payload.get(required) is None:
        raise ValueError(f"a {kind!r} entry needs its {required!r} payload")
    return SessionEntry(
        id=id or new_entry_id(), session_id=session_id, kind=kind, parent_id=parent_id, **payload
    )
