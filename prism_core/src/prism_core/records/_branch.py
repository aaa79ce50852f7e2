"""Branch helpers: turning a root-to-leaf path of entries into provider history.

It reads entries only; it must not write to a store.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

from ..content import Message, TextContent
from ..models import ModelConfig
from ._entries import SessionEntry

__all__ = ("COMPACTION_SUMMARY_PREFIX", "branch_history", "branch_messages")

_kind = operator.attrgetter("kind")

COMPACTION_SUMMARY_PREFIX = "Summary of the earlier conversation:\n"


def branch_messages(path: Sequence[SessionEntry]) -> list[Message]:
    """The messages a provider sees for ``path``.

    The newest ``compaction`` entry replaces everything before its ``first_kept_entry_id``
    with one summary message; entries after it follow unchanged.
    """
    return branch_history(path)[0]


def branch_history(path: Sequence[SessionEntry]) -> tuple[list[Message], ModelConfig | None]:
    """:func:`branch_messages` of ``path`` and the model of its newest ``model_change`` entry
    (``None``: the branch never changed it), in one pass over the entries' kinds."""
    # The kinds are read once, in C, and searched in C: a resumed transcript has hundreds of
    # entries, and usually neither a compaction nor a model change among them.
    kinds = list(map(_kind, path))
    start = 0
    summary: str | None = None
    if "compaction" in kinds:
        index = len(kinds) - 1 - kinds[::-1].index("compaction")
        entry = path[index]
        summary = entry.summary
        start = index + 1
        if entry.first_kept_entry_id is not None:
            for kept in range(index):
                if path[kept].id == entry.first_kept_entry_id:
                    start = kept
                    break
    messages: list[Message] = []
    if summary is not None:
        messages.append(Message("user", (TextContent(COMPACTION_SUMMARY_PREFIX + summary),)))
    messages += [
        entry.message
        for entry, kind in zip(path[start:], kinds[start:], strict=True)
        if kind == "message" and entry.message is not None
    ]
    model = None
    if "model_change" in kinds:
        for index in range(len(kinds) - 1, -1, -1):
            if kinds[index] == "model_change" and path[index].model is not None:
                model = path[index].model
                break
    return messages, model
