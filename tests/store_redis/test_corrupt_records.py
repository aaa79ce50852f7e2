"""Corrupt hashes written with redis-py: typed errors from the Redis store and the durable layer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from prism_core import AGENT_RUN_NAMESPACE
from prism_store_redis import RedisCheckpointStore, create_redis_checkpoint_store
from prism_store_redis._keys import CheckpointKeys
from tests.conftest import REDIS_URL
from tests.core.records_support import (
    RUN_ID,
    expect_corrupt,
    expect_listed_around,
    expect_metadata_absent,
    expect_not_a_state,
    seed,
    seed_neighbours,
)

pytestmark = pytest.mark.anyio


class Hash:
    """Reads and rewrites the seeded record's hash behind the store's back."""

    def __init__(self, client: aioredis.Redis, prefix: str) -> None:
        self.client = client
        self.key = CheckpointKeys(prefix).record(AGENT_RUN_NAMESPACE, RUN_ID)

    async def set(self, **fields: str | bytes) -> None:
        """``HSET`` these fields to exactly these values."""
        await self.client.hset(self.key, mapping=fields)  # type: ignore[arg-type]

    async def raw(self) -> Any:
        """Every field of the hash, as Redis holds it."""
        return await self.client.hgetall(self.key)  # type: ignore[misc]


@pytest.fixture
async def seeded(
    redis_client: aioredis.Redis, prefix: str
) -> AsyncIterator[tuple[RedisCheckpointStore, Hash]]:
    """A store holding one good record under the test's prefix, and its hash."""
    async with create_redis_checkpoint_store(REDIS_URL, prefix=prefix) as store:
        await seed(store)
        yield store, Hash(redis_client, prefix)


@pytest.mark.parametrize("value", ['{"status": "suspen', "", "nul", b"\xff\xfe"])
async def test_value_that_is_not_json(
    seeded: tuple[RedisCheckpointStore, Hash], value: str | bytes
) -> None:
    """A truncated, empty or garbled value field is a typed corrupt-record error."""
    store, record = seeded
    await record.set(value=value)
    await expect_corrupt(store, record.raw)


@pytest.mark.parametrize(
    "fields",
    [{"v": "one"}, {"v": ""}, {"v": "1.5"}, {"fence": "x"}, {"created": "yesterday"}],
)
async def test_number_field_that_is_not_a_number(
    seeded: tuple[RedisCheckpointStore, Hash], fields: dict[str, str]
) -> None:
    """A version, fencing token or timestamp that is not a number is a corrupt record."""
    store, record = seeded
    await record.set(**fields)
    await expect_corrupt(store, record.raw)


@pytest.mark.parametrize("fields", [{"v": "one"}, {"value": '{"status": "suspen'}])
async def test_a_corrupt_record_is_left_out_of_listings_and_named(
    seeded: tuple[RedisCheckpointStore, Hash], fields: dict[str, str]
) -> None:
    """A record rewritten with the client so it cannot be read back, between two good runs:
    every listing returns the good runs and names the corrupt one in ``unreadable``."""
    store, record = seeded
    await seed_neighbours(store)
    await record.set(**fields)
    await expect_listed_around(store)


@pytest.mark.parametrize("value", ["[1, 2]", '"suspended"', "7", "null", '{"status": "x"}'])
async def test_value_that_is_json_but_not_a_state(
    seeded: tuple[RedisCheckpointStore, Hash], value: str
) -> None:
    """JSON that is not a run state is returned by the store and refused by the durable layer."""
    store, record = seeded
    await record.set(value=value)
    await expect_not_a_state(store, record.raw)


@pytest.mark.parametrize("meta", ["not json{", "", '{"n": 1}', "[]", b"\xff"])
async def test_metadata_that_cannot_be_read_is_absent(
    seeded: tuple[RedisCheckpointStore, Hash], meta: str | bytes
) -> None:
    """A sidecar that is not a JSON map of strings reads as absent; the state still loads."""
    store, record = seeded
    await record.set(meta=meta)
    await expect_metadata_absent(store)
