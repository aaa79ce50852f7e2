"""The ``SessionStore`` protocol every session store implements.

It declares the contract and its refusals; it must not hold a store's behaviour.
"""

from __future__ import annotations

import builtins
from typing import Any, Protocol, runtime_checkable

from ..errors import PrismError
from ._entries import SessionEntry

__all__ = ("UNSET", "SessionConflictError", "SessionEntryNotFoundError", "SessionStore")


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


#: Marker for "no ``expected_leaf_id`` given" (``None`` means "the session must be empty").
UNSET: Any = _Unset()


class SessionConflictError(PrismError):
    """An append's ``expected_leaf_id`` no longer matched the session's head."""

    code = "ERR_PRISM_SESSION_CONFLICT"


class SessionEntryNotFoundError(PrismError):
    """A branch read named a leaf that the session does not hold."""

    code = "ERR_PRISM_SESSION_ENTRY_NOT_FOUND"


@runtime_checkable
class SessionStore(Protocol):
    """Append-only, branch-aware storage of session entries.

    The *head* of a session is the entry appended last. ``append(entry,
    expected_leaf_id=x)`` appends only while the head is still ``x`` (``None``: the session is
    still empty) and raises :class:`SessionConflictError` otherwise, atomically.
    """

    async def append(self, entry: SessionEntry, *, expected_leaf_id: Any = UNSET) -> SessionEntry:
        """Append ``entry``; its ``parent_id`` must be ``None`` or an entry of the same session."""
        ...

    async def list(self, session_id: str) -> builtins.list[SessionEntry]:
        """Every entry of the session, in append order."""
        ...

    async def get(self, entry_id: str) -> SessionEntry | None:
        """One entry by id, or ``None``."""
        ...

    async def read_branch_path(
        self, session_id: str, leaf_id: str | None
    ) -> builtins.list[SessionEntry]:
        """The entries from the root to ``leaf_id`` inclusive (empty for ``None``).

        Raises :class:`SessionEntryNotFoundError` when the session has no such entry.
        """
        ...

    async def aclose(self) -> None:
        """Release what the store opened; idempotent."""
        ...
