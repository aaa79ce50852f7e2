"""The conformance suite of the optional stamp read (a record's version and fencing token)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from ..stores import CheckpointStamp, CheckpointStampReader, InvalidCheckpointError

__all__ = ("CheckpointStampConformance",)

_OWNER = {"tenant_id": "t-stamp"}


def _namespace() -> str:
    return f"prism.stamp.{uuid.uuid4().hex}"


class CheckpointStampConformance:
    """The behaviour of a store that implements
    :class:`~prism_core.stores.CheckpointStampReader`: the stamp is what ``load`` would give.

    Subclass it like :class:`~prism_core.testing.CheckpointStoreConformance`, with a
    ``checkpoint_store`` fixture yielding a fresh, open store. Every test writes into its own
    namespace, so a shared server may hold other records.
    """

    @pytest.mark.anyio
    async def test_store_declares_the_capability(self, checkpoint_store: Any) -> None:
        """The durable writer discovers the capability with ``isinstance``."""
        assert isinstance(checkpoint_store, CheckpointStampReader)

    @pytest.mark.anyio
    async def test_the_stamp_follows_every_save(self, checkpoint_store: Any) -> None:
        """Version and fencing token as ``load`` reads them, after a create and after a
        compare-and-swap that raised the token."""
        ns = _namespace()
        await checkpoint_store.save(ns, "run", {"n": 1}, version=1, expected_version=0)
        assert await checkpoint_store.load_stamp(ns, "run") == CheckpointStamp(1, None)
        await checkpoint_store.save(
            ns, "run", {"n": 2}, version=4, expected_version=1, fencing_token=7
        )
        stamp = await checkpoint_store.load_stamp(ns, "run")
        record = await checkpoint_store.load(ns, "run")
        assert stamp == CheckpointStamp(4, 7)
        assert (record.version, record.fencing_token) == tuple(stamp)

    @pytest.mark.anyio
    async def test_absent_and_foreign_records_have_no_stamp(self, checkpoint_store: Any) -> None:
        """``None`` for an unknown key, for another owner's record, and for an owned record
        read without its ownership (the ``load`` rules)."""
        ns = _namespace()
        assert await checkpoint_store.load_stamp(ns, "missing") is None
        await checkpoint_store.save(ns, "owned", {"n": 1}, version=2, ownership=_OWNER)
        assert await checkpoint_store.load_stamp(ns, "owned", ownership=_OWNER) == (2, None)
        assert await checkpoint_store.load_stamp(ns, "owned") is None
        assert await checkpoint_store.load_stamp(ns, "owned", ownership={"tenant_id": "x"}) is None

    @pytest.mark.anyio
    async def test_a_deleted_record_has_no_stamp(self, checkpoint_store: Any) -> None:
        """After ``delete`` the stamp reads ``None``."""
        ns = _namespace()
        await checkpoint_store.save(ns, "run", {"n": 1}, version=1)
        assert await checkpoint_store.delete(ns, "run")
        assert await checkpoint_store.load_stamp(ns, "run") is None

    @pytest.mark.anyio
    async def test_invalid_names_are_refused(self, checkpoint_store: Any) -> None:
        """An empty namespace or key raises as ``load`` does."""
        with pytest.raises(InvalidCheckpointError):
            await checkpoint_store.load_stamp("", "run")
        with pytest.raises(InvalidCheckpointError):
            await checkpoint_store.load_stamp(_namespace(), "")
