"""Redis session store behaviour beyond the conformance suite."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

import anyio
import pytest
import redis.asyncio as aioredis

from prism_core.content import Message
from prism_core.records import (
    BranchAndRunTailReader,
    SessionConflictError,
    SessionEntry,
    SessionEntryNotFoundError,
    create_session_entry,
)
from prism_store_redis import (
    RedisSessionStore,
    RedisSessionStoreError,
    create_redis_session_store,
)
from prism_store_redis._keys import SessionKeys
from tests.conftest import REDIS_URL

from ._support import closed_port, counting_client

pytestmark = pytest.mark.anyio


def message(session_id: str, text: str, parent: SessionEntry | None = None) -> SessionEntry:
    """A user message entry, optionally under ``parent``."""
    return create_session_entry(
        session_id=session_id,
        kind="message",
        parent_id=None if parent is None else parent.id,
        message=Message.user(text),
    )


@pytest.fixture
async def store(redis_client: aioredis.Redis, prefix: str) -> AsyncIterator[RedisSessionStore]:
    """A fresh store under the test's private prefix."""
    async with create_redis_session_store(REDIS_URL, prefix=prefix) as opened:
        yield opened


async def test_key_layout(store: RedisSessionStore, redis_client: aioredis.Redis) -> None:
    """Entries are JSON under ``se:``, the order list under ``sl:``, the head under ``sh:``."""
    keys = SessionKeys(store.prefix)
    root = await store.append(message("s:1", "root"))
    child = await store.append(message("s:1", "child", root))
    assert await redis_client.lrange(keys.order("s:1"), 0, -1) == [
        root.id.encode(),
        child.id.encode(),
    ]
    assert await redis_client.get(keys.head("s:1")) == child.id.encode()
    stored = await redis_client.hgetall(keys.entry(child.id))
    assert stored[b"session_id"] == b"s:1"
    assert stored[b"parent_id"] == root.id.encode()
    assert b'"kind":"message"' in stored[b"entry"]


async def test_entry_and_session_ids_with_colons(store: RedisSessionStore) -> None:
    """Ids containing ``:`` work like any other ids."""
    root = await store.append(
        create_session_entry(session_id="a:b", kind="label", id="x:y", label="root", parent_id=None)
    )
    child = await store.append(
        create_session_entry(session_id="a:b", kind="label", id="x:y:z", parent_id="x:y", label="c")
    )
    assert await store.read_branch_path("a:b", "x:y:z") == [root, child]
    assert await store.list("a") == []
    assert await store.list("a:b") == [root, child]


async def test_sixteen_clients_extend_one_chain(redis_client: aioredis.Redis, prefix: str) -> None:
    """16 stores on separate clients append guarded by the head: the result is one chain."""
    stores = [create_redis_session_store(REDIS_URL, prefix=prefix) for _ in range(16)]
    try:
        root = await stores[0].append(message("race", "root"))

        async def writer(index: int) -> None:
            written = 0
            while written < 3:
                head = (await stores[index].list("race"))[-1]
                try:
                    await stores[index].append(
                        message("race", f"{index}-{written}", head), expected_leaf_id=head.id
                    )
                except SessionConflictError:
                    continue
                written += 1

        async with anyio.create_task_group() as tg:
            for index in range(16):
                tg.start_soon(writer, index)
        entries = await stores[0].list("race")
        assert len(entries) == 1 + 16 * 3
        assert entries[0] == root
        for parent, child in itertools.pairwise(entries):
            assert child.parent_id == parent.id
        assert await stores[0].read_branch_path("race", entries[-1].id) == entries
    finally:
        for opened in stores:
            await opened.aclose()


async def test_each_operation_is_one_round_trip(redis_client: aioredis.Redis, prefix: str) -> None:
    """Once the scripts are cached, append, list, get, a branch read and a branch-and-run-tail
    read send one command each."""
    client = counting_client(REDIS_URL)
    try:
        async with create_redis_session_store(client, prefix=prefix) as store:
            warm = await store.append(message("warm", "root"))
            await store.list("warm")
            await store.read_branch_path("warm", warm.id)
            await store.read_branch_and_run_tail("warm", warm.id, "run")
            assert isinstance(store, BranchAndRunTailReader)
            entries = [await store.append(message("s", "root"))]
            for index in range(30):
                client.commands.clear()
                entries.append(await store.append(message("s", f"{index}", entries[-1])))
                assert client.commands == ["EVALSHA"]
            operations = [
                store.list("s"),
                store.get(entries[5].id),
                store.read_branch_path("s", entries[-1].id),
                store.read_branch_and_run_tail("s", entries[3].id, "run"),
            ]
            for operation in operations:
                client.commands.clear()
                await operation
                assert len(client.commands) == 1, client.commands
    finally:
        await client.aclose()


async def test_refused_appends_write_nothing(
    store: RedisSessionStore, redis_client: aioredis.Redis
) -> None:
    """A stale head, a taken id or a foreign parent leaves no key behind."""
    keys = SessionKeys(store.prefix)
    root = await store.append(message("s", "root"))
    other = await store.append(message("other", "elsewhere"))
    refused = [
        (message("s", "stale", root), {"expected_leaf_id": "nope"}, SessionConflictError),
        (message("s", "first", None), {"expected_leaf_id": None}, SessionConflictError),
        (message("s", "foreign parent", other), {}, SessionEntryNotFoundError),
    ]
    for entry, options, error in refused:
        with pytest.raises(error):
            await store.append(entry, **options)
        assert not await redis_client.exists(keys.entry(entry.id))
    assert await redis_client.llen(keys.order("s")) == 1
    assert await redis_client.get(keys.head("s")) == root.id.encode()


async def test_passed_client_stays_usable_after_aclose(
    redis_client: aioredis.Redis, prefix: str
) -> None:
    """A store never closes a client it was handed; a URL store closes its own."""
    store = create_redis_session_store(redis_client, prefix=prefix)
    entry = await store.append(message("s", "root"))
    await store.aclose()
    await store.aclose()
    assert await redis_client.ping() is True
    with pytest.raises(RedisSessionStoreError, match="closed"):
        await store.get(entry.id)
    async with create_redis_session_store(REDIS_URL, prefix=prefix) as owned:
        assert await owned.get(entry.id) == entry
    with pytest.raises(RedisSessionStoreError, match="closed"):
        await owned.list("s")


async def test_unreachable_redis_raises_session_store_error() -> None:
    """A client pointed at a closed port fails every call with ``RedisSessionStoreError``."""
    async with create_redis_session_store(
        f"redis://127.0.0.1:{closed_port()}/0", prefix="prismtest:unreachable"
    ) as store:
        entry = message("s", "root")
        with pytest.raises(RedisSessionStoreError) as raised:
            await store.append(entry)
        assert raised.value.code == "ERR_PRISM_SESSION_STORE"
        for call in (store.list("s"), store.get(entry.id), store.read_branch_path("s", entry.id)):
            with pytest.raises(RedisSessionStoreError):
                await call


async def test_append_rejects_malformed_arguments(store: RedisSessionStore) -> None:
    """A non-entry or a non-id ``expected_leaf_id`` is a ``TypeError``; nothing is written."""
    with pytest.raises(TypeError, match="SessionEntry"):
        await store.append({"id": "x"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="expected_leaf_id"):
        await store.append(message("s", "root"), expected_leaf_id=1)
    assert await store.list("s") == []
