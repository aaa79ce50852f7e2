"""``capability(store, Protocol)``: the one way the kernel asks a store for an optional
capability, and the capabilities each built-in memory store offers."""

from __future__ import annotations

from typing import Any, Protocol

import pytest

from prism_core.stores import (
    BranchAndRunTailReader,
    CheckpointAndBranchLoader,
    CheckpointStatusIndex,
    CheckpointStore,
    LeaseRenewalStore,
    SessionStore,
    SharedCommitStore,
    capability,
    create_memory_checkpoint_store,
    create_memory_session_store,
    shared_transaction,
)


class Plain:
    """A checkpoint store's four methods and nothing optional."""

    async def load(self, *args: Any, **kw: Any) -> Any:
        return None

    async def save(self, *args: Any, **kw: Any) -> Any:
        raise NotImplementedError

    async def save_request(self, request: Any) -> Any:
        raise NotImplementedError

    async def delete(self, *args: Any, **kw: Any) -> bool:
        return False

    async def list(self, *args: Any, **kw: Any) -> Any:
        raise NotImplementedError

    async def aclose(self) -> None:
        pass


class Renewing(Plain):
    """The same, with lease renewal in place."""

    async def renew_lease(self, *args: Any, **kw: Any) -> None:
        pass


def test_a_store_with_the_methods_is_returned_as_the_capability() -> None:
    """The answer is the store itself when it has the capability's methods, else ``None``."""
    plain, renewing = Plain(), Renewing()
    assert capability(renewing, LeaseRenewalStore) is renewing
    assert capability(plain, LeaseRenewalStore) is None
    assert capability(plain, SharedCommitStore) is None
    assert capability(plain, CheckpointStatusIndex) is None
    assert capability(plain, CheckpointStore) is plain


def test_the_memory_stores_offer_what_they_implement() -> None:
    """The memory checkpoint store commits together, indexes statuses and renews leases; it
    has no combined load-and-branch read. The memory session store reads a branch and a run
    tail in one call."""
    checkpoints, sessions = create_memory_checkpoint_store(), create_memory_session_store()
    for protocol in (SharedCommitStore, CheckpointStatusIndex, LeaseRenewalStore):
        assert capability(checkpoints, protocol) is checkpoints
    assert capability(checkpoints, CheckpointAndBranchLoader) is None
    assert capability(sessions, BranchAndRunTailReader) is sessions
    assert capability(sessions, SessionStore) is sessions
    assert shared_transaction(checkpoints, sessions) is not None
    assert shared_transaction(Plain(), sessions) is None
    assert shared_transaction(checkpoints, object()) is None


class NotRuntime(Protocol):
    def renew_lease(self) -> None: ...


@pytest.mark.parametrize("protocol", [NotRuntime, int, "LeaseRenewalStore", None])
def test_anything_but_a_runtime_checkable_protocol_is_refused(protocol: Any) -> None:
    """A class that is not a runtime-checkable protocol (or not a class) is a caller's
    mistake, not a missing capability."""
    with pytest.raises(TypeError, match="runtime-checkable Protocol"):
        capability(Renewing(), protocol)


def test_the_answer_is_isinstance_s_for_classes_and_instances_alike() -> None:
    """A store's class that has the methods answers at once, and the answer stays the same
    when asked again; a store that has them only as its own attributes, or one whose
    methods were taken away, is answered as ``isinstance`` answers it."""
    renewing = Renewing()
    assert capability(renewing, LeaseRenewalStore) is renewing
    assert capability(renewing, LeaseRenewalStore) is renewing
    attached = Plain()
    attached.renew_lease = lambda *args, **kw: None  # type: ignore[attr-defined]
    assert isinstance(attached, LeaseRenewalStore)
    assert capability(attached, LeaseRenewalStore) is attached
    assert capability(Plain(), LeaseRenewalStore) is None

    class Later(Plain):
        pass

    later = Later()
    assert capability(later, LeaseRenewalStore) is None
    Later.renew_lease = Renewing.renew_lease  # type: ignore[attr-defined]
    assert isinstance(later, LeaseRenewalStore)
    assert capability(later, LeaseRenewalStore) is later
