"""Fixtures for the Redis store tests: a live client, a private key prefix, asyncio only.

redis-py's asyncio client cannot run under trio, so these tests (and the Redis stores) use
anyio's asyncio backend only. Every test writes under its own ``prismtest:<uuid>`` prefix and
deletes those keys afterwards, so the suite can share a Redis server with other users.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from tests.conftest import REDIS_URL, service_unavailable

from ._support import delete_prefix


@pytest.fixture
def anyio_backend() -> str:
    """The Redis stores are asyncio-only (redis-py's client is)."""
    return "asyncio"


@pytest.fixture
async def redis_client() -> AsyncIterator[aioredis.Redis]:
    """A fresh client on the test server; skips (or fails when required) if it is down."""
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        await client.aclose()
        service_unavailable("Redis", f"{REDIS_URL}: {exc}")
    yield client
    await client.aclose()


@pytest.fixture
async def prefix(redis_client: aioredis.Redis) -> AsyncIterator[str]:
    """A key prefix no other test uses; its keys are deleted after the test."""
    value = f"prismtest:{uuid.uuid4().hex}"
    yield value
    await delete_prefix(redis_client, value)
