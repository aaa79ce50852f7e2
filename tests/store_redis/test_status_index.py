"""The Redis store's status index: the conformance suite and its key layout."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from prism_core.testing import CheckpointStatusIndexConformance
from prism_store_redis import RedisCheckpointStore, create_redis_checkpoint_store
from tests.conftest import REDIS_URL


class TestRedisStatusIndex(CheckpointStatusIndexConformance):
    """The status index suite on the Redis checkpoint store."""

    @pytest.fixture
    async def checkpoint_store(
        self, redis_client: aioredis.Redis, prefix: str
    ) -> AsyncIterator[RedisCheckpointStore]:
        """A fresh store under the test's private prefix."""
        async with create_redis_checkpoint_store(REDIS_URL, prefix=prefix) as store:
            yield store


@pytest.mark.anyio
async def test_status_sets_follow_the_record(redis_client: aioredis.Redis, prefix: str) -> None:
    """One sorted set per owner and status; a save moves the member, a delete removes it."""
    async with create_redis_checkpoint_store(REDIS_URL, prefix=prefix) as store:
        owner = {"tenant_id": "t1"}
        await store.save("ns", "run", {"status": "running"}, version=1, ownership=owner)
        running = f'{prefix}:cpst:7:running:{{"tenant_id":"t1"}}'.encode()
        suspended = f'{prefix}:cpst:9:suspended:{{"tenant_id":"t1"}}'.encode()
        assert await redis_client.zrange(running, 0, -1) == [b"ns\x00run"]
        await store.save("ns", "run", {"status": "suspended"}, version=2, ownership=owner)
        assert await redis_client.exists(running) == 0
        assert await redis_client.zrange(suspended, 0, -1) == [b"ns\x00run"]
        assert await redis_client.hget(f"{prefix}:cp:2:ns:run", "st") == b"suspended"
        assert await store.delete("ns", "run", ownership=owner)
        assert await redis_client.exists(suspended) == 0


@pytest.mark.anyio
async def test_an_expired_record_leaves_its_status_set_when_listed(
    redis_client: aioredis.Redis, prefix: str
) -> None:
    """A finished record that expired (TTL) is dropped from its set by the next listing."""
    async with create_redis_checkpoint_store(
        REDIS_URL, prefix=prefix, finished_ttl_seconds=60
    ) as store:
        await store.save("ns", "old", {"status": "succeeded"}, version=1)
        await store.save("ns", "new", {"status": "succeeded"}, version=1)
        await redis_client.delete(f"{prefix}:cp:2:ns:old")  # what expiry does
        page = await store.list_by_status("ns", "succeeded")
        assert [record.key for record in page.records] == ["new"]
        assert await redis_client.zrange(f"{prefix}:cpst:9:succeeded:", 0, -1) == [b"ns\x00new"]
