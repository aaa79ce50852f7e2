"""The memory store's status index, through the kernel's conformance suite."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from prism_core import MemoryCheckpointStore, create_memory_checkpoint_store
from prism_core.testing import (
    CheckpointStampConformance,
    CheckpointStatusIndexConformance,
    LeaseRenewalConformance,
)


class TestMemoryStatusIndex(CheckpointStatusIndexConformance):
    """The status index suite on the memory store."""

    @pytest.fixture
    async def checkpoint_store(self) -> AsyncIterator[MemoryCheckpointStore]:
        """A fresh memory store."""
        async with create_memory_checkpoint_store() as store:
            yield store


class TestMemoryLeaseRenewal(LeaseRenewalConformance):
    """The in-place lease renewal suite on the memory store."""

    @pytest.fixture
    async def checkpoint_store(self) -> AsyncIterator[MemoryCheckpointStore]:
        """A fresh memory store."""
        async with create_memory_checkpoint_store() as store:
            yield store


class TestMemoryStamp(CheckpointStampConformance):
    """The stamp read suite on the memory store."""

    @pytest.fixture
    async def checkpoint_store(self) -> AsyncIterator[MemoryCheckpointStore]:
        """A fresh memory store."""
        async with create_memory_checkpoint_store() as store:
            yield store
