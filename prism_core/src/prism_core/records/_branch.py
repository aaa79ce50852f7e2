"""Branch helpers: turning a root-to-leaf path of entries into provider history.

It reads entries only; it must not write to a store.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..content import Message, TextContent
from ._entries import SessionEntry

__all__ = ("COMPACTION_SUMMARY_PREFIX", "branch_messages")

COMPACTION_SUMMARY_PREFIX = "Summary of the earlier conversation:\n"


def branch_messages(path: Sequence[SessionEntry]) -> list[Message]:
    """The messages a provider sees for ``path``.

    The newest ``compaction`` entry replaces everything before its ``first_kept_entry_id``
    with one summary message; entries after it follow unchanged.
    """
    start = 0
    summary: str | None = None
    for index in range(len(path) - 1, -1, -1):
        entry = path[index]
        if entry.kind == "compaction":
            summary = entry.summary
            start = index + 1
            if entry.first_kept_entry_id is not None:
                for kept in range(index):
                    if path[kept].id == entry.first_kept_entry_id:
                        start = kept
                        break
            break
    messages: list[Message] = []
    if summary is not None:
        messages.append(Message("user", (TextContent(COMPACTION_SUMMARY_PREFIX + summary),)))
    for entry in path[start:]:
        if entry.kind == "message" and entry.message is not None:
            messages.append(entry.message)
    return messages
