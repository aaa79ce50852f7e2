"""Deleting a session's transcript: the optional capability retention and erasure need.

A session store that can forget a whole session offers :class:`SessionDeleter` (asked for
with ``capability()``): ``delete_session`` removes every entry of the session and its head, in
one step, and answers how many entries it removed (``0`` for a session it does not hold).
Entries of other sessions are untouched. ``prism_core.testing.SessionDeletionConformance``
checks it.

It declares the capability; it must not hold a store's behaviour.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ("SessionDeleter",)


@runtime_checkable
class SessionDeleter(Protocol):
    """A session store capability: deleting every entry of one session."""

    async def delete_session(self, session_id: str) -> int:
        """Delete every entry of ``session_id`` (and its head); the number deleted."""
        ...
