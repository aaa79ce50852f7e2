"""The memory stores pass the effect ledger and session deletion conformance suites."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from prism_core.stores import create_memory_checkpoint_store, create_memory_session_store
from prism_core.testing import (
    EffectLedgerConformance,
    SessionDeletionConformance,
    SharedCommitLedgerConformance,
)


class TestMemoryEffectLedger(EffectLedgerConformance):
    """The memory checkpoint store keeps an effect ledger."""

    @pytest.fixture
    async def checkpoint_store(self) -> AsyncIterator[Any]:
        """A fresh memory store."""
        async with create_memory_checkpoint_store() as store:
            yield store


class TestMemorySharedCommitLedger(SharedCommitLedgerConformance):
    """A memory shared commit carries the ledger rows of its save."""

    @pytest.fixture
    def shared_stores(self) -> tuple[Any, Any]:
        """A fresh pair of memory stores."""
        return create_memory_checkpoint_store(), create_memory_session_store()


class TestMemorySessionDeletion(SessionDeletionConformance):
    """The memory session store deletes a session."""

    @pytest.fixture
    def session_store(self) -> Any:
        """A fresh memory session store."""
        return create_memory_session_store()
