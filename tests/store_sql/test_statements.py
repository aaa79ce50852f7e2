"""What each call sends: one statement per checkpoint call, no isolation-level switches."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from prism_core.errors import CheckpointConflictError
from prism_store_sql import SqlCheckpointStore, create_sql_checkpoint_store

from .conftest import Target

NS = "statements"


@pytest.fixture
async def store(fresh_target: Target) -> AsyncIterator[SqlCheckpointStore]:
    """A checkpoint store on a fresh database of each backend, its schema created."""
    async with create_sql_checkpoint_store(
        fresh_target.url, table_prefix=fresh_target.prefix
    ) as opened:
        await opened.load(NS, "warm-up")
        yield opened


class _Recorder:
    """The SQL text of every statement an engine sends, in order."""

    def __init__(self, store: SqlCheckpointStore) -> None:
        self.statements: list[str] = []
        event.listen(store.engine.sync_engine, "before_cursor_execute", self._record)

    def _record(self, *args: Any) -> None:
        self.statements.append(str(args[2]).split(None, 1)[0].upper())

    async def run(self, call: Callable[[], Awaitable[Any]]) -> list[str]:
        self.statements.clear()
        await call()
        return list(self.statements)


@pytest.mark.anyio
async def test_each_checkpoint_call_is_one_statement(store: SqlCheckpointStore) -> None:
    """create, CAS update, upsert, a lost CAS, load and delete each send exactly one statement."""
    recorder = _Recorder(store)

    assert await recorder.run(
        lambda: store.save(NS, "k", {"n": 1}, version=1, expected_version=0)
    ) == ["INSERT"]
    assert await recorder.run(
        lambda: store.save(NS, "k", {"n": 2}, version=2, expected_version=1, fencing_token=1)
    ) == ["UPDATE"]
    assert await recorder.run(
        lambda: store.save(NS, "k", {"n": 3}, version=3, fencing_token=2)
    ) == ["INSERT"]
    assert await recorder.run(lambda: store.load(NS, "k")) == ["SELECT"]

    async def lost() -> None:
        with pytest.raises(CheckpointConflictError):
            await store.save(NS, "k", {"n": 4}, version=4, expected_version=2, fencing_token=2)

    assert await recorder.run(lost) == ["UPDATE"]
    assert await recorder.run(lambda: store.delete(NS, "k")) == ["DELETE"]
    for statements in [
        await recorder.run(lambda: store.save(NS, "a", 1, version=1, expected_version=0)),
        await recorder.run(lambda: store.save(NS, "a", 2, version=2)),
    ]:
        assert statements == ["INSERT"]


@pytest.mark.anyio
async def test_calls_never_switch_the_isolation_level_on_sqlite(
    store: SqlCheckpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On SQLite a switch is a trip to the driver thread each way, so calls make none."""
    if store.engine.dialect.name != "sqlite":
        pytest.skip("asyncpg switches to autocommit without a round trip")
    switches: list[Any] = []
    dialect = store.engine.dialect
    original = dialect.set_isolation_level

    def counting(dbapi_connection: Any, level: Any) -> None:
        switches.append(level)
        original(dbapi_connection, level)

    monkeypatch.setattr(dialect, "set_isolation_level", counting)
    await store.save(NS, "k", 1, version=1)
    await store.save(NS, "k", 2, version=2, expected_version=1)
    assert await store.load(NS, "k") is not None
    await store.list(NS)
    assert await store.delete(NS, "k")
    assert switches == []


@pytest.mark.anyio
async def test_the_engine_keeps_its_transactions(store: SqlCheckpointStore) -> None:
    """The store's engine still runs real transactions for the host: a failed block rolls back."""
    table = f'"{store.table_prefix}checkpoints"'

    async def insert_then_fail() -> None:
        async with store.engine.begin() as connection:
            await connection.execute(
                sa.text(
                    f"INSERT INTO {table} (namespace, key, owner, version, value, created_at, "
                    "updated_at) VALUES ('host', 'k', '', 1, '1', 0, 0)"
                )
            )
            raise RuntimeError("roll back")

    with pytest.raises(RuntimeError):
        await insert_then_fail()
    assert await store.load("host", "k") is None
