"""Run wake-ups of the Redis stores: the conformance suite, then a lost subscription."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import pytest
import redis.asyncio as aioredis

from prism_core.stores import CheckpointStoreError
from prism_core.testing import RunWakeupsConformance
from prism_store_redis import create_redis_checkpoint_store
from prism_store_redis._wakeups import wake_channel
from tests.conftest import REDIS_URL

WOKEN_S = 60.0


def subscribers(client: aioredis.Redis, prefix: str) -> Callable[[], Awaitable[int]]:
    """An ``open_watches`` counter: the subscribers of ``prefix``'s channel."""

    async def count() -> int:
        ((_, number),) = await client.pubsub_numsub(wake_channel(prefix))
        return int(number)

    return count


class TestRedisWakeups(RunWakeupsConformance):
    """Stores that open their own clients from a URL, each test under its own prefix."""

    @pytest.fixture
    async def wakeup_store(self, redis_client: aioredis.Redis, prefix: str) -> AsyncIterator[Any]:
        """A store under the test's prefix."""
        async with create_redis_checkpoint_store(REDIS_URL, prefix=prefix) as store:
            yield store

    @pytest.fixture
    def wakeup_store_factory(self, prefix: str) -> Callable[[], Any]:
        """Another store, with its own client, under the same prefix."""
        return lambda: create_redis_checkpoint_store(REDIS_URL, prefix=prefix)

    @pytest.fixture
    def foreign_wakeup_store_factory(self, prefix: str) -> Callable[[], Any]:
        """A store on the same server under another prefix."""
        return lambda: create_redis_checkpoint_store(REDIS_URL, prefix=f"{prefix}-other")

    @pytest.fixture
    def open_watches(
        self, redis_client: aioredis.Redis, prefix: str
    ) -> Callable[[], Awaitable[int]]:
        """The server's count of the channel's subscribers."""
        return subscribers(redis_client, prefix)


class TestRedisWakeupsDecodingClient(TestRedisWakeups):
    """The store on a caller-owned client that decodes responses to ``str``."""

    @pytest.fixture
    async def wakeup_store(self, redis_client: aioredis.Redis, prefix: str) -> AsyncIterator[Any]:
        """A store on a ``decode_responses=True`` client the test owns."""
        client = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
        try:
            async with create_redis_checkpoint_store(client, prefix=prefix) as store:
                yield store
        finally:
            await client.aclose()


def test_the_channel_is_under_the_prefix() -> None:
    """``<prefix>:wake``: beside the store's keys, never one of them."""
    assert wake_channel("prism") == "prism:wake"


@pytest.mark.anyio
async def test_a_watch_subscribes_again_after_its_connection_is_killed(
    redis_client: aioredis.Redis, prefix: str
) -> None:
    """The server drops the subscriber's connection: the watch subscribes again (redis-py's
    retry, or a new subscription) and notifications reach it again."""
    count = subscribers(redis_client, prefix)
    name = f"wake-{uuid.uuid4().hex}"
    url = f"{REDIS_URL}{'&' if '?' in REDIS_URL else '?'}client_name={name}"
    async with (
        create_redis_checkpoint_store(url, prefix=prefix) as store,
        store.watch_runs() as watch,
    ):
        assert await count() == 1
        # Only this watch's connection (the server is shared): named, and subscribed.
        clients = await redis_client.client_list(_type="pubsub")
        (mine,) = [c["id"] for c in clients if c.get("name") == name]
        assert await redis_client.client_kill_filter(_id=mine) == 1
        with anyio.fail_after(WOKEN_S):
            while await count() != 1:
                await watch.wait(0.2)
        await store.notify_runs()
        assert await watch.wait(WOKEN_S)


@pytest.mark.anyio
async def test_a_closed_store_refuses(prefix: str) -> None:
    """A closed store neither notifies nor watches (its own calls' error)."""
    store = create_redis_checkpoint_store(REDIS_URL, prefix=prefix)
    await store.aclose()
    with pytest.raises(CheckpointStoreError, match="closed"):
        await store.notify_runs()
    with pytest.raises(CheckpointStoreError, match="closed"):
        async with store.watch_runs():
            pass
