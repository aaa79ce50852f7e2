"""The checkpoint-batch conformance suite (see :class:`CheckpointBatchConformance`)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from ..durable._capabilities import CheckpointBatchStore, CheckpointStatusIndex, capability
from ..errors import CheckpointConflictError
from ..records import create_session_entry
from ..stores import CheckpointStore, InvalidCheckpointError

__all__ = ("CheckpointBatchConformance",)


def _ids() -> tuple[str, str, str]:
    hex_ = uuid.uuid4().hex
    return f"prism.conformance.{hex_}", f"run-{hex_}", f"note-{hex_}"


def _transaction(store: CheckpointStore) -> Any:
    batch = capability(store, CheckpointBatchStore)
    assert batch is not None, "the store must offer checkpoint_transaction()"
    return batch.checkpoint_transaction()


class CheckpointBatchConformance:
    """The behaviour of a checkpoint store that offers ``checkpoint_transaction()``
    (``prism_core.stores.CheckpointBatchStore``): several saves in one commit.

    Subclass it and define a ``checkpoint_store`` fixture. Every test uses its own namespace
    and keys. A transaction built on ``prism_core.stores.QueuedTransaction`` with
    ``takes_entries=False`` keeps the queueing rules by construction.
    """

    @pytest.mark.anyio
    async def test_saves_commit_together(self, checkpoint_store: CheckpointStore) -> None:
        """Queued saves of two records are written when the block ends, in order."""
        ns, run, note = _ids()
        await checkpoint_store.save(ns, run, {"v": 1}, version=1)
        async with _transaction(checkpoint_store) as tx:
            tx.save(ns, run, {"v": 2}, version=2, expected_version=1)
            tx.save(ns, note, {"status": "pending"}, version=1, expected_version=0)
            assert await checkpoint_store.load(ns, note) is None
        assert [(r.key, r.version) for r in tx.records] == [(run, 2), (note, 1)]
        assert tx.entries == ()
        first, second = await checkpoint_store.load(ns, run), await checkpoint_store.load(ns, note)
        assert first is not None
        assert second is not None
        assert (first.version, first.value) == (2, {"v": 2})
        assert (second.version, second.value) == (1, {"status": "pending"})

    @pytest.mark.anyio
    async def test_a_lost_compare_and_swap_writes_none_of_them(
        self, checkpoint_store: CheckpointStore
    ) -> None:
        """A stale ``expected_version`` on one save refuses every save of the block."""
        ns, run, note = _ids()
        await checkpoint_store.save(ns, run, {"v": 1}, version=1)

        async def commit() -> None:
            async with _transaction(checkpoint_store) as tx:
                tx.save(ns, run, {"v": 2}, version=2, expected_version=0)
                tx.save(ns, note, {"status": "pending"}, version=1, expected_version=0)

        with pytest.raises(CheckpointConflictError):
            await commit()
        record = await checkpoint_store.load(ns, run)
        assert record is not None
        assert (record.version, record.value) == (1, {"v": 1})
        assert await checkpoint_store.load(ns, note) is None

        async def second_conflicts() -> None:
            async with _transaction(checkpoint_store) as tx:
                tx.save(ns, note, {"status": "pending"}, version=1, expected_version=0)
                tx.save(ns, run, {"v": 3}, version=3, expected_version=2)

        with pytest.raises(CheckpointConflictError):
            await second_conflicts()
        assert await checkpoint_store.load(ns, note) is None

    @pytest.mark.anyio
    async def test_entries_are_refused_and_the_block_goes_on(
        self, checkpoint_store: CheckpointStore
    ) -> None:
        """An append raises ``InvalidCheckpointError`` when queued (there is no session
        store in the transaction); the saves queued around it still commit."""
        ns, run, _ = _ids()
        entry = create_session_entry(session_id="s", kind="label", label="x", parent_id=None)
        async with _transaction(checkpoint_store) as tx:
            tx.save(ns, run, {"v": 1}, version=1, expected_version=0)
            with pytest.raises(InvalidCheckpointError):
                tx.append(entry)
        record = await checkpoint_store.load(ns, run)
        assert record is not None
        assert record.value == {"v": 1}

    @pytest.mark.anyio
    async def test_an_exception_in_the_block_writes_nothing(
        self, checkpoint_store: CheckpointStore
    ) -> None:
        """Leaving the block with an exception discards the queued saves."""
        ns, run, note = _ids()

        async def fail() -> None:
            async with _transaction(checkpoint_store) as tx:
                tx.save(ns, run, {"v": 1}, version=1)
                tx.save(ns, note, {"v": 1}, version=1)
                raise RuntimeError("host failure")

        with pytest.raises(RuntimeError, match="host failure"):
            await fail()
        assert await checkpoint_store.load(ns, run) is None
        assert await checkpoint_store.load(ns, note) is None

    @pytest.mark.anyio
    async def test_batched_records_are_listed(self, checkpoint_store: CheckpointStore) -> None:
        """Records saved in a batch are listed like any other, and by their status where the
        store has a status index."""
        ns, run, note = _ids()
        async with _transaction(checkpoint_store) as tx:
            tx.save(ns, run, {"status": "running"}, version=1)
            tx.save(ns, note, {"status": "pending"}, version=1)
        page = await checkpoint_store.list(ns)
        assert [r.key for r in page.records] == sorted([run, note])
        index = capability(checkpoint_store, CheckpointStatusIndex)
        if index is not None:
            pending = await index.list_by_status(ns, "pending")
            assert [r.key for r in pending.records] == [note]
