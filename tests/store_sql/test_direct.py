"""The PostgreSQL hot path sent straight to asyncpg: same statements, errors and pool hygiene."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from prism_core.errors import CheckpointConflictError
from prism_core.records import SessionConflictError, create_session_entry
from prism_core.stores import CheckpointStoreError, CheckpointStoreUnavailableError
from prism_store_sql import SqlCheckpointStore, create_sql_checkpoint_store, open_sql_stores
from prism_store_sql._engine import async_url

from .conftest import PostgresServer, Target

NS = "direct"


@pytest.fixture
def target(postgres_server: PostgresServer) -> Target:
    """A fresh prefix on the shared PostgreSQL server."""
    return postgres_server.fresh()


@pytest.fixture
async def store(target: Target) -> AsyncIterator[SqlCheckpointStore]:
    """A checkpoint store with a short timeout and one record (``k`` at version 1)."""
    async with create_sql_checkpoint_store(
        target.url, table_prefix=target.prefix, timeout_ms=300
    ) as opened:
        await opened.save(NS, "k", {"n": 1}, version=1, expected_version=0)
        yield opened


async def _lock_row(connection: AsyncConnection, target: Target) -> None:
    """Hold the row lock of ``k`` in an open transaction on ``connection``."""
    table = f'"{target.prefix}checkpoints"'
    await connection.execute(
        sa.text(f"SELECT version FROM {table} WHERE namespace = :ns AND key = 'k' FOR UPDATE"),
        {"ns": NS},
    )


@asynccontextmanager
async def _pooled(store: SqlCheckpointStore) -> AsyncIterator[list[Any]]:
    """The asyncpg connections in the store's pool, checked out one by one (and back)."""
    pool = store.engine.pool
    held = [await store.engine.raw_connection() for _ in range(pool.checkedin())]  # type: ignore[attr-defined]
    try:
        yield [connection.driver_connection for connection in held]
    finally:
        for connection in held:
            connection.close()


async def _server_pids(store: SqlCheckpointStore) -> set[int]:
    """The server process ids of the connections in the store's pool."""
    async with _pooled(store) as connections:
        return {connection.get_server_pid() for connection in connections}


@pytest.mark.anyio
async def test_a_lock_wait_times_out_transient_and_the_connection_is_reused(
    store: SqlCheckpointStore, target: Target
) -> None:
    """A save waiting on a row lock past ``timeout_ms`` is cancelled by the server: a
    transient error, nothing written, and the connection goes back to the pool usable."""
    admin = create_async_engine(async_url(target.url))
    before = await _server_pids(store)
    try:
        async with admin.connect() as holder:
            await _lock_row(holder, target)
            with pytest.raises(CheckpointStoreUnavailableError, match="save a checkpoint"):
                await store.save(NS, "k", {"n": 2}, version=2, expected_version=1)
            with pytest.raises(CheckpointStoreUnavailableError):
                await store.renew_lease(NS, "k", {"n": 1, "lease": 1}, version=1)
            await holder.rollback()
        assert store.engine.pool.checkedout() == 0  # type: ignore[attr-defined]
        assert await _server_pids(store) == before
        record = await store.load(NS, "k")
        assert record is not None
        assert (record.version, record.value) == (1, {"n": 1})
        saved = await store.save(NS, "k", {"n": 2}, version=2, expected_version=1)
        assert saved.version == 2
        with pytest.raises(CheckpointConflictError):
            await store.save(NS, "k", {"n": 3}, version=3, expected_version=1)
    finally:
        await admin.dispose()


@pytest.mark.anyio
async def test_a_cancelled_call_drops_its_connection(
    store: SqlCheckpointStore, target: Target
) -> None:
    """A save cancelled while the server is busy with it never returns that connection to
    the pool (its state is unknown); the next calls get a fresh one."""
    admin = create_async_engine(async_url(target.url))
    try:
        before = await _server_pids(store)
        async with admin.connect() as holder:
            await _lock_row(holder, target)
            with anyio.move_on_after(0.05) as scope:
                await store.save(NS, "k", {"n": 2}, version=2, expected_version=1)
            assert scope.cancelled_caught
            assert store.engine.pool.checkedout() == 0  # type: ignore[attr-defined]
            await holder.rollback()
        after = await _server_pids(store)
        assert len(before) == len(after) == 1
        assert before.isdisjoint(after)
        record = await store.load(NS, "k")
        assert record is not None
        assert record.version in (1, 2)  # a lost answer may have been applied
    finally:
        await admin.dispose()


@pytest.mark.anyio
async def test_a_server_error_is_typed_and_leaves_the_connection(
    store: SqlCheckpointStore, target: Target
) -> None:
    """A statement the server refuses (here: its table is gone) raises the store's
    non-transient error and keeps the connection in the pool."""
    admin = create_async_engine(async_url(target.url))
    before = await _server_pids(store)
    try:
        async with admin.begin() as connection:
            await connection.execute(sa.text(f'DROP TABLE "{target.prefix}checkpoints"'))
        with pytest.raises(CheckpointStoreError, match="load a checkpoint") as info:
            await store.load(NS, "k")
        assert not isinstance(info.value, CheckpointStoreUnavailableError)
        assert await _server_pids(store) == before
    finally:
        await admin.dispose()


@pytest.mark.anyio
async def test_a_turn_commit_refused_by_an_entry_writes_nothing(target: Target) -> None:
    """A turn's one-statement commit hitting a taken entry id falls back to the writes one by
    one, which name the refusal; neither the checkpoint nor any entry is written."""
    session = f"s-{uuid.uuid4().hex}"
    async with open_sql_stores(target.url, table_prefix=target.prefix) as stores:
        checkpoints, sessions = stores
        root = create_session_entry(session_id=session, kind="label", label="r")
        await sessions.append(root)
        taken = create_session_entry(session_id=session, kind="label", label="x", id=root.id)

        async def commit() -> None:
            async with stores.transaction() as tx:
                tx.save(NS, "run", {"v": 1}, version=1, expected_version=0)
                tx.append(taken)

        with pytest.raises(SessionConflictError):
            await commit()
        assert await checkpoints.load(NS, "run") is None
        assert await sessions.list(session) == [root]
        assert checkpoints.engine.pool.checkedout() == 0  # type: ignore[attr-defined]


async def _plan_cache_modes(store: SqlCheckpointStore) -> set[str]:
    """``plan_cache_mode`` on each connection in the store's pool."""
    async with _pooled(store) as connections:
        return {await c.fetchval("SHOW plan_cache_mode") for c in connections}


@pytest.mark.anyio
async def test_own_connections_plan_once_and_a_hosts_keep_their_settings(
    store: SqlCheckpointStore, target: Target
) -> None:
    """A store that created its engine switches each connection to generic plans (its
    statements are planned once per connection, not per call); a host's engine keeps its
    connections' settings, and both write the same records."""
    assert await _plan_cache_modes(store) == {"force_generic_plan"}
    host = create_async_engine(async_url(target.url))
    try:
        async with create_sql_checkpoint_store(host, table_prefix=target.prefix) as borrowed:
            for version in (2, 3):
                await borrowed.save(NS, "k", {"n": version}, version=version)
            assert await _plan_cache_modes(borrowed) == {"auto"}
        record = await store.load(NS, "k")
        assert record is not None
        assert (record.version, record.value) == (3, {"n": 3})
    finally:
        await host.dispose()


@pytest.mark.anyio
async def test_engines_the_stores_create_share_compiled_statements(
    store: SqlCheckpointStore, target: Target
) -> None:
    """A store opened again on the same prefix (a task queue's worker opens its stores for
    each task) takes the compiled SQL of the statements the first store compiled; a host's
    engine compiles for itself. Either way the statement runs alike."""
    again = create_sql_checkpoint_store(target.url, table_prefix=target.prefix)
    host = create_async_engine(async_url(target.url))
    borrowed = create_sql_checkpoint_store(host, table_prefix=target.prefix)
    try:
        async with again, borrowed:
            for opened in (store, again, borrowed):
                record = await opened.load(NS, "k")
                assert record is not None
                assert (record.version, record.value) == (1, {"n": 1})
            load = again._sql.load
            assert load is store._sql.load
            first = store._direct.statement(load)  # type: ignore[union-attr]
            assert again._direct is not None
            assert again._direct is not store._direct
            assert again._direct.statement(load).sql is first.sql  # the same text object
            assert borrowed._direct is not None
            hosted = borrowed._direct.statement(load)
            assert hosted.sql == first.sql
            assert hosted.sql is not first.sql  # compiled anew for the host's dialect
    finally:
        await host.dispose()
