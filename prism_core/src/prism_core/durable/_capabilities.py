"""The optional capabilities of a store, and the one way to ask for them: :func:`capability`.

A store that has more than the ``CheckpointStore`` / ``SessionStore`` protocols' methods may
offer one of these; the kernel asks ``capability(store, Protocol)`` and falls back to the plain
protocol when the answer is ``None``, so a store without any of them keeps working:

- :class:`SharedCommitStore`: session entries and a checkpoint save in one transaction
  (``shared_transaction(sessions)`` gives a :class:`StoreTransaction`); an ``every-turn`` run
  then makes one commit per turn. :func:`shared_transaction` asks for it with both stores.
- :class:`CheckpointBatchStore`: several checkpoint saves in one transaction, without a
  session store (``checkpoint_transaction()`` gives a :class:`StoreTransaction` that takes
  saves only): a run's checkpoint and the outbox records it reports commit together.
- :class:`CheckpointStatusIndex`: one page of the records of one status
  (``list_agent_runs`` reads only the runs of the status asked for).
- :class:`LeaseRenewalStore`: a leased run's value rewritten at its current version (else a
  renewal is an ordinary save, with a new version).
- :class:`CheckpointAndBranchLoader`: a ``continue``'s checkpoint load that also reads the
  session branch and run tail it names, in the same hand-off.
- :class:`CheckpointStampReader`: a record's version and fencing token alone (a
  :class:`CheckpointStamp`), without its value: the pre-dispatch ownership check a durable
  run makes before every read-only or idempotent tool call.
- :class:`CreatesOnFirstUse`: a store that creates its database, file or tables on first use
  and can be told to create nothing instead (``open_stores(url, create=False)`` tells the
  stores of the pair a plugin opened).
- :class:`~prism_core.records.BranchAndRunTailReader` (a session store's): a branch and one
  run's later entries in one round trip. It is declared with the session records, whose
  fallback read asks for it, and re-exported here.

Rules of the shared commit (``prism_core.testing.SharedCommitConformance`` checks them):

- ``append`` and ``save`` check their arguments at once (the same errors
  as the stores' own methods, before any I/O) and queue the write; nothing is written inside
  the block.
- Leaving the block normally writes every queued operation, in order, in one transaction with
  one commit. Any refusal (a ``CheckpointConflictError``, a ``SessionConflictError``, a
  parent outside the session) rolls back all of them and is raised from the ``async with``.
- Leaving the block with an exception writes nothing.
- After a commit, ``entries`` and ``records`` hold what was written, in queue order.

Rules of lease renewal (``prism_core.testing.LeaseRenewalConformance``): the value is checked
like a save's; it is written only if the record exists at exactly ``version``, under the same
owner, with ``fencing_token`` not below the stored one, else ``CheckpointConflictError`` and
nothing changes; the version, token, metadata, category and creation time stay, the value and
the update time change.

It declares the capabilities and asks for them; it must not hold a store's behaviour, and it
must not decide what is written or when (that is ``_writer`` and ``_run``).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, NamedTuple, Protocol, runtime_checkable

from .._capability import capability
from ..records._entries import SessionEntry
from ..records._run_tail import BranchAndRunTailReader, PrefetchedBranchAndRunTail
from ..records._store import SessionStore
from ._checkpoints import CheckpointPage, CheckpointRecord, SaveRequest

__all__ = (
    "BranchAndRunTailReader",
    "CheckpointAndBranchLoader",
    "CheckpointBatchStore",
    "CheckpointStamp",
    "CheckpointStampReader",
    "CheckpointStatusIndex",
    "CreatesOnFirstUse",
    "LeaseRenewalStore",
    "SharedCommitStore",
    "StoreTransaction",
    "capability",
    "shared_transaction",
)


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
        """Queue a checkpoint save (the rules of ``CheckpointStore.save``): the arguments
        checked into one :class:`SaveRequest`, then :meth:`save_request`."""
        ...

    def save_request(self, request: SaveRequest) -> None:
        """Queue the save ``request`` describes (a request from ``validate_save``): the one
        path every queued save takes."""
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
class CreatesOnFirstUse(Protocol):
    """A store that creates its database, file or tables on first use, and can be told not
    to (what ``open_stores(url, create=False)`` does with the pair a plugin opened)."""

    def create_nothing(self) -> None:
        """From now on, refuse a database, file or tables that do not exist (on first use,
        writing nothing) instead of creating them; called before the store's first use."""
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


@runtime_checkable
class CheckpointBatchStore(Protocol):
    """A checkpoint store that commits several of its own saves together.

    The transaction keeps the rules of the shared commit (see the module) for saves; its
    ``append`` raises :class:`~prism_core.InvalidCheckpointError` (there is no session store
    in it). ``prism_core.testing.CheckpointBatchConformance`` checks it.
    """

    def checkpoint_transaction(self) -> AbstractAsyncContextManager[StoreTransaction]:
        """A transaction over this store's records alone."""
        ...


def shared_transaction(
    checkpoints: object, sessions: object
) -> AbstractAsyncContextManager[StoreTransaction] | None:
    """One transaction over ``checkpoints`` and ``sessions``, or ``None`` when they cannot
    commit together (a store without the capability, or stores in different databases)::

        tx = shared_transaction(checkpoints, sessions)
        if tx is None:
            await sessions.append(entry, expected_leaf_id=leaf)
            await checkpoints.save(namespace, run_id, state, version=2, expected_version=1)
        else:
            async with tx as batch:
                batch.append(entry, expected_leaf_id=leaf)
                batch.save(namespace, run_id, state, version=2, expected_version=1)
    """
    store = capability(checkpoints, SharedCommitStore)
    session_store = capability(sessions, SessionStore)
    if store is None or session_store is None:
        return None
    return store.shared_transaction(session_store)


@runtime_checkable
class CheckpointStatusIndex(Protocol):
    """A checkpoint store capability: one page of the records of one status.

    Rules, as for ``list``: ``ownership`` is matched exactly (foreign records are never
    listed), pages follow ``(namespace, key)`` order, ``limit`` is 1..1000 and ``cursor`` is
    ``None`` or a cursor of a previous page of the same call. The index is maintained by
    ``save`` and ``delete`` atomically with the record, so a listed record has the status asked
    for at the moment it was read. The status of a value is
    :func:`~prism_core.stores.indexed_status`.
    """

    async def list_by_status(
        self,
        namespace: str,
        status: str,
        *,
        ownership: Mapping[str, str] | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> CheckpointPage:
        """Records in ``namespace`` whose value's status is ``status``, visible to
        ``ownership``, in key order."""
        ...


@runtime_checkable
class LeaseRenewalStore(Protocol):
    """A checkpoint store that can rewrite a record's value without a new version."""

    async def renew_lease(
        self,
        namespace: str,
        key: str,
        value: Any,
        *,
        version: int,
        ownership: Mapping[str, str] | None = None,
        fencing_token: int | None = None,
    ) -> None:
        """Replace the value of the record at exactly ``version`` (the rules above); raise
        :class:`~prism_core.CheckpointConflictError` when the record moved on."""
        ...


@runtime_checkable
class CheckpointAndBranchLoader(Protocol):
    """A checkpoint store that loads a run's record and, in the same hand-off, reads the
    session branch and run tail its value names (``session_id``, ``leaf_id``, ``run_id``)
    from ``sessions``, when that session store shares its connection.

    The prefetched read is ``None`` when it cannot be made (another store, no record, ids
    that are not text, a failed read): the resume then reads as usual, so its errors come
    at the same step as without the capability.
    """

    async def load_with_run_branch(
        self,
        namespace: str,
        key: str,
        *,
        ownership: Mapping[str, str] | None,
        sessions: object,
    ) -> tuple[CheckpointRecord | None, PrefetchedBranchAndRunTail | None]:
        """The record (as ``load`` returns it) and the prefetched read, or ``None``."""
        ...


class CheckpointStamp(NamedTuple):
    """What identifies a stored record's state for its owner: its ``version`` and
    ``fencing_token`` (``None``: unfenced)."""

    version: int
    fencing_token: int | None


@runtime_checkable
class CheckpointStampReader(Protocol):
    """A checkpoint store that reads a record's :class:`CheckpointStamp` without its value.

    Rules, as for ``load``: ``None`` when the record is absent or ``ownership`` does not match
    its owner exactly; otherwise the version and fencing token ``load`` would return at that
    moment. Nothing is decoded, so a record whose value is unreadable still has a stamp.
    """

    async def load_stamp(
        self, namespace: str, key: str, *, ownership: Mapping[str, str] | None = None
    ) -> CheckpointStamp | None:
        """The record's version and fencing token, or ``None`` (the rules above)."""
        ...
