"""``QueuedTransaction``: the queue and the states of a shared commit, for every store.

A store's transaction (see :class:`~prism_core.durable._capabilities.StoreTransaction`)
subclasses it and only writes. The base owns the rules every store keeps alike:

- states: *new* until ``async with`` enters it, *open* inside the block, *done* after; queueing
  in any other state, or entering it twice, raises :class:`~prism_core.InvalidCheckpointError`;
- ``append`` refuses a value that is not a ``SessionEntry`` (``TypeError``), and any entry on a
  transaction over checkpoints alone (``takes_entries=False``, a
  :class:`~prism_core.durable._capabilities.CheckpointBatchStore`'s:
  ``InvalidCheckpointError``); ``save`` checks its
  arguments with ``validate_save``; a record is saved at most once per transaction
  (``InvalidCheckpointError``: queue the last state only). All before any I/O; a refused
  write is not queued and the block may go on;
- leaving the block with an exception, or with nothing queued, writes nothing;
- after :meth:`QueuedTransaction.write` returns, ``records`` holds the saved records and
  ``entries`` the queued entries, in queue order.

A subclass may check and encode a write when it is queued (:meth:`~QueuedTransaction.
prepare_append`, :meth:`~QueuedTransaction.prepare_save`: raise to refuse it) and writes the
whole queue in one transaction in :meth:`~QueuedTransaction.write`, rolling all of it back on
the first refusal. :func:`queue_save` is how the kernel queues a request on any transaction.

It must not decide what is committed or when (the writer does), and it writes nothing itself.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import attrs

from .._echo import echo
from ..records._entries import SessionEntry
from ..records._store import UNSET
from ._checkpoints import CheckpointRecord, InvalidCheckpointError, SaveRequest, validate_save

if TYPE_CHECKING:
    from ._capabilities import StoreTransaction

__all__ = ("QueuedAppend", "QueuedSave", "QueuedTransaction", "QueuedWrite", "queue_save")


@attrs.frozen
class QueuedAppend:
    """A queued session append: the entry, its head check (``UNSET``: none) and what the
    store's :meth:`~QueuedTransaction.prepare_append` made of it."""

    entry: SessionEntry
    expected_leaf_id: Any
    prepared: Any = None


@attrs.frozen
class QueuedSave:
    """A queued checkpoint save: its request and what the store's
    :meth:`~QueuedTransaction.prepare_save` made of it."""

    request: SaveRequest
    prepared: Any = None


#: One queued write.
QueuedWrite = QueuedAppend | QueuedSave


class QueuedTransaction(abc.ABC):
    """The writes of one shared commit, queued until the ``async with`` block ends.

    Subclass it and implement :meth:`write`; override :meth:`prepare_append` and
    :meth:`prepare_save` to check or encode a write when it is queued.
    """

    def __init__(self, *, takes_entries: bool = True) -> None:
        self._takes_entries = takes_entries
        self._queue: list[QueuedWrite] = []
        self._saved: set[tuple[str, str]] = set()
        self._state = "new"
        self._entries: tuple[SessionEntry, ...] = ()
        self._records: tuple[CheckpointRecord, ...] = ()

    @property
    def entries(self) -> tuple[SessionEntry, ...]:
        """The entries written, once committed (empty before)."""
        return self._entries

    @property
    def records(self) -> tuple[CheckpointRecord, ...]:
        """The checkpoint records written, once committed (empty before)."""
        return self._records

    def _check_open(self) -> None:
        if self._state != "open":
            raise InvalidCheckpointError(
                "queue writes inside 'async with transaction:'; this transaction is "
                + ("not entered yet" if self._state == "new" else "finished")
            )

    def append(self, entry: SessionEntry, *, expected_leaf_id: Any = UNSET) -> None:
        """Queue a session append (checked now, written when the block ends); leave
        ``expected_leaf_id`` out for an append without a head check."""
        self._check_open()
        if not self._takes_entries:
            raise InvalidCheckpointError(
                "this transaction commits checkpoint saves only; session entries go in a "
                "shared transaction (shared_transaction(sessions))"
            )
        if not isinstance(entry, SessionEntry):
            raise TypeError(f"append expects a SessionEntry, got {type(entry).__name__}")
        prepared = self.prepare_append(entry, expected_leaf_id)
        self._queue.append(QueuedAppend(entry, expected_leaf_id, prepared))

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
        """Queue a checkpoint save (checked now with ``validate_save``, written when the
        block ends)."""
        self._check_open()
        self.save_request(
            validate_save(
                namespace,
                key,
                value,
                version=version,
                expected_version=expected_version,
                ownership=ownership,
                fencing_token=fencing_token,
                metadata=metadata,
                category=category,
            )
        )

    def save_request(self, request: SaveRequest) -> None:
        """Queue the save ``request`` describes (a request from ``validate_save``)."""
        self._check_open()
        if not isinstance(request, SaveRequest):
            raise TypeError(f"save_request expects a SaveRequest, got {type(request).__name__}")
        slot = (request.namespace, request.key)
        if slot in self._saved:
            # A store may check every write before the first one (one script, one
            # statement), so a second save of one record could not see the first.
            raise InvalidCheckpointError(
                f"a shared commit saves {echo(request.namespace)}/{echo(request.key)} once; "
                "queue the last state only"
            )
        prepared = self.prepare_save(request)
        self._saved.add(slot)
        self._queue.append(QueuedSave(request, prepared))

    def prepare_append(self, entry: SessionEntry, expected_leaf_id: Any) -> Any:
        """Check or encode an append when it is queued (raise to refuse it); the result is
        kept as :attr:`QueuedAppend.prepared`. The base accepts every entry."""
        return None

    def prepare_save(self, request: SaveRequest) -> Any:
        """Check a save against the store's own limits, or encode it, when it is queued
        (raise to refuse it); the result is kept as :attr:`QueuedSave.prepared`."""
        return None

    @abc.abstractmethod
    async def write(self, queue: Sequence[QueuedWrite]) -> Sequence[CheckpointRecord]:
        """Write ``queue`` (never empty) in order, in one transaction with one commit, and
        return the record of each save, in order; on the first refusal write none of it and
        raise that refusal."""

    async def __aenter__(self) -> Self:
        if self._state != "new":
            raise InvalidCheckpointError("a transaction is entered once; start a new one")
        self._state = "open"
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        queue, self._queue = self._queue, []
        self._state = "done"
        if exc_type is not None or not queue:
            return
        records = tuple(await self.write(tuple(queue)))
        self._records = records
        self._entries = tuple(op.entry for op in queue if isinstance(op, QueuedAppend))


def queue_save(transaction: StoreTransaction, request: SaveRequest) -> None:
    """Queue ``request`` on ``transaction`` (``transaction.save_request``): how the kernel
    queues every save on any store's transaction."""
    transaction.save_request(request)
