"""The memory checkpoint store's run wake-ups (in-process): the conformance suite."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from prism_core.stores import MemoryCheckpointStore, create_memory_checkpoint_store
from prism_core.testing import RunWakeupsConformance


class TestMemoryWakeups(RunWakeupsConformance):
    """The memory store wakes the watches of its own process, on asyncio and trio."""

    @pytest.fixture
    async def wakeup_store(self) -> AsyncIterator[MemoryCheckpointStore]:
        """A fresh memory store."""
        async with create_memory_checkpoint_store() as store:
            yield store

    @pytest.fixture
    def wakeup_store_factory(
        self, wakeup_store: MemoryCheckpointStore
    ) -> Callable[[], MemoryCheckpointStore]:
        """The same instance: two memory stores never share records, so there is no other."""
        return lambda: wakeup_store

    @pytest.fixture
    def foreign_wakeup_store_factory(self) -> Callable[[], MemoryCheckpointStore]:
        """Another memory store: its own records, its own watches."""
        return create_memory_checkpoint_store

    @pytest.fixture
    def open_watches(self, wakeup_store: MemoryCheckpointStore) -> Callable[[], Awaitable[int]]:
        """The watches the store's in-process wake-ups hold."""

        async def count() -> int:
            return len(wakeup_store._wakeups._watches)

        return count
