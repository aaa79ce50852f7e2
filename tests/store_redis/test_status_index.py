"""The Redis store's status index: the conformance suite and its key layout."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from prism_core.testing import (
    CheckpointStampConformance,
    CheckpointStatusIndexConformance,
    LeaseRenewalConformance,
)
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


class TestRedisLeaseRenewal(LeaseRenewalConformance):
    """The in-place lease renewal suite on the Redis checkpoint store."""

    @pytest.fixture
    async def checkpoint_store(
        self, redis_client: aioredis.Redis, prefix: str
    ) -> AsyncIterator[RedisCheckpointStore]:
        """A fresh store under the test's private prefix."""
        async with create_redis_checkpoint_store(REDIS_URL, prefix=prefix) as store:
            yield store


class TestRedisStamp(CheckpointStampConformance):
    """The stamp read suite on the Redis checkpoint store."""

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


@pytest.mark.anyio
async def test_list_agent_runs_on_redis_reads_only_the_status_set(
    redis_client: aioredis.Redis, prefix: str
) -> None:
    """Real runs on Redis: a status filter walks that owner's status set, pages by cursor and
    never lists another tenant's runs."""
    from prism_core import (
        RunStateOptions,
        ToolDefinition,
        create_agent,
        create_mock_provider,
        list_agent_runs,
        provider_done,
        provider_text_delta,
        provider_tool_call,
        tool_call_content,
    )
    from prism_store_redis import create_redis_session_store

    def turns(request: Any) -> list[Any]:
        if any(message.role == "assistant" for message in request.messages):
            return [provider_text_delta("done"), provider_done()]
        return [provider_tool_call(tool_call_content("c1", "echo", {"n": 1})), provider_done()]

    tenant = {"tenant_id": "t1"}
    async with (
        create_redis_checkpoint_store(REDIS_URL, prefix=prefix) as checkpoints,
        create_redis_session_store(REDIS_URL, prefix=prefix) as sessions,
    ):
        agent = create_agent(
            id="worker",
            model={"provider": "mock", "model": "demo"},
            provider=create_mock_provider(turns),
            tools=[ToolDefinition("echo", lambda args, context: args)],
            store=sessions,
        )
        for index in range(5):
            suspend = index < 3
            options: dict[str, Any] = (
                {"interrupt_before_tool": True} if suspend else {"checkpoint_policy": "every-turn"}
            )
            await agent.create_session(id=f"s-{index}").run(
                "go", run_state=RunStateOptions(checkpoints, "rev-1", ownership=tenant, **options)
            )
        await agent.create_session(id="s-other").run(
            "go", run_state=RunStateOptions(checkpoints, "rev-1", interrupt_before_tool=True)
        )
        seen: list[str] = []
        cursor = None
        while True:
            page = await list_agent_runs(
                checkpoints, status="suspended", ownership=tenant, limit=2, cursor=cursor
            )
            seen.extend(summary.session_id for summary in page.runs)
            assert all(summary.pending_decisions == 1 for summary in page.runs)
            cursor = page.cursor
            if cursor is None:
                break
        assert sorted(seen) == ["s-0", "s-1", "s-2"]
        done = await list_agent_runs(checkpoints, status="succeeded", ownership=tenant)
        assert sorted(summary.session_id for summary in done.runs) == ["s-3", "s-4"]
        unowned = await list_agent_runs(checkpoints, status="suspended")
        assert [summary.session_id for summary in unowned.runs] == ["s-other"]
        assert (await list_agent_runs(checkpoints, recoverable=True, ownership=tenant)).runs == ()
