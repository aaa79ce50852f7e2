"""Commits per turn of an every-turn run on the Redis stores, counted at the client.

A Redis write is one script call (or a ``MULTI``/``EXEC``): the client's ``execute_command``
is wrapped to count each ``EVALSHA``/``EVAL`` of a writing script and each ``EXEC``.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as aioredis

import prism_store_redis
from prism_core import open_stores
from prism_store_redis import (
    create_redis_checkpoint_store,
    create_redis_session_store,
    open_redis_stores,
)
from tests.conftest import REDIS_URL
from tests.turn_commits import commits_per_turn


def count_writes(client: aioredis.Redis, stores: tuple[Any, Any]) -> list[int]:
    """Count the writes ``client`` sends from now on (in the returned one-item list)."""
    checkpoints, sessions = stores
    writing = {
        checkpoints._save.sha,
        checkpoints._delete.sha,
        checkpoints._commit.sha,
        sessions._append.sha,
    }
    count = [0]
    send = client.execute_command

    async def execute_command(*args: Any, **options: Any) -> Any:
        command = str(args[0]).upper()
        if (command in ("EVALSHA", "EVAL") and args[1] in writing) or command == "EXEC":
            count[0] += 1
        return await send(*args, **options)

    client.execute_command = execute_command  # type: ignore[method-assign]
    return count


@pytest.mark.anyio
async def test_one_script_per_read_only_turn(redis_client: aioredis.Redis, prefix: str) -> None:
    """``open_redis_stores``: one script call for a read-only or idempotent turn, two for a
    side-effecting one."""
    async with open_redis_stores(REDIS_URL, prefix=prefix) as stores:
        count = count_writes(stores.checkpoints.client, (stores.checkpoints, stores.sessions))
        per_turn = await commits_per_turn(stores.checkpoints, stores.sessions, lambda: count[0])
    assert per_turn == {"read-only": 1, "idempotent": 1, "side-effecting": 2, "answer": 1}


@pytest.mark.anyio
async def test_notifications_add_no_script_to_a_turn(
    redis_client: aioredis.Redis, prefix: str
) -> None:
    """A notifying run on Redis: the same script calls per turn (its ``finished``
    notification rides its last one)."""
    async with open_redis_stores(REDIS_URL, prefix=prefix) as stores:
        count = count_writes(stores.checkpoints.client, (stores.checkpoints, stores.sessions))
        per_turn = await commits_per_turn(
            stores.checkpoints, stores.sessions, lambda: count[0], notify=True
        )
    assert per_turn == {"read-only": 1, "idempotent": 1, "side-effecting": 2, "answer": 1}


@pytest.mark.anyio
async def test_redis_url_opened_as_a_pair_commits_a_turn_once(
    redis_client: aioredis.Redis, prefix: str
) -> None:
    """``prism_core.open_stores("redis://…?prefix=…")`` gives both stores one client: one
    script call for a read-only or idempotent turn, two for a side-effecting one."""
    async with open_stores(
        f"{REDIS_URL}?prefix={prefix}", plugins=[prism_store_redis.plugin]
    ) as pair:
        checkpoints, sessions = pair
        assert sessions._connection.client is checkpoints.client  # type: ignore[attr-defined]
        count = count_writes(checkpoints.client, (checkpoints, sessions))
        per_turn = await commits_per_turn(checkpoints, sessions, lambda: count[0])
    assert per_turn == {"read-only": 1, "idempotent": 1, "side-effecting": 2, "answer": 1}


@pytest.mark.anyio
async def test_stores_on_two_clients_write_each_entry(
    redis_client: aioredis.Redis, prefix: str
) -> None:
    """Stores on two clients do not commit together: each entry is its own script call."""
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        checkpoints = create_redis_checkpoint_store(client, prefix=prefix)
        sessions = create_redis_session_store(redis_client, prefix=prefix)
        count = count_writes(client, (checkpoints, sessions))
        other = count_writes(redis_client, (checkpoints, sessions))
        per_turn = await commits_per_turn(checkpoints, sessions, lambda: count[0] + other[0])
    finally:
        await client.aclose()
    assert per_turn == {"read-only": 3, "idempotent": 3, "side-effecting": 4, "answer": 2}
