"""The in-process session store (the default when a host supplies none).

It must not know runs, checkpoints or sessions: it stores entries.
"""

from __future__ import annotations

import builtins
from types import TracebackType
from typing import Any

import attrs

from ._entries import SessionEntry
from ._run_tail import BranchAndRunTail
from ._store import UNSET, SessionConflictError, SessionEntryNotFoundError

__all__ = ("MemorySessionStore", "create_memory_session_store")


class MemorySessionStore:
    """Keeps entries in memory. Each operation is atomic (no await inside it)."""

    #: Entries die with the process (see ``prism_core.durable._lifetime``).
    process_local = True

    def __init__(self) -> None:
        self._entries: dict[str, SessionEntry] = {}
        self._by_session: dict[str, list[str]] = {}

    async def append(self, entry: SessionEntry, *, expected_leaf_id: Any = UNSET) -> SessionEntry:
        """Append ``entry`` (see :class:`~prism_core.SessionStore`)."""
        return self._append_now(entry, expected_leaf_id)

    def _append_now(self, entry: SessionEntry, expected_leaf_id: Any = UNSET) -> SessionEntry:
        """Append now (no await: atomic), or raise before writing anything."""
        if not isinstance(entry, SessionEntry):
            raise TypeError(f"append expects a SessionEntry, got {type(entry).__name__}")
        ids = self._by_session.get(entry.session_id, [])
        if expected_leaf_id is not UNSET:
            head = ids[-1] if ids else None
            if head != expected_leaf_id:
                raise SessionConflictError(
                    f"session {entry.session_id!r} moved: its head is no longer the expected leaf"
                )
        if entry.id in self._entries:
            raise SessionConflictError(f"entry id {entry.id!r} already exists")
        if entry.parent_id is not None:
            parent = self._entries.get(entry.parent_id)
            if parent is None or parent.session_id != entry.session_id:
                raise SessionEntryNotFoundError(
                    f"parent entry {entry.parent_id!r} is not in session {entry.session_id!r}"
                )
        stored = attrs.evolve(entry)
        self._entries[stored.id] = stored
        self._by_session.setdefault(stored.session_id, []).append(stored.id)
        return stored

    def _forget(self, entry_id: str) -> None:
        """Undo the append of ``entry_id``, the session's newest entry (a rolled-back
        shared commit)."""
        entry = self._entries.pop(entry_id)
        ids = self._by_session[entry.session_id]
        ids.pop()
        if not ids:
            del self._by_session[entry.session_id]

    async def list(self, session_id: str) -> builtins.list[SessionEntry]:
        """Every entry of the session, in append order."""
        return [self._entries[i] for i in self._by_session.get(session_id, [])]

    async def get(self, entry_id: str) -> SessionEntry | None:
        """One entry by id, or ``None``."""
        return self._entries.get(entry_id)

    async def read_branch_path(
        self, session_id: str, leaf_id: str | None
    ) -> builtins.list[SessionEntry]:
        """Root-to-leaf entries of the branch ending at ``leaf_id``."""
        if leaf_id is None:
            return []
        path: builtins.list[SessionEntry] = []
        current: str | None = leaf_id
        while current is not None:
            entry = self._entries.get(current)
            if entry is None or entry.session_id != session_id:
                raise SessionEntryNotFoundError(f"session {session_id!r} has no entry {current!r}")
            path.append(entry)
            current = entry.parent_id
        path.reverse()
        return path

    async def read_branch_and_run_tail(
        self, session_id: str, leaf_id: str | None, run_id: str
    ) -> BranchAndRunTail:
        """The branch ending at ``leaf_id`` and the entries of ``run_id`` appended after it
        (see :class:`~prism_core.records.BranchAndRunTailReader`)."""
        path = await self.read_branch_path(session_id, leaf_id)
        ids = self._by_session.get(session_id, [])
        start = ids.index(leaf_id) + 1 if leaf_id is not None else 0
        tail = [self._entries[i] for i in ids[start:] if self._entries[i].run_id == run_id]
        return BranchAndRunTail(path=path, tail=tail)

    async def delete_session(self, session_id: str) -> int:
        """Delete every entry of ``session_id``; the number deleted (see
        :class:`~prism_core.stores.SessionDeleter`)."""
        ids = self._by_session.pop(session_id, [])
        for entry_id in ids:
            del self._entries[entry_id]
        return len(ids)

    async def aclose(self) -> None:
        """Nothing to release; idempotent."""

    async def __aenter__(self) -> MemorySessionStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def create_memory_session_store() -> MemorySessionStore:
    """A fresh in-memory session store."""
    return MemorySessionStore()
