"""Shared commits on the memory stores: session appends and checkpoint saves, all or none.

The memory stores never await inside an operation, so the queued writes are applied one after
the other without yielding; a refusal undoes the ones applied before it, in reverse order.
The queue and its rules are :class:`~._transaction.QueuedTransaction`'s.

It must not decide what is committed or when: it applies what the writer queues.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._checkpoints import CheckpointRecord, SaveRequest, check_value_bytes
from ._transaction import QueuedSave, QueuedTransaction, QueuedWrite

if TYPE_CHECKING:
    from ..records._memory import MemorySessionStore

__all__ = ("MemoryTransaction",)


class MemoryTransaction(QueuedTransaction):
    """The writes of one shared commit over a memory checkpoint store and a memory session
    store (see :class:`prism_core.stores.StoreTransaction`)."""

    def __init__(self, checkpoints: Any, sessions: MemorySessionStore | None) -> None:
        # ``checkpoints`` is the MemoryCheckpointStore that opens this transaction (not named
        # here: that module imports this one); without ``sessions`` it takes saves only.
        super().__init__(takes_entries=sessions is not None)
        self._checkpoints = checkpoints
        self._sessions = sessions

    def prepare_save(self, request: SaveRequest) -> None:
        """Refuse a value over the checkpoint store's ``max_value_bytes`` when queued."""
        check_value_bytes(request, self._checkpoints.max_value_bytes)

    async def write(self, queue: Sequence[QueuedWrite]) -> list[CheckpointRecord]:
        """Apply every write now (no await: atomic); undo them all on the first refusal."""
        checkpoints, sessions = self._checkpoints, self._sessions
        undo: list[Any] = []
        records: list[CheckpointRecord] = []
        try:
            for op in queue:
                if isinstance(op, QueuedSave):
                    request = op.request
                    slot = (request.namespace, request.key)
                    before = checkpoints._records.get(slot)
                    stored = checkpoints._apply(request)
                    undo.append((slot, before))
                    records.append(stored.to_record())
                else:
                    assert sessions is not None  # appends are refused without one
                    sessions._append_now(op.entry, op.expected_leaf_id)
                    undo.append(op.entry.id)
        except BaseException:
            for step in reversed(undo):
                if isinstance(step, str):
                    assert sessions is not None
                    sessions._forget(step)
                elif step[1] is None:
                    del checkpoints._records[step[0]]
                else:
                    checkpoints._records[step[0]] = step[1]
            raise
        # Every write landed: the saves' ledger rows follow (no await: still atomic).
        for op in queue:
            if isinstance(op, QueuedSave):
                checkpoints._ledger.apply(op.request.ledger)
        return records
