"""Redis checkpoint store behaviour beyond the conformance suite."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError

from prism_core.errors import CheckpointConflictError
from prism_core.stores import (
    CheckpointLimitError,
    CheckpointStoreError,
    CheckpointStoreUnavailableError,
    InvalidCheckpointError,
)
from prism_store_redis import (
    RedisCheckpointStore,
    RedisSessionStoreError,
    create_redis_checkpoint_store,
    create_redis_session_store,
)
from prism_store_redis._keys import CheckpointKeys
from tests.conftest import REDIS_URL

from ._support import closed_port, counting_client

pytestmark = pytest.mark.anyio

NS = "prism.agent-run"


@pytest.fixture
async def store(redis_client: aioredis.Redis, prefix: str) -> AsyncIterator[RedisCheckpointStore]:
    """A fresh store under the test's private prefix."""
    async with create_redis_checkpoint_store(REDIS_URL, prefix=prefix) as opened:
        yield opened


async def test_sixteen_clients_race_one_winner_per_round(
    redis_client: aioredis.Redis, prefix: str
) -> None:
    """16 stores on 16 separate clients racing CAS saves: no update is ever lost."""
    stores = [create_redis_checkpoint_store(REDIS_URL, prefix=prefix) for _ in range(16)]
    try:
        await stores[0].save(NS, "race", {"count": 0, "writers": []}, version=1)
        first_round: list[int] = []

        async def claim(index: int) -> None:
            try:
                await stores[index].save(
                    NS, "race", {"count": 1, "writers": [index]}, version=2, expected_version=1
                )
            except CheckpointConflictError:
                return
            first_round.append(index)

        async with anyio.create_task_group() as tg:
            for index in range(16):
                tg.start_soon(claim, index)
        assert len(first_round) == 1

        async def increment(index: int, times: int) -> None:
            done = 0
            while done < times:
                current = await stores[index].load(NS, "race")
                assert current is not None
                value = {
                    "count": current.value["count"] + 1,
                    "writers": [*current.value["writers"], index],
                }
                try:
                    await stores[index].save(
                        NS,
                        "race",
                        value,
                        version=current.version + 1,
                        expected_version=current.version,
                    )
                except CheckpointConflictError:
                    continue
                done += 1

        async with anyio.create_task_group() as tg:
            for index in range(16):
                tg.start_soon(increment, index, 5)
        final = await stores[0].load(NS, "race")
        assert final is not None
        assert final.version == 2 + 16 * 5
        assert final.value["count"] == 1 + 16 * 5
        assert sorted(final.value["writers"][1:]) == sorted(list(range(16)) * 5)
    finally:
        for opened in stores:
            await opened.aclose()


async def test_passed_client_stays_usable_after_aclose(
    redis_client: aioredis.Redis, prefix: str
) -> None:
    """A store never closes a client it was handed; a URL store closes its own."""
    store = create_redis_checkpoint_store(redis_client, prefix=prefix)
    await store.save(NS, "k", 1, version=1)
    await store.aclose()
    await store.aclose()
    assert await redis_client.ping() is True
    async with create_redis_checkpoint_store(redis_client, prefix=prefix) as again:
        record = await again.load(NS, "k")
        assert record is not None
        assert record.value == 1
    with pytest.raises(CheckpointStoreError, match="closed"):
        await store.load(NS, "k")

    owned = create_redis_checkpoint_store(REDIS_URL, prefix=prefix)
    assert await owned.load(NS, "k") is not None
    await owned.aclose()
    with pytest.raises(CheckpointStoreError, match="closed"):
        await owned.save(NS, "k", 2, version=2)


async def test_finished_runs_get_the_ttl(redis_client: aioredis.Redis, prefix: str) -> None:
    """Only finished statuses expire; saving a running state again removes the expiry."""
    keys = CheckpointKeys(prefix)
    async with create_redis_checkpoint_store(
        REDIS_URL, prefix=prefix, finished_ttl_seconds=3600
    ) as store:
        await store.save(NS, "run", {"status": "running"}, version=1)
        assert await redis_client.ttl(keys.record(NS, "run")) == -1
        for version, status in enumerate(("succeeded", "failed", "aborted", "denied"), 2):
            await store.save(NS, "run", {"status": status}, version=version)
            assert 3590 < await redis_client.ttl(keys.record(NS, "run")) <= 3600
        expires_ms = await redis_client.zscore(keys.all_records, keys.record(NS, "run"))
        assert expires_ms is not None
        assert expires_ms == await redis_client.pexpiretime(keys.record(NS, "run"))
        await store.save(NS, "run", {"status": "suspended"}, version=10)
        assert await redis_client.ttl(keys.record(NS, "run")) == -1
        assert await redis_client.zscore(keys.all_records, keys.record(NS, "run")) == float("inf")
        await store.save(NS, "other", ["succeeded"], version=1)
        await store.save(NS, "other-2", {"state": {"status": "failed"}}, version=1)
        assert await redis_client.ttl(keys.record(NS, "other")) == -1
        assert await redis_client.ttl(keys.record(NS, "other-2")) == -1
    async with create_redis_checkpoint_store(REDIS_URL, prefix=prefix) as plain:
        await plain.save(NS, "no-ttl", {"status": "succeeded"}, version=1)
        assert await redis_client.ttl(keys.record(NS, "no-ttl")) == -1


async def test_expired_records_vanish_from_load_list_and_count(
    redis_client: aioredis.Redis, prefix: str
) -> None:
    """An expired finished record loads as absent, leaves the list and frees its slot."""
    ns = "odd:ns\x00with\x01bytes"
    keys = CheckpointKeys(prefix)
    async with create_redis_checkpoint_store(
        REDIS_URL, prefix=prefix, finished_ttl_seconds=1, max_records=2
    ) as store:
        await store.save(ns, "done:1", {"status": "succeeded"}, version=1)
        await store.save(ns, "live", {"status": "running"}, version=1)
        with pytest.raises(CheckpointLimitError):
            await store.save(ns, "third", {"status": "running"}, version=1)
        await anyio.sleep(1.2)
        assert await store.load(ns, "done:1") is None
        # The count drops the expired key, so a new record fits again.
        await store.save(ns, "third", {"status": "running"}, version=1)
        page = await store.list(ns)
        assert [r.key for r in page.records] == ["live", "third"]
        assert await redis_client.zcard(keys.owner_index("")) == 2
        assert await redis_client.zcard(keys.all_records) == 2


async def test_max_records_and_max_value_bytes(redis_client: aioredis.Redis, prefix: str) -> None:
    """The limits refuse new records and big values; updates of existing records still fit."""
    async with create_redis_checkpoint_store(
        REDIS_URL, prefix=prefix, max_records=2, max_value_bytes=20
    ) as store:
        await store.save(NS, "a", "x", version=1)
        await store.save(NS, "b", "x", version=1, ownership={"tenant_id": "t"})
        with pytest.raises(CheckpointLimitError):
            await store.save(NS, "c", "x", version=1)
        assert await store.load(NS, "c") is None
        await store.save(NS, "a", "y", version=2)
        with pytest.raises(CheckpointLimitError):
            await store.save(NS, "a", "z" * 30, version=3)
        assert await store.delete(NS, "a") is True
        await store.save(NS, "c", "x", version=1)
    with pytest.raises(ValueError, match="max_records"):
        create_redis_checkpoint_store(REDIS_URL, max_records=0)
    with pytest.raises(ValueError, match="finished_ttl_seconds"):
        create_redis_checkpoint_store(REDIS_URL, finished_ttl_seconds=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prefix"):
        create_redis_checkpoint_store(REDIS_URL, prefix="")


async def test_colons_in_namespace_and_key_do_not_collide(store: RedisCheckpointStore) -> None:
    """``("a:b", "c")`` and ``("a", "b:c")`` are different records, listed in tuple order."""
    pairs = [("a:b", "c"), ("a", "b:c"), ("a", "b"), ("a\x00", "x"), ("a\x01", "y"), ("ab", "z")]
    for index, (ns, key) in enumerate(pairs):
        await store.save(ns, key, {"index": index}, version=1)
    for index, (ns, key) in enumerate(pairs):
        record = await store.load(ns, key)
        assert record is not None
        assert (record.namespace, record.key, record.value) == (ns, key, {"index": index})
    listed = [(r.namespace, r.key) for r in (await store.list(limit=1000)).records]
    assert listed == sorted(pairs)
    assert [r.key for r in (await store.list("a")).records] == ["b", "b:c"]
    assert [r.key for r in (await store.list("a:b")).records] == ["c"]
    assert await store.delete("a", "b:c") is True
    assert await store.load("a:b", "c") is not None


async def test_versions_beyond_double_precision_keep_their_order(
    store: RedisCheckpointStore,
) -> None:
    """Versions and fencing tokens above 2**53 compare exactly (Lua numbers are doubles), up to
    the largest stored integer (2**63 - 1)."""
    big = 2**63 - 2
    await store.save(NS, "k", 1, version=big, fencing_token=big)
    with pytest.raises(CheckpointConflictError):
        await store.save(NS, "k", 2, version=big + 1, fencing_token=big - 1)
    with pytest.raises(CheckpointConflictError):
        await store.save(NS, "k", 2, version=big + 1, expected_version=big + 1, fencing_token=big)
    saved = await store.save(NS, "k", 2, version=big + 1, expected_version=big, fencing_token=big)
    loaded = await store.load(NS, "k")
    assert loaded is not None
    assert (loaded.version, loaded.fencing_token) == (saved.version, big) == (big + 1, big)


async def test_cursor_resumes_inside_a_namespace(store: RedisCheckpointStore) -> None:
    """A cursor from an unfiltered listing still pages correctly within a namespace."""
    for ns in ("n1", "n2"):
        for key in ("a", "b", "c"):
            await store.save(ns, key, key, version=1)
    first = await store.list(limit=4)
    assert [(r.namespace, r.key) for r in first.records] == [
        ("n1", "a"),
        ("n1", "b"),
        ("n1", "c"),
        ("n2", "a"),
    ]
    assert first.cursor is not None
    rest = await store.list("n2", cursor=first.cursor)
    assert [r.key for r in rest.records] == ["b", "c"]
    early = await store.list("n2", limit=1, cursor=(await store.list(limit=1)).cursor)
    assert [r.key for r in early.records] == ["a"]
    with pytest.raises(InvalidCheckpointError):
        await store.list(cursor="r1.AAAA")


async def test_each_operation_is_one_round_trip(redis_client: aioredis.Redis, prefix: str) -> None:
    """Once its script is cached, save, load, delete and list each send one command."""
    client = counting_client(REDIS_URL)
    try:
        async with create_redis_checkpoint_store(client, prefix=prefix) as store:
            await store.save(NS, "warm", 0, version=1)
            await store.list(NS)
            await store.delete(NS, "warm")
            operations = [
                store.save(NS, "k", {"status": "running"}, version=1, fencing_token=1),
                store.save(
                    NS, "k", {"status": "running"}, version=2, expected_version=1, fencing_token=1
                ),
                store.load(NS, "k"),
                store.list(NS),
                store.delete(NS, "k"),
            ]
            for operation in operations:
                client.commands.clear()
                await operation
                assert len(client.commands) == 1, client.commands
    finally:
        await client.aclose()


async def test_keys_stay_under_the_prefix(redis_client: aioredis.Redis, prefix: str) -> None:
    """Everything the store writes lives under ``<prefix>:``; other prefixes see nothing."""
    async with create_redis_checkpoint_store(REDIS_URL, prefix=prefix) as store:
        await store.save(NS, "run:1", {"status": "running"}, version=1, ownership={"t": "1"})
        await store.save(NS, "run:2", {"status": "running"}, version=1)
    other_prefix = f"{prefix}:other"
    async with create_redis_checkpoint_store(REDIS_URL, prefix=other_prefix) as other:
        assert await other.load(NS, "run:2") is None
        assert (await other.list(NS)).records == ()
        await other.save(NS, "run:2", "other", version=1)
    keys = CheckpointKeys(prefix)
    written = {key async for key in redis_client.scan_iter(match=f"{prefix}:*")}
    others = {key for key in written if key.startswith(f"{other_prefix}:".encode())}
    assert written - others == {
        keys.record(NS, "run:1"),
        keys.record(NS, "run:2"),
        keys.owner_index('{"t":"1"}'),
        keys.owner_index(""),
        keys.all_records,
        keys.status_index('{"t":"1"}', "running"),
        keys.status_index("", "running"),
    }
    assert len(others) == 3


async def test_unreachable_redis_raises_checkpoint_store_error() -> None:
    """A client pointed at a closed port fails every call with ``CheckpointStoreError`` (its
    transient subclass: a refused connection may be retried)."""
    async with create_redis_checkpoint_store(
        f"redis://127.0.0.1:{closed_port()}/0", prefix="prismtest:unreachable"
    ) as store:
        with pytest.raises(CheckpointStoreError) as raised:
            await store.save(NS, "k", {"status": "running"}, version=1)
        assert raised.value.code == "ERR_PRISM_STORE_UNAVAILABLE"
        assert isinstance(raised.value, CheckpointStoreUnavailableError)
        assert isinstance(raised.value.__cause__, RedisConnectionError)
        with pytest.raises(CheckpointStoreError):
            await store.load(NS, "k")
        with pytest.raises(CheckpointStoreError):
            await store.delete(NS, "k")
        with pytest.raises(CheckpointStoreError):
            await store.list(NS)


def test_constructor_rejects_what_is_not_a_redis_target() -> None:
    """A non-Redis URL or a non-client object fails before any I/O."""
    with pytest.raises(ValueError, match="redis://"):
        create_redis_checkpoint_store("postgresql://localhost/db")
    with pytest.raises(TypeError, match=r"redis\.asyncio\.Redis"):
        create_redis_checkpoint_store(object())  # type: ignore[arg-type]


TRIO_ADVICE = ("runs on asyncio only", "the SQLite store", "sqlite:///")


def test_trio_is_refused_naming_the_store_that_works_there() -> None:
    """Under trio both Redis stores refuse before any I/O, and the refusal names the SQLite
    store (``sqlite:///``), the durable store that runs on trio."""
    checkpoints = create_redis_checkpoint_store(REDIS_URL)
    sessions = create_redis_session_store(REDIS_URL)
    refusals: list[str] = []

    async def under_trio() -> None:
        with pytest.raises(CheckpointStoreError) as load:
            await checkpoints.load(NS, "k")
        with pytest.raises(CheckpointStoreError) as close:
            await checkpoints.aclose()
        with pytest.raises(RedisSessionStoreError) as listing:
            await sessions.list("s1")
        refusals.extend(str(info.value) for info in (load, close, listing))

    anyio.run(under_trio, backend="trio")
    anyio.run(checkpoints.aclose, backend="asyncio")
    anyio.run(sessions.aclose, backend="asyncio")
    assert len(refusals) == 3
    for message in refusals:
        assert all(advice in message for advice in TRIO_ADVICE), message


async def test_stores_with_and_without_limits_share_a_prefix_and_count_exactly(
    redis_client: aioredis.Redis, prefix: str
) -> None:
    """Updates by a store without limits or TTL never throw off a limited store's count."""
    keys = CheckpointKeys(prefix)
    plain = create_redis_checkpoint_store(REDIS_URL, prefix=prefix)
    limited = create_redis_checkpoint_store(
        REDIS_URL, prefix=prefix, max_records=3, finished_ttl_seconds=3600
    )
    try:
        await plain.save(NS, "a", {"status": "running"}, version=1)
        await plain.save(NS, "b", {"status": "running"}, version=1, ownership={"t": "1"})
        for version in range(2, 6):
            await plain.save(NS, "a", {"status": "running"}, version=version)
        await limited.save(NS, "c", {"status": "running"}, version=1)
        with pytest.raises(CheckpointLimitError):
            await limited.save(NS, "d", {"status": "running"}, version=1)
        assert await redis_client.zcard(keys.all_records) == 3

        # A TTL set by the limited store moves the score; a plain update moves it back.
        await limited.save(NS, "a", {"status": "succeeded"}, version=6)
        record_a = keys.record(NS, "a")
        assert await redis_client.zscore(keys.all_records, record_a) == (
            await redis_client.pexpiretime(record_a)
        )
        await plain.save(NS, "a", {"status": "succeeded"}, version=7)
        assert await redis_client.ttl(record_a) == -1
        assert await redis_client.zscore(keys.all_records, record_a) == float("inf")
        await plain.save(NS, "a", {"status": "running"}, version=8)
        assert await redis_client.zscore(keys.all_records, record_a) == float("inf")

        assert await redis_client.zcard(keys.all_records) == 3
        assert await redis_client.zcard(keys.owner_index("")) == 2
        assert await redis_client.zcard(keys.owner_index('{"t":"1"}')) == 1
        with pytest.raises(CheckpointLimitError):
            await limited.save(NS, "d", {"status": "running"}, version=1)
        assert await plain.delete(NS, "c") is True
        await limited.save(NS, "d", {"status": "running"}, version=1)
    finally:
        await plain.aclose()
        await limited.aclose()


async def test_an_update_rewrites_the_hash_to_exactly_the_new_fields(
    redis_client: aioredis.Redis, store: RedisCheckpointStore
) -> None:
    """Optional fields the caller no longer passes are dropped; the fixed ones stay."""
    keys = CheckpointKeys(store.prefix)
    first = await store.save(
        NS, "k", {"n": 1}, version=1, fencing_token=3, metadata={"m": "1"}, category="c"
    )
    fields = await redis_client.hgetall(keys.record(NS, "k"))
    assert set(fields) == {
        b"ns",
        b"key",
        b"v",
        b"value",
        b"owner",
        b"created",
        b"updated",
        b"fence",
        b"meta",
        b"cat",
    }
    second = await store.save(NS, "k", {"n": 2}, version=2, fencing_token=4)
    fields = await redis_client.hgetall(keys.record(NS, "k"))
    assert set(fields) == {
        b"ns",
        b"key",
        b"v",
        b"value",
        b"owner",
        b"created",
        b"updated",
        b"fence",
    }
    assert (fields[b"v"], fields[b"value"], fields[b"fence"]) == (b"2", b'{"n":2}', b"4")
    assert second.created_at == first.created_at
    loaded = await store.load(NS, "k")
    assert loaded == second
    assert (loaded.metadata, loaded.category) == (None, None)
    third = await store.save(NS, "k", [3], version=3, fencing_token=4, category="")
    assert await store.load(NS, "k") == third
    assert third.category == ""


async def test_a_script_the_server_does_not_know_is_loaded_again(
    store: RedisCheckpointStore,
) -> None:
    """When ``EVALSHA`` finds no script (a restarted or flushed server), the call loads it."""
    script = store._save
    script.sha = "0" * 40
    saved = await store.save(NS, "k", {"n": 1}, version=1)
    assert script.sha != "0" * 40
    assert await store.load(NS, "k") == saved
