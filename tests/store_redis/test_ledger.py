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
from tests import ledger_operations
from tests.conftest import REDIS_URL
from tests.core.durable.test_ledger_runs import SCENARIOS


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


async def _everything(client: aioredis.Redis, prefix: str) -> bytes:
    """Every key under ``prefix`` and every byte of its value (read by type, uncompressed),
    sorted, as bytes."""
    keys = sorted([key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)])
    parts = []
    for key in keys:
        kind = await client.type(key)
        if kind == b"hash":
            value: Any = sorted((await client.hgetall(key)).items())
        elif kind == b"string":
            value = await client.get(key)
        elif kind == b"list":
            value = await client.lrange(key, 0, -1)
        elif kind == b"zset":
            value = await client.zrange(key, 0, -1, withscores=True)
        else:
            value = sorted(await client.smembers(key))
        parts.append(key + b"=" + repr(value).encode())
    return b"\n".join(parts)


@pytest.mark.anyio
async def test_a_preview_writes_nothing(redis_client: aioredis.Redis, prefix: str) -> None:
    """Previews leave every key under the prefix as it was."""
    async with open_redis_stores(REDIS_URL, prefix=prefix) as stores:
        await ledger_operations.a_preview_writes_nothing(
            stores.checkpoints, stores.sessions, lambda: _everything(redis_client, prefix)
        )


@pytest.mark.anyio
async def test_finished_runs_are_purged(redis_client: aioredis.Redis, prefix: str) -> None:
    """Finished runs older than the date go with their transcripts; the ledger stays."""
    async with open_redis_stores(REDIS_URL, prefix=prefix) as stores:
        await ledger_operations.finished_runs_are_purged(stores.checkpoints, stores.sessions)


@pytest.mark.anyio
async def test_an_erased_session_leaves_no_bytes_behind(
    redis_client: aioredis.Redis, prefix: str
) -> None:
    """The erased argument and reason are under the prefix before the erasure and in no key's
    value after it."""
    secrets = (
        ledger_operations.ERASED_ARGUMENT.encode(),
        ledger_operations.ERASED_REASON.encode(),
    )

    async def present() -> None:
        held = await _everything(redis_client, prefix)
        assert all(secret in held for secret in secrets)

    async with open_redis_stores(REDIS_URL, prefix=prefix) as stores:
        await ledger_operations.a_session_is_erased(
            stores.checkpoints, stores.sessions, before_erase=present
        )
    held = await _everything(redis_client, prefix)
    assert not any(secret in held for secret in secrets)
