"""The conformance suite of the optional checkpoint status index."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from ..errors import CheckpointConflictError
from ..stores import CheckpointStatusIndex, InvalidCheckpointError

__all__ = ("CheckpointStatusIndexConformance",)


def _namespace() -> str:
    return f"prism.status-index.{uuid.uuid4().hex}"


def _owner() -> dict[str, str]:
    return {"tenant_id": f"t-{uuid.uuid4().hex}"}


def _keys(page: Any) -> list[str]:
    return [record.key for record in page.records]


class CheckpointStatusIndexConformance:
    """The behaviour of a store that implements :class:`~prism_core.CheckpointStatusIndex`.

    Subclass it like :class:`~prism_core.testing.CheckpointStoreConformance`, with a
    ``checkpoint_store`` fixture yielding a fresh, open store. Every test writes into its own
    namespace under its own owner, so a shared server may hold other records.
    """

    @pytest.mark.anyio
    async def test_store_declares_the_capability(self, checkpoint_store: Any) -> None:
        """The lister discovers the index with ``isinstance``."""
        assert isinstance(checkpoint_store, CheckpointStatusIndex)

    @pytest.mark.anyio
    async def test_lists_one_status_in_key_order_and_pages(self, checkpoint_store: Any) -> None:
        """Only records of the status asked for, in key order, across pages."""
        ns, owner = _namespace(), _owner()
        for index in range(7):
            status = "running" if index % 2 == 0 else "suspended"
            await checkpoint_store.save(
                ns, f"k{index}", {"status": status, "i": index}, version=1, ownership=owner
            )
        first = await checkpoint_store.list_by_status(ns, "running", ownership=owner, limit=3)
        assert _keys(first) == ["k0", "k2", "k4"]
        assert [record.value["i"] for record in first.records] == [0, 2, 4]
        assert first.cursor is not None
        second = await checkpoint_store.list_by_status(
            ns, "running", ownership=owner, limit=3, cursor=first.cursor
        )
        assert _keys(second) == ["k6"]
        assert second.cursor is None
        suspended = await checkpoint_store.list_by_status(ns, "suspended", ownership=owner)
        assert _keys(suspended) == ["k1", "k3", "k5"]
        assert await checkpoint_store.list_by_status(ns, "failed", ownership=owner) == type(first)(
            ()
        )

    @pytest.mark.anyio
    async def test_a_save_moves_the_record_between_statuses(self, checkpoint_store: Any) -> None:
        """A new status takes the record out of the old status's pages at once."""
        ns, owner = _namespace(), _owner()
        await checkpoint_store.save(ns, "run", {"status": "running"}, version=1, ownership=owner)
        await checkpoint_store.save(ns, "run", {"status": "running"}, version=2, ownership=owner)
        page = await checkpoint_store.list_by_status(ns, "running", ownership=owner)
        assert [(r.key, r.version) for r in page.records] == [("run", 2)]
        await checkpoint_store.save(ns, "run", {"status": "succeeded"}, version=3, ownership=owner)
        assert _keys(await checkpoint_store.list_by_status(ns, "running", ownership=owner)) == []
        done = await checkpoint_store.list_by_status(ns, "succeeded", ownership=owner)
        assert [(r.key, r.version, r.value) for r in done.records] == [
            ("run", 3, {"status": "succeeded"})
        ]
        await checkpoint_store.save(ns, "run", {"no": "status"}, version=4, ownership=owner)
        assert _keys(await checkpoint_store.list_by_status(ns, "succeeded", ownership=owner)) == []

    @pytest.mark.anyio
    async def test_delete_and_conflicts_keep_the_index_exact(self, checkpoint_store: Any) -> None:
        """A deleted record leaves the index; a refused save changes nothing."""
        ns, owner = _namespace(), _owner()
        await checkpoint_store.save(ns, "a", {"status": "running"}, version=1, ownership=owner)
        await checkpoint_store.save(ns, "b", {"status": "running"}, version=1, ownership=owner)
        with pytest.raises(CheckpointConflictError):
            await checkpoint_store.save(
                ns, "b", {"status": "failed"}, version=2, expected_version=5, ownership=owner
            )
        assert await checkpoint_store.delete(ns, "a", ownership=owner)
        assert _keys(await checkpoint_store.list_by_status(ns, "running", ownership=owner)) == ["b"]
        assert _keys(await checkpoint_store.list_by_status(ns, "failed", ownership=owner)) == []
        await checkpoint_store.save(ns, "a", {"status": "failed"}, version=1, ownership=owner)
        assert _keys(await checkpoint_store.list_by_status(ns, "running", ownership=owner)) == ["b"]
        assert _keys(await checkpoint_store.list_by_status(ns, "failed", ownership=owner)) == ["a"]

    @pytest.mark.anyio
    async def test_owners_and_namespaces_are_separate(self, checkpoint_store: Any) -> None:
        """Foreign owners' records and other namespaces are never listed."""
        ns, other_ns, owner, stranger = _namespace(), _namespace(), _owner(), _owner()
        await checkpoint_store.save(ns, "mine", {"status": "running"}, version=1, ownership=owner)
        await checkpoint_store.save(
            ns, "theirs", {"status": "running"}, version=1, ownership=stranger
        )
        await checkpoint_store.save(ns, "unowned", {"status": "running"}, version=1)
        await checkpoint_store.save(
            other_ns, "elsewhere", {"status": "running"}, version=1, ownership=owner
        )
        await checkpoint_store.save(ns, "listy", ["status", "running"], version=1, ownership=owner)
        assert _keys(await checkpoint_store.list_by_status(ns, "running", ownership=owner)) == [
            "mine"
        ]
        assert _keys(await checkpoint_store.list_by_status(ns, "running", ownership=stranger)) == [
            "theirs"
        ]
        assert _keys(await checkpoint_store.list_by_status(ns, "running")) == ["unowned"]
        assert _keys(await checkpoint_store.list_by_status(ns, "running", ownership={})) == [
            "unowned"
        ]

    @pytest.mark.anyio
    async def test_malformed_arguments_are_refused(self, checkpoint_store: Any) -> None:
        """Bad status, limit, cursor or namespace: ``InvalidCheckpointError`` before any I/O."""
        ns = _namespace()
        for kwargs in (
            {"limit": 0},
            {"limit": 1001},
            {"cursor": "not-a-cursor"},
        ):
            with pytest.raises(InvalidCheckpointError):
                await checkpoint_store.list_by_status(ns, "running", **kwargs)
        for status in ("", None, 3, "x" * 65):
            with pytest.raises(InvalidCheckpointError):
                await checkpoint_store.list_by_status(ns, status)
        with pytest.raises(InvalidCheckpointError):
            await checkpoint_store.list_by_status("", "running")
