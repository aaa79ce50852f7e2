"""The conformance suite of the optional in-place lease renewal."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from ..errors import CheckpointConflictError
from ..stores import CheckpointStatusIndex, InvalidCheckpointError, LeaseRenewalStore

__all__ = ("LeaseRenewalConformance",)

_OWNER = {"tenant_id": "t-lease"}


def _namespace() -> str:
    return f"prism.lease.{uuid.uuid4().hex}"


def _running(expires: int) -> dict[str, Any]:
    return {"status": "running", "lease_ms": 30000, "lease_expires_at": expires}


class LeaseRenewalConformance:
    """The behaviour of a store that implements :class:`~prism_core.stores.LeaseRenewalStore`.

    Subclass it like :class:`~prism_core.testing.CheckpointStoreConformance`, with a
    ``checkpoint_store`` fixture yielding a fresh, open store. Every test writes into its own
    namespace, so a shared server may hold other records.
    """

    async def _seed(self, store: Any, ns: str) -> Any:
        return await store.save(
            ns,
            "run",
            _running(1000),
            version=3,
            ownership=_OWNER,
            fencing_token=5,
            metadata={"agent_id": "a1"},
            category="agent-run",
        )

    @pytest.mark.anyio
    async def test_store_declares_the_capability(self, checkpoint_store: Any) -> None:
        """The writer discovers the capability with ``isinstance``."""
        assert isinstance(checkpoint_store, LeaseRenewalStore)

    @pytest.mark.anyio
    async def test_renewal_replaces_the_value_and_keeps_everything_else(
        self, checkpoint_store: Any
    ) -> None:
        """Version, token, metadata, category and creation time stay; value and time move."""
        ns = _namespace()
        saved = await self._seed(checkpoint_store, ns)
        await checkpoint_store.renew_lease(
            ns, "run", _running(2000), version=3, ownership=_OWNER, fencing_token=5
        )
        loaded = await checkpoint_store.load(ns, "run", ownership=_OWNER)
        assert loaded is not None
        assert loaded.value == _running(2000)
        assert loaded.version == 3
        assert loaded.fencing_token == 5
        assert dict(loaded.metadata or {}) == {"agent_id": "a1"}
        assert loaded.category == "agent-run"
        assert loaded.created_at == pytest.approx(saved.created_at, abs=1e-3)
        assert loaded.updated_at >= saved.updated_at - 1e-3
        # The record is still at version 3 for the next compare-and-swap.
        after = await checkpoint_store.save(
            ns, "run", {"status": "succeeded"}, version=4, expected_version=3,
            ownership=_OWNER, fencing_token=5,
        )  # fmt: skip
        assert after.version == 4

    @pytest.mark.anyio
    async def test_a_record_that_moved_on_is_a_conflict_and_unchanged(
        self, checkpoint_store: Any
    ) -> None:
        """Another version, a superseded token, another owner or no record: a conflict that
        writes nothing."""
        ns = _namespace()
        await self._seed(checkpoint_store, ns)
        refused: list[dict[str, Any]] = [
            {"version": 2, "ownership": _OWNER, "fencing_token": 5},
            {"version": 4, "ownership": _OWNER, "fencing_token": 5},
            {"version": 3, "ownership": _OWNER, "fencing_token": 4},
            {"version": 3, "ownership": _OWNER, "fencing_token": None},
            {"version": 3, "ownership": {"tenant_id": "other"}, "fencing_token": 5},
            {"version": 3, "ownership": None, "fencing_token": 5},
        ]
        for arguments in refused:
            with pytest.raises(CheckpointConflictError):
                await checkpoint_store.renew_lease(ns, "run", _running(9999), **arguments)
        with pytest.raises(CheckpointConflictError):
            await checkpoint_store.renew_lease(
                ns, "absent", _running(9999), version=1, ownership=_OWNER, fencing_token=5
            )
        loaded = await checkpoint_store.load(ns, "run", ownership=_OWNER)
        assert loaded is not None
        assert (loaded.version, loaded.value) == (3, _running(1000))
        assert await checkpoint_store.load(ns, "absent", ownership=_OWNER) is None

    @pytest.mark.anyio
    async def test_a_higher_token_renews_like_a_save_would(self, checkpoint_store: Any) -> None:
        """The fencing rule of ``save``: a token not below the stored one passes."""
        ns = _namespace()
        await self._seed(checkpoint_store, ns)
        await checkpoint_store.renew_lease(
            ns, "run", _running(3000), version=3, ownership=_OWNER, fencing_token=6
        )
        loaded = await checkpoint_store.load(ns, "run", ownership=_OWNER)
        assert loaded is not None
        assert loaded.value == _running(3000)
        assert loaded.fencing_token == 5

    @pytest.mark.anyio
    async def test_invalid_arguments_raise_and_write_nothing(self, checkpoint_store: Any) -> None:
        """A value that is not JSON, or a bad name or version, fails before any write."""
        ns = _namespace()
        await self._seed(checkpoint_store, ns)
        for value, version in (({"bad": float("nan")}, 3), (_running(1), 0), (object(), 3)):
            with pytest.raises(InvalidCheckpointError):
                await checkpoint_store.renew_lease(
                    ns, "run", value, version=version, ownership=_OWNER, fencing_token=5
                )
        with pytest.raises(InvalidCheckpointError):
            await checkpoint_store.renew_lease(ns, "", _running(1), version=3, ownership=_OWNER)
        loaded = await checkpoint_store.load(ns, "run", ownership=_OWNER)
        assert loaded is not None
        assert loaded.value == _running(1000)

    @pytest.mark.anyio
    async def test_the_status_index_still_finds_the_run(self, checkpoint_store: Any) -> None:
        """A renewed run stays listed under ``running`` (when the store keeps an index)."""
        ns = _namespace()
        await self._seed(checkpoint_store, ns)
        await checkpoint_store.renew_lease(
            ns, "run", _running(4000), version=3, ownership=_OWNER, fencing_token=5
        )
        if isinstance(checkpoint_store, CheckpointStatusIndex):
            page = await checkpoint_store.list_by_status(ns, "running", ownership=_OWNER)
        else:
            page = await checkpoint_store.list(ns, ownership=_OWNER)
        assert [(record.key, record.value) for record in page.records] == [("run", _running(4000))]
