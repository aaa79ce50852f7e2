"""The memory session store runs the session store conformance suite."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from prism_core.records import (
    BranchAndRunTail,
    BranchAndRunTailReader,
    SessionEntryNotFoundError,
    SessionStore,
    create_memory_session_store,
    create_session_entry,
    read_branch_and_run_tail,
)
from prism_core.records._run_tail import PrefetchedBranchAndRunTail
from prism_core.testing import SessionStoreConformance


class TestMemorySessionStore(SessionStoreConformance):
    """The memory store passes the session store conformance suite."""

    @pytest.fixture
    async def session_store(self) -> AsyncIterator[SessionStore]:
        """A fresh memory store, closed after the test."""
        async with create_memory_session_store() as store:
            yield store

    @pytest.fixture
    def session_store_factory(self, session_store: SessionStore) -> Callable[[], SessionStore]:
        """The same instance: two memory stores never share entries, so there is no other."""
        return lambda: session_store


def test_memory_session_store_satisfies_the_protocol() -> None:
    """The memory session store is a ``SessionStore``."""
    assert isinstance(create_memory_session_store(), SessionStore)


def test_memory_session_store_reads_branch_and_run_tail_itself() -> None:
    """The memory store offers the one-call branch-and-run-tail read."""
    assert isinstance(create_memory_session_store(), BranchAndRunTailReader)


@pytest.mark.anyio
async def test_stores_without_the_capability_fall_back_to_list() -> None:
    """A store with only the protocol's methods is answered from one ``list`` call."""
    inner = create_memory_session_store()

    class ListOnly:
        """Forwards the ``SessionStore`` methods and counts the calls."""

        def __init__(self) -> None:
            self.calls: list[str] = []

        async def append(self, entry: Any, **kw: Any) -> Any:
            return await inner.append(entry, **kw)

        async def list(self, session_id: str) -> Any:
            self.calls.append("list")
            return await inner.list(session_id)

        async def get(self, entry_id: str) -> Any:
            return await inner.get(entry_id)

        async def read_branch_path(self, session_id: str, leaf_id: str | None) -> Any:
            return await inner.read_branch_path(session_id, leaf_id)

        async def aclose(self) -> None:
            await inner.aclose()

    store = ListOnly()
    assert not isinstance(store, BranchAndRunTailReader)
    root = await store.append(
        create_session_entry(session_id="s", kind="label", label="root", run_id="r")
    )
    later = await store.append(
        create_session_entry(session_id="s", kind="label", label="x", parent_id=root.id, run_id="r")
    )
    read = await read_branch_and_run_tail(store, "s", root.id, "r")
    assert (read.path, read.tail, store.calls) == ([root], [later], ["list"])
    with pytest.raises(SessionEntryNotFoundError):
        await read_branch_and_run_tail(store, "s", "entry_missing", "r")


@pytest.mark.anyio
async def test_a_prefetched_read_is_used_only_for_its_store_and_ids() -> None:
    """A prefetched read answers only the read of the same store and ids; any other read
    goes to the store."""
    store = create_memory_session_store()
    other = create_memory_session_store()
    root = await store.append(
        create_session_entry(session_id="s", kind="label", label="root", run_id="r")
    )
    canned = BranchAndRunTail(path=[], tail=[root])

    def prefetched(target: Any, session_id: str, leaf_id: str | None, run_id: str) -> Any:
        return PrefetchedBranchAndRunTail(
            store=target,
            session_id=session_id,
            leaf_id=leaf_id,
            run_id=run_id,
            decode=lambda: canned,
        )

    own = await store.read_branch_and_run_tail("s", root.id, "r")
    assert own != canned
    used = prefetched(store, "s", root.id, "r")
    assert await read_branch_and_run_tail(store, "s", root.id, "r", used) is canned
    for stale in (
        prefetched(other, "s", root.id, "r"),
        prefetched(store, "t", root.id, "r"),
        prefetched(store, "s", None, "r"),
        prefetched(store, "s", root.id, "q"),
    ):
        assert await read_branch_and_run_tail(store, "s", root.id, "r", stale) == own
