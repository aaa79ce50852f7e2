"""The read a ``continue`` makes: a branch and what one run appended after its leaf.

An optional session-store capability. A store that can answer in one round trip offers
``read_branch_and_run_tail(session_id, leaf_id, run_id)``; :func:`read_branch_and_run_tail`
asks for it (``capability(store, BranchAndRunTailReader)``) and falls back to one ``list`` of
the whole session for any other store::

    read = await read_branch_and_run_tail(store, session_id, leaf_id, run_id)
    read.path  # root .. leaf_id, like read_branch_path
    read.tail  # the run's entries appended after leaf_id, in append order

Rules every implementation follows (the conformance suite in ``prism_core.testing`` checks
them): ``path`` equals ``read_branch_path(session_id, leaf_id)``, including its
:class:`~prism_core.SessionEntryNotFoundError` for a leaf the session does not hold; ``tail``
holds exactly the entries of the session whose ``run_id`` is ``run_id`` and that were
appended after ``leaf_id`` (every entry of the run when ``leaf_id`` is ``None``), in append
order, whichever branch they are on. Both come from one consistent read.

It reads; it must not write to a store.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import attrs

from .._capability import capability
from ._entries import SessionEntry
from ._store import SessionEntryNotFoundError, SessionStore

__all__ = (
    "BranchAndRunTail",
    "BranchAndRunTailReader",
    "PrefetchedBranchAndRunTail",
    "branch_and_run_tail",
    "read_branch_and_run_tail",
)


@attrs.frozen
class BranchAndRunTail:
    """A branch (root to leaf) and the entries one run appended after that leaf."""

    path: builtins.list[SessionEntry]
    tail: builtins.list[SessionEntry]


@attrs.frozen
class PrefetchedBranchAndRunTail:
    """A branch-and-run-tail read that a store made ahead of time (with the checkpoint load
    of a ``continue``, in the same hand-off), for exactly the ids it names.

    ``decode()`` gives what ``store.read_branch_and_run_tail(session_id, leaf_id, run_id)``
    gives for the rows it read, and raises what that read raises; it is only used for a read
    of the same store and ids.
    """

    store: object
    session_id: str
    leaf_id: str | None
    run_id: str
    decode: Callable[[], BranchAndRunTail]


@runtime_checkable
class BranchAndRunTailReader(Protocol):
    """A session store that reads a branch and a run's later entries in one round trip."""

    async def read_branch_and_run_tail(
        self, session_id: str, leaf_id: str | None, run_id: str
    ) -> BranchAndRunTail:
        """The branch ending at ``leaf_id`` and the entries of ``run_id`` appended after it.

        Raises :class:`~prism_core.SessionEntryNotFoundError` when the session has no entry
        ``leaf_id``.
        """
        ...


def branch_and_run_tail(
    entries: Sequence[SessionEntry], session_id: str, leaf_id: str | None, run_id: str
) -> BranchAndRunTail:
    """The answer for ``entries`` (one session's entries in append order), computed in
    memory: the fallback for stores without the capability, and a reference for tests."""
    by_id = {entry.id: entry for entry in entries}
    start = 0
    path: builtins.list[SessionEntry] = []
    if leaf_id is not None:
        cursor: str | None = leaf_id
        while cursor is not None:
            node = by_id.get(cursor)
            if node is None or node.session_id != session_id:
                raise SessionEntryNotFoundError(f"session {session_id!r} has no entry {cursor!r}")
            path.append(node)
            cursor = node.parent_id
        path.reverse()
        start = next(i for i, entry in enumerate(entries) if entry.id == leaf_id) + 1
    tail = [entry for entry in entries[start:] if entry.run_id == run_id]
    return BranchAndRunTail(path=path, tail=tail)


async def read_branch_and_run_tail(
    store: SessionStore,
    session_id: str,
    leaf_id: str | None,
    run_id: str,
    prefetched: PrefetchedBranchAndRunTail | None = None,
) -> BranchAndRunTail:
    """The branch ending at ``leaf_id`` and the entries of ``run_id`` appended after it, in
    one store call: the store's own read when it offers one, else ``list`` of the session.
    A ``prefetched`` read of this very store and these ids is decoded instead of a call."""
    if (
        prefetched is not None
        and prefetched.store is store
        and prefetched.session_id == session_id
        and prefetched.leaf_id == leaf_id
        and prefetched.run_id == run_id
    ):
        return prefetched.decode()
    reader = capability(store, BranchAndRunTailReader)
    if reader is not None:
        return await reader.read_branch_and_run_tail(session_id, leaf_id, run_id)
    return branch_and_run_tail(await store.list(session_id), session_id, leaf_id, run_id)
