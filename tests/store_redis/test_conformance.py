"""The kernel's store conformance suites, run against the Redis stores."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
import redis.asyncio as aioredis

from prism_core.stores import shared_transaction
from prism_core.testing import (
    CheckpointBatchConformance,
    CheckpointStoreConformance,
    SessionStoreConformance,
    SharedCommitConformance,
)
from prism_store_redis import (
    RedisCheckpointStore,
    RedisSessionStore,
    create_redis_checkpoint_store,
    create_redis_session_store,
    open_redis_stores,
)
from tests.conftest import REDIS_URL


class TestRedisCheckpointStore(CheckpointStoreConformance):
    """The checkpoint suite on a store that opens its own client from a URL."""

    @pytest.fixture
    async def checkpoint_store(
        self, redis_client: aioredis.Redis, prefix: str
    ) -> AsyncIterator[RedisCheckpointStore]:
        """A fresh store under the test's private prefix."""
        async with create_redis_checkpoint_store(REDIS_URL, prefix=prefix) as store:
            yield store

    @pytest.fixture
    def checkpoint_store_factory(self, prefix: str) -> Callable[[], RedisCheckpointStore]:
        """Another store with its own client, under the same prefix."""
        return lambda: create_redis_checkpoint_store(REDIS_URL, prefix=prefix)


class TestRedisCheckpointBatch(CheckpointBatchConformance):
    """Several saves in one script on a store that opens its own client from a URL."""

    @pytest.fixture
    async def checkpoint_store(
        self, redis_client: aioredis.Redis, prefix: str
    ) -> AsyncIterator[RedisCheckpointStore]:
        """A fresh store under the test's private prefix."""
        async with create_redis_checkpoint_store(REDIS_URL, prefix=prefix) as store:
            yield store


class TestRedisCheckpointStoreDecodingClient(CheckpointStoreConformance):
    """The checkpoint suite on a passed client that decodes responses to ``str``."""

    @pytest.fixture
    async def checkpoint_store(
        self, redis_client: aioredis.Redis, prefix: str
    ) -> AsyncIterator[RedisCheckpointStore]:
        """A fresh store on a caller-owned ``decode_responses=True`` client."""
        client = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
        try:
            async with create_redis_checkpoint_store(client, prefix=prefix) as store:
                yield store
        finally:
            await client.aclose()

    @pytest.fixture
    def checkpoint_store_factory(self, prefix: str) -> Callable[[], RedisCheckpointStore]:
        """Another store with its own client, under the same prefix."""
        return lambda: create_redis_checkpoint_store(REDIS_URL, prefix=prefix)


class TestRedisSessionStore(SessionStoreConformance):
    """The session suite on a store that opens its own client from a URL."""

    @pytest.fixture
    async def session_store(
        self, redis_client: aioredis.Redis, prefix: str
    ) -> AsyncIterator[RedisSessionStore]:
        """A fresh store under the test's private prefix."""
        async with create_redis_session_store(REDIS_URL, prefix=prefix) as store:
            yield store

    @pytest.fixture
    def session_store_factory(self, prefix: str) -> Callable[[], RedisSessionStore]:
        """Another store with its own client, under the same prefix."""
        return lambda: create_redis_session_store(REDIS_URL, prefix=prefix)


class TestRedisSessionStoreDecodingClient(SessionStoreConformance):
    """The session suite on a passed client that decodes responses to ``str``."""

    @pytest.fixture
    async def session_store(
        self, redis_client: aioredis.Redis, prefix: str
    ) -> AsyncIterator[RedisSessionStore]:
        """A fresh store on a caller-owned ``decode_responses=True`` client."""
        client = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
        try:
            async with create_redis_session_store(client, prefix=prefix) as store:
                yield store
        finally:
            await client.aclose()

    @pytest.fixture
    def session_store_factory(self, prefix: str) -> Callable[[], RedisSessionStore]:
        """Another store with its own client, under the same prefix."""
        return lambda: create_redis_session_store(REDIS_URL, prefix=prefix)


class TestRedisSharedCommit(SharedCommitConformance):
    """The shared-commit suite on both stores of ``open_redis_stores`` (one client)."""

    @pytest.fixture
    async def shared_stores(
        self, redis_client: aioredis.Redis, prefix: str
    ) -> AsyncIterator[tuple[RedisCheckpointStore, RedisSessionStore]]:
        """Both stores on one client, under the test's private prefix."""
        async with open_redis_stores(REDIS_URL, prefix=prefix) as stores:
            yield stores.checkpoints, stores.sessions


class TestRedisSharedCommitDecodingClient(SharedCommitConformance):
    """The shared-commit suite on a caller-owned client that decodes responses."""

    @pytest.fixture
    async def shared_stores(
        self, redis_client: aioredis.Redis, prefix: str
    ) -> AsyncIterator[tuple[RedisCheckpointStore, RedisSessionStore]]:
        """A checkpoint store on the client and a session store built on that store."""
        client = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
        try:
            checkpoints = create_redis_checkpoint_store(client, prefix=prefix)
            yield checkpoints, create_redis_session_store(checkpoints)
        finally:
            await client.aclose()


@pytest.mark.anyio
async def test_stores_on_different_clients_do_not_commit_together(prefix: str) -> None:
    """Sharing is explicit: two stores opened from the same URL have two clients."""
    checkpoints = create_redis_checkpoint_store(REDIS_URL, prefix=prefix)
    sessions = create_redis_session_store(REDIS_URL, prefix=prefix)
    async with checkpoints, sessions:
        assert shared_transaction(checkpoints, sessions) is None
        shared = create_redis_session_store(checkpoints)
        assert shared.prefix == prefix
        assert shared_transaction(checkpoints, shared) is not None
        await shared.aclose()
        assert shared_transaction(checkpoints, shared) is None
