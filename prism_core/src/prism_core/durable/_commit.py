"""Shared commits: session entries and a checkpoint save in one transaction.

An optional capability. A checkpoint store that can write into the same database as a session
store offers ``shared_transaction(sessions)``; :func:`shared_transaction` asks it and returns
``None`` when the store has no such method or declines (its sessions live elsewhere). The
caller then writes separately, as with any store::

    tx = shared_transaction(checkpoints, sessions)
    if tx is None:
        await sessions.append(entry, expected_leaf_id=leaf)
        await checkpoints.save(AGENT_RUN_NAMESPACE, run_id, state, version=2, expected_version=1)
    else:
        async with tx as batch:
            batch.append(entry, expected_leaf_id=leaf)
            batch.save(AGENT_RUN_NAMESPACE, run_id, state, version=2, expected_version=1)

Rules every implementation follows (the conformance suite in ``prism_core.testing`` checks
them):

- ``append`` and ``save`` validate their arguments at once (the same errors as the stores'
  own methods, before any I/O) and queue the write; nothing is written inside the block.
- Leaving the block normally writes every queued operation, in order, in one transaction with
  one commit. Any refusal (a ``CheckpointConflictError``, a ``SessionConflictError``, a
  parent outside the session) rolls back all of them and is raised from the ``async with``.
- Leaving the block with an exception writes nothing.
- After a commit, ``entries`` and ``records`` hold what was written, in queue order.

It must not decide what is written or when (that is ``_writer`` and ``_run``), and it must not name
``AgentSession``: it reads session records only.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._checkpoints import CheckpointRecord

if TYPE_CHECKING:
    from ..records._entries import SessionEntry
    from ..records._store import SessionStore

__all__ = ("SharedCommitStore", "StoreTransaction", "shared_transaction")


class StoreTransaction(Protocol):
    """The writes of one shared commit, queued until the ``async with`` block ends."""

    def append(self, entry: SessionEntry, *, expected_leaf_id: Any = ...) -> None:
        """Queue a session append (the rules of ``SessionStore.append``; leave
        ``expected_leaf_id`` out for an append without a head check)."""
        ...

    def save(
        self,
        namespace: str,
        key: str,
        value: Any,
        *,
        version: int,
        expected_version: int | None = None,
        ownership: Mapping[str, str] | None = None,
        fencing_token: int | None = None,
        metadata: Mapping[str, str] | None = None,
        category: str | None = None,
    ) -> None:
        """Queue a checkpoint save (the rules of ``CheckpointStore.save``)."""
        ...

    @property
    def entries(self) -> tuple[SessionEntry, ...]:
        """The entries written, once committed (empty before)."""
        ...

    @property
    def records(self) -> tuple[CheckpointRecord, ...]:
        """The checkpoint records written, once committed (empty before)."""
        ...


@runtime_checkable
class SharedCommitStore(Protocol):
    """A checkpoint store that can commit together with a session store."""

    def shared_transaction(
        self, sessions: SessionStore
    ) -> AbstractAsyncContextManager[StoreTransaction] | None:
        """A transaction over this store and ``sessions``, or ``None`` when ``sessions`` is
        not in the same database (the caller then writes separately)."""
        ...


def shared_transaction(
    checkpoints: object, sessions: object
) -> AbstractAsyncContextManager[StoreTransaction] | None:
    """One transaction over ``checkpoints`` and ``sessions``, or ``None`` when they cannot
    commit together (a store without the capability, or stores in different databases)."""
    # Deferred: loading any module of ``sessions/`` runs its ``__init__``, which loads the run
    # loop, which imports this package.
    from ..records._store import SessionStore

    if not isinstance(checkpoints, SharedCommitStore) or not isinstance(sessions, SessionStore):
        return None
    return checkpoints.shared_transaction(sessions)
