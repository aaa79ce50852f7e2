"""Concurrent writers on separate engines (separate connection pools) on both backends."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from prism_core.content import Message
from prism_core.errors import CheckpointConflictError
from prism_core.records import SessionConflictError, SessionEntry, create_session_entry
from prism_store_sql import (
    SqlCheckpointStore,
    SqlSessionStore,
    create_sql_checkpoint_store,
    create_sql_session_store,
    migrate,
)

from .conftest import Target

WRITERS = 16


@pytest.fixture
async def checkpoint_stores(fresh_target: Target) -> AsyncIterator[list[SqlCheckpointStore]]:
    """16 stores, each with its own engine, on one migrated database."""
    await migrate(fresh_target.url, table_prefix=fresh_target.prefix)
    stores = [
        create_sql_checkpoint_store(
            fresh_target.url, table_prefix=fresh_target.prefix, create_schema=False
        )
        for _ in range(WRITERS)
    ]
    try:
        yield stores
    finally:
        for store in stores:
            await store.aclose()


@pytest.fixture
async def session_stores(fresh_target: Target) -> AsyncIterator[list[SqlSessionStore]]:
    """16 session stores, each with its own engine, on one migrated database."""
    await migrate(fresh_target.url, table_prefix=fresh_target.prefix)
    stores = [
        create_sql_session_store(
            fresh_target.url, table_prefix=fresh_target.prefix, create_schema=False
        )
        for _ in range(WRITERS)
    ]
    try:
        yield stores
    finally:
        for store in stores:
            await store.aclose()


async def _race(attempts: list[Callable[[], Awaitable[Any]]]) -> tuple[list[Any], int]:
    """Start every attempt at once; the successful results and the number of conflicts."""
    go = anyio.Event()
    winners: list[Any] = []
    conflicts = 0

    async def attempt(run: Callable[[], Awaitable[Any]]) -> None:
        nonlocal conflicts
        await go.wait()
        try:
            winners.append(await run())
        except (CheckpointConflictError, SessionConflictError):
            conflicts += 1

    async with anyio.create_task_group() as tg:
        for run in attempts:
            tg.start_soon(attempt, run)
        await anyio.lowlevel.checkpoint()
        go.set()
    return winners, conflicts


async def _connect_all(stores: list[SqlCheckpointStore], namespace: str) -> None:
    # One read per store first, so every engine holds an open connection and the race is
    # about the saves, not about who connects first.
    for store in stores:
        await store.load(namespace, "warm-up")


@pytest.mark.anyio
async def test_cas_race_across_engines_has_one_winner(
    checkpoint_stores: list[SqlCheckpointStore],
) -> None:
    """16 engines CAS from version 1 to 2: exactly one wins and its value is stored."""
    ns = f"race.{uuid.uuid4().hex}"
    await checkpoint_stores[0].save(ns, "run", {"writer": None}, version=1)
    await _connect_all(checkpoint_stores, ns)
    winners, conflicts = await _race(
        [
            lambda store=store, index=index: store.save(
                ns, "run", {"writer": index}, version=2, expected_version=1
            )
            for index, store in enumerate(checkpoint_stores)
        ]
    )
    assert (len(winners), conflicts) == (1, WRITERS - 1)
    stored = await checkpoint_stores[-1].load(ns, "run")
    assert stored is not None
    assert (stored.version, stored.value) == (2, winners[0].value)


@pytest.mark.anyio
async def test_unguarded_version_race_across_engines_has_one_winner(
    checkpoint_stores: list[SqlCheckpointStore],
) -> None:
    """Without ``expected_version``, 16 engines writing version 2 still yield one winner."""
    ns = f"race.{uuid.uuid4().hex}"
    await checkpoint_stores[0].save(ns, "run", "v1", version=1, fencing_token=1)
    await _connect_all(checkpoint_stores, ns)
    winners, conflicts = await _race(
        [
            lambda store=store, index=index: store.save(
                ns, "run", f"writer {index}", version=2, fencing_token=1
            )
            for index, store in enumerate(checkpoint_stores)
        ]
    )
    assert (len(winners), conflicts) == (1, WRITERS - 1)
    stored = await checkpoint_stores[0].load(ns, "run")
    assert stored is not None
    assert (stored.version, stored.value) == (2, winners[0].value)


@pytest.mark.anyio
async def test_create_only_race_across_engines_has_one_winner(
    checkpoint_stores: list[SqlCheckpointStore],
) -> None:
    """16 engines create the same key with ``expected_version=0``: one creates it."""
    ns = f"race.{uuid.uuid4().hex}"
    await _connect_all(checkpoint_stores, ns)
    winners, conflicts = await _race(
        [
            lambda store=store, index=index: store.save(
                ns, "run", {"writer": index}, version=1, expected_version=0
            )
            for index, store in enumerate(checkpoint_stores)
        ]
    )
    assert (len(winners), conflicts) == (1, WRITERS - 1)
    stored = await checkpoint_stores[3].load(ns, "run")
    assert stored is not None
    assert stored.value == winners[0].value


@pytest.mark.anyio
async def test_fencing_race_across_engines_keeps_the_highest_token(
    checkpoint_stores: list[SqlCheckpointStore],
) -> None:
    """Writers with rising fencing tokens and versions: no lower token lands after a higher."""
    ns = f"race.{uuid.uuid4().hex}"
    await checkpoint_stores[0].save(ns, "run", 0, version=1, fencing_token=0)
    await _connect_all(checkpoint_stores, ns)
    winners, _conflicts = await _race(
        [
            lambda store=store, index=index: store.save(
                ns, "run", index, version=index + 2, fencing_token=index
            )
            for index, store in enumerate(checkpoint_stores)
        ]
    )
    assert winners
    stored = await checkpoint_stores[0].load(ns, "run")
    assert stored is not None
    best = max(winners, key=lambda record: record.version)
    assert (stored.version, stored.fencing_token, stored.value) == (
        best.version,
        best.fencing_token,
        best.value,
    )


@pytest.mark.anyio
async def test_guarded_append_race_across_engines_has_one_winner(
    session_stores: list[SqlSessionStore],
) -> None:
    """16 engines append on the same expected head: one lands, the head moves once."""
    sid = f"session-{uuid.uuid4().hex}"
    root = await session_stores[0].append(
        create_session_entry(session_id=sid, kind="message", message=Message.user("root"))
    )
    for store in session_stores:
        await store.get(root.id)

    def child(index: int) -> SessionEntry:
        return create_session_entry(
            session_id=sid,
            kind="message",
            parent_id=root.id,
            message=Message.user(f"writer {index}"),
        )

    winners, conflicts = await _race(
        [
            lambda store=store, index=index: store.append(child(index), expected_leaf_id=root.id)
            for index, store in enumerate(session_stores)
        ]
    )
    assert (len(winners), conflicts) == (1, WRITERS - 1)
    assert await session_stores[5].list(sid) == [root, winners[0]]
    follow_up = create_session_entry(
        session_id=sid, kind="label", label="after", parent_id=winners[0].id
    )
    assert await session_stores[9].append(follow_up, expected_leaf_id=winners[0].id) == follow_up


@pytest.mark.anyio
async def test_unguarded_appends_across_engines_all_land_in_order(
    session_stores: list[SqlSessionStore],
) -> None:
    """Unguarded appends from 16 engines all land, each with its own place in the order."""
    sid = f"session-{uuid.uuid4().hex}"
    root = await session_stores[0].append(
        create_session_entry(session_id=sid, kind="label", label="root")
    )
    winners, conflicts = await _race(
        [
            lambda store=store, index=index: store.append(
                create_session_entry(
                    session_id=sid, kind="label", label=f"n{index}", parent_id=root.id
                )
            )
            for index, store in enumerate(session_stores)
        ]
    )
    assert (len(winners), conflicts) == (WRITERS, 0)
    listed = await session_stores[0].list(sid)
    assert listed[0] == root
    assert sorted(entry.id for entry in listed[1:]) == sorted(entry.id for entry in winners)
