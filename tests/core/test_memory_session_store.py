"""The memory session store runs the session store conformance suite."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from prism_core.sessions import SessionStore, create_memory_session_store
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
