"""Entries a durable run appended to its session but has not committed yet.

Under a shared commit (``prism_core.stores.shared_transaction``) an every-turn run writes a
turn's entries together with its checkpoint. Until then the session holds them here: its leaf
already names the newest, the history already has their messages, and a branch read adds
them after the entries the store holds.

It keeps the list only; it must not write to a store.
"""

from __future__ import annotations

from ._entries import SessionEntry

__all__ = ("HeldEntries",)


class HeldEntries:
    """The held entries, oldest first, on top of ``committed_leaf`` (what the store holds)."""

    def __init__(self, committed_leaf: str | None) -> None:
        self.entries: list[SessionEntry] = []
        self.committed_leaf = committed_leaf

    def committed(self, count: int) -> None:
        """The first ``count`` entries are in the store now."""
        if count > 0:
            self.committed_leaf = self.entries[count - 1].id
            del self.entries[:count]
