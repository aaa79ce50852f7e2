"""The shared-commit conformance suite (see :class:`SharedCommitConformance`)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from ..durable._capabilities import shared_transaction
from ..errors import CheckpointConflictError
from ..records import (
    SessionConflictError,
    SessionEntry,
    SessionEntryNotFoundError,
    SessionStore,
    create_session_entry,
)
from ..stores import CheckpointStore, InvalidCheckpointError, validate_save

__all__ = ("SharedCommitConformance",)


def _ids() -> tuple[str, str, str]:
    hex_ = uuid.uuid4().hex
    return f"prism.conformance.{hex_}", f"run-{hex_}", f"session-{hex_}"


def _label(session_id: str, text: str, parent: SessionEntry | None = None) -> SessionEntry:
    return create_session_entry(
        session_id=session_id,
        kind="label",
        label=text,
        parent_id=parent.id if parent is not None else None,
    )


def _transaction(stores: tuple[CheckpointStore, SessionStore]) -> Any:
    tx = shared_transaction(*stores)
    assert tx is not None, "the stores must be able to commit together"
    return tx


class SharedCommitConformance:
    """The behaviour of a checkpoint store that offers ``shared_transaction(sessions)``.

    Subclass it and define a ``shared_stores`` fixture yielding ``(checkpoints, sessions)``
    that can commit together (``prism_core.stores.shared_transaction`` returns a
    transaction for them). Every test uses its own namespace, run and session ids. A
    transaction built on ``prism_core.stores.QueuedTransaction`` keeps the queueing rules
    (states, misuse errors, one save per record) by construction.
    """

    @pytest.mark.anyio
    async def test_entries_and_a_save_commit_together(
        self, shared_stores: tuple[CheckpointStore, SessionStore]
    ) -> None:
        """Queued appends and a save are all written when the block ends, in order."""
        checkpoints, sessions = shared_stores
        ns, run, session = _ids()
        first = _label(session, "one")
        second = _label(session, "two", first)
        async with _transaction(shared_stores) as tx:
            tx.append(first, expected_leaf_id=None)
            tx.append(second, expected_leaf_id=first.id)
            tx.save(ns, run, {"leaf": second.id}, version=1, expected_version=0)
            # Nothing is written before the block ends.
            assert await sessions.list(session) == []
            assert await checkpoints.load(ns, run) is None
        assert tx.entries == (first, second)
        assert [r.version for r in tx.records] == [1]
        assert tx.records[0].value == {"leaf": second.id}
        assert await sessions.read_branch_path(session, second.id) == [first, second]
        record = await checkpoints.load(ns, run)
        assert record is not None
        assert (record.version, record.value) == (1, {"leaf": second.id})
        assert record.created_at == pytest.approx(tx.records[0].created_at, abs=1e-3)

    @pytest.mark.anyio
    async def test_a_failing_compare_and_swap_rolls_back_the_entries(
        self, shared_stores: tuple[CheckpointStore, SessionStore]
    ) -> None:
        """A stale ``expected_version`` refuses the save and every entry queued with it."""
        checkpoints, sessions = shared_stores
        ns, run, session = _ids()
        root = _label(session, "root")
        await sessions.append(root)
        await checkpoints.save(ns, run, {"v": 1}, version=1)
        tx = _transaction(shared_stores)

        async def commit() -> None:
            async with tx:
                tx.append(_label(session, "lost", root), expected_leaf_id=root.id)
                tx.save(ns, run, {"v": 2}, version=2, expected_version=0)

        with pytest.raises(CheckpointConflictError):
            await commit()
        assert await sessions.list(session) == [root]
        record = await checkpoints.load(ns, run)
        assert record is not None
        assert (record.version, record.value) == (1, {"v": 1})
        assert tx.entries == ()
        assert tx.records == ()
        # The head did not move: the next append still expects the root.
        after = _label(session, "after", root)
        await sessions.append(after, expected_leaf_id=root.id)

    @pytest.mark.anyio
    async def test_a_session_conflict_rolls_back_the_save(
        self, shared_stores: tuple[CheckpointStore, SessionStore]
    ) -> None:
        """A moved head refuses the append and the checkpoint save queued before it."""
        checkpoints, sessions = shared_stores
        ns, run, session = _ids()
        root = _label(session, "root")
        await sessions.append(root)
        child = _label(session, "child", root)
        await sessions.append(child)

        async def commit() -> None:
            async with _transaction(shared_stores) as tx:
                tx.save(ns, run, {"v": 1}, version=1, expected_version=0)
                tx.append(_label(session, "late", root), expected_leaf_id=root.id)

        with pytest.raises(SessionConflictError):
            await commit()
        assert await checkpoints.load(ns, run) is None
        assert await sessions.list(session) == [root, child]

    @pytest.mark.anyio
    async def test_a_foreign_parent_rolls_back_everything(
        self, shared_stores: tuple[CheckpointStore, SessionStore]
    ) -> None:
        """A parent outside the session is refused as not found; nothing is written."""
        checkpoints, sessions = shared_stores
        ns, run, session = _ids()
        stranger = _label(f"{session}-other", "elsewhere")
        await sessions.append(stranger)
        ok = _label(session, "ok")

        async def commit() -> None:
            async with _transaction(shared_stores) as tx:
                tx.append(ok)
                tx.save(ns, run, {"v": 1}, version=1)
                tx.append(_label(session, "bad", stranger))

        with pytest.raises(SessionEntryNotFoundError):
            await commit()
        assert await sessions.list(session) == []
        assert await checkpoints.load(ns, run) is None

    @pytest.mark.anyio
    async def test_an_exception_in_the_block_writes_nothing(
        self, shared_stores: tuple[CheckpointStore, SessionStore]
    ) -> None:
        """Leaving the block with an exception discards the queued writes."""
        checkpoints, sessions = shared_stores
        ns, run, session = _ids()

        async def fail() -> None:
            async with _transaction(shared_stores) as tx:
                tx.append(_label(session, "never"))
                tx.save(ns, run, {"v": 1}, version=1)
                raise RuntimeError("host failure")

        with pytest.raises(RuntimeError, match="host failure"):
            await fail()
        assert await sessions.list(session) == []
        assert await checkpoints.load(ns, run) is None

    @pytest.mark.anyio
    async def test_bad_arguments_fail_when_queued(
        self, shared_stores: tuple[CheckpointStore, SessionStore]
    ) -> None:
        """Malformed writes raise at once, like the stores' own methods, before any I/O."""
        checkpoints, sessions = shared_stores
        ns, run, session = _ids()
        async with _transaction(shared_stores) as tx:
            with pytest.raises(InvalidCheckpointError):
                tx.save(ns, run, {"v": 1}, version=0)
            with pytest.raises(InvalidCheckpointError):
                tx.save(ns, run, {"not json": object()}, version=1)
            with pytest.raises(TypeError):
                tx.append("not an entry")
            tx.append(_label(session, "kept"))
        assert [e.label for e in await sessions.list(session)] == ["kept"]
        assert await checkpoints.load(ns, run) is None

    @pytest.mark.anyio
    async def test_an_empty_transaction_is_harmless(
        self, shared_stores: tuple[CheckpointStore, SessionStore]
    ) -> None:
        """A block that queues nothing writes nothing and raises nothing."""
        async with _transaction(shared_stores) as tx:
            pass
        assert tx.entries == ()
        assert tx.records == ()

    @pytest.mark.anyio
    async def test_a_transaction_is_used_once(
        self, shared_stores: tuple[CheckpointStore, SessionStore]
    ) -> None:
        """Writes outside the block, or a second ``async with``, raise
        ``InvalidCheckpointError`` (the one misuse error of every store's transaction)."""
        _, _, session = _ids()
        tx = _transaction(shared_stores)
        with pytest.raises(InvalidCheckpointError, match="not entered yet"):
            tx.append(_label(session, "early"))
        async with tx:
            pass
        with pytest.raises(InvalidCheckpointError, match="finished"):
            tx.append(_label(session, "late"))
        with pytest.raises(InvalidCheckpointError, match="finished"):
            tx.save("ns", "k", {"v": 1}, version=1)
        with pytest.raises(InvalidCheckpointError, match="entered once"):
            async with tx:
                pass

    @pytest.mark.anyio
    async def test_a_record_is_saved_once_per_transaction(
        self, shared_stores: tuple[CheckpointStore, SessionStore]
    ) -> None:
        """A second save of the same record is refused when queued (a store may check every
        write before the first one, so it could not see the first save); the block goes on
        and commits the rest."""
        checkpoints, sessions = shared_stores
        ns, run, session = _ids()
        async with _transaction(shared_stores) as tx:
            tx.save(ns, run, {"v": 1}, version=1, expected_version=0)
            with pytest.raises(InvalidCheckpointError, match="once"):
                tx.save(ns, run, {"v": 2}, version=2, expected_version=1)
            tx.save(ns, f"{run}-other", {"v": 1}, version=1)
            tx.append(_label(session, "kept"))
        assert [(r.key, r.version) for r in tx.records] == [(run, 1), (f"{run}-other", 1)]
        record = await checkpoints.load(ns, run)
        assert record is not None
        assert (record.version, record.value) == (1, {"v": 1})
        assert [e.label for e in await sessions.list(session)] == ["kept"]

    @pytest.mark.anyio
    async def test_a_save_request_is_queued_like_a_save(
        self, shared_stores: tuple[CheckpointStore, SessionStore]
    ) -> None:
        """``save_request`` takes the request ``validate_save`` builds (as the durable writer
        queues it) and refuses anything else before queueing."""
        checkpoints, _ = shared_stores
        ns, run, _ = _ids()
        request = validate_save(ns, run, {"status": "running"}, version=1, expected_version=0)
        async with _transaction(shared_stores) as tx:
            with pytest.raises(TypeError):
                tx.save_request({"namespace": ns})
            tx.save_request(request)
        assert [(r.key, r.version, r.value) for r in tx.records] == [
            (run, 1, {"status": "running"})
        ]
        record = await checkpoints.load(ns, run)
        assert record is not None
        assert record.value == {"status": "running"}
