"""The Redis stores keep the effect ledger and delete sessions (the kernel's suites)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from prism_core.testing import (
    EffectLedgerConformance,
    SessionDeletionConformance,
    SharedCommitLedgerConformance,
)
from prism_store_redis import (
    create_redis_checkpoint_store,
    create_redis_session_store,
    open_redis_stores,
)
from tests.conftest import REDIS_URL
from tests.core.test_ledger_runs import SCENARIOS


class TestRedisEffectLedger(EffectLedgerConformance):
    """The checkpoint store keeps an effect ledger."""

    @pytest.fixture
    async def checkpoint_store(
        self, redis_client: aioredis.Redis, prefix: str
    ) -> AsyncIterator[Any]:
        """A fresh store under the test's private prefix."""
        async with create_redis_checkpoint_store(REDIS_URL, prefix=prefix) as store:
            yield store


class TestRedisEffectLedgerDecodingClient(EffectLedgerConformance):
    """The ledger on a caller-owned client that decodes responses to ``str``."""

    @pytest.fixture
    async def checkpoint_store(
        self, redis_client: aioredis.Redis, prefix: str
    ) -> AsyncIterator[Any]:
        """A store on a decoding client."""
        client = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
        try:
            yield create_redis_checkpoint_store(client, prefix=prefix)
        finally:
            await client.aclose()


class TestRedisSharedCommitLedger(SharedCommitLedgerConformance):
    """A shared commit writes its save's ledger rows in its one script."""

    @pytest.fixture
    async def shared_stores(self, redis_client: aioredis.Redis, prefix: str) -> AsyncIterator[Any]:
        """Both stores on one client."""
        async with open_redis_stores(REDIS_URL, prefix=prefix) as stores:
            yield stores.checkpoints, stores.sessions


class TestRedisSessionDeletion(SessionDeletionConformance):
    """The session store deletes a session."""

    @pytest.fixture
    async def session_store(self, redis_client: aioredis.Redis, prefix: str) -> AsyncIterator[Any]:
        """A fresh session store under the test's private prefix."""
        async with create_redis_session_store(REDIS_URL, prefix=prefix) as store:
            yield store


@pytest.mark.anyio
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
async def test_ledger_scenarios(scenario: Any, redis_client: aioredis.Redis, prefix: str) -> None:
    """Each ledger scenario of real runs holds on the Redis stores (opened as a pair)."""
    async with open_redis_stores(REDIS_URL, prefix=prefix) as stores:
        await scenario(stores.checkpoints, stores.sessions)
