"""What each call sends: one statement per checkpoint call, two per append, no isolation switch."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import sqlalchemy as sa

from prism_core.errors import CheckpointConflictError
from prism_core.records import SessionConflictError, SessionEntryNotFoundError, create_session_entry
from prism_store_sql import (
    SqlCheckpointStore,
    SqlSessionStore,
    create_sql_checkpoint_store,
    create_sql_session_store,
)

from .conftest import PostgresServer, Target, aiosqlite_url, sent_statements

NS = "statements"


@pytest.fixture(params=["aiosqlite", "postgresql"])
def engine_target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    """A fresh database behind a SQLAlchemy engine (these tests watch the engine)."""
    if request.param == "aiosqlite":
        return Target("sqlite", f"sqlite+aiosqlite:///{tmp_path / 'prism.db'}", "prism_")
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.fresh()


@pytest.fixture
async def store(engine_target: Target) -> AsyncIterator[SqlCheckpointStore]:
    """A checkpoint store on a fresh database of each engine backend, its schema created."""
    async with create_sql_checkpoint_store(
        engine_target.url, table_prefix=engine_target.prefix
    ) as opened:
        await opened.load(NS, "warm-up")
        yield opened


@pytest.fixture
async def sessions(engine_target: Target) -> AsyncIterator[SqlSessionStore]:
    """A session store on a fresh database of each engine backend, its schema created."""
    async with create_sql_session_store(
        engine_target.url, table_prefix=engine_target.prefix
    ) as opened:
        await opened.list("warm-up")
        yield opened


class _Recorder:
    """The first word of every statement an engine's connections are sent, in order."""

    def __init__(self, store: SqlCheckpointStore | SqlSessionStore) -> None:
        self._engine = store.engine

    async def run(self, call: Callable[[], Awaitable[Any]]) -> list[str]:
        with sent_statements(self._engine) as statements:
            await call()
        return [statement.split(None, 1)[0].upper() for statement in statements]


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
    sqlite_target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On SQLite a switch is a trip to the driver thread each way, so calls make none
    (asyncpg switches without a round trip, so PostgreSQL keeps autocommit)."""
    async with create_sql_checkpoint_store(
        aiosqlite_url(sqlite_target.url), table_prefix=sqlite_target.prefix
    ) as store:
        await store.load(NS, "warm-up")
        await _never_switches(store, monkeypatch)


async def _never_switches(store: SqlCheckpointStore, monkeypatch: pytest.MonkeyPatch) -> None:
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


@pytest.mark.anyio
async def test_an_append_is_two_statements_or_one(sessions: SqlSessionStore) -> None:
    """Through SQLAlchemy (aiosqlite): the head move, then the entry insert that checks the
    parent; nothing else. On asyncpg: one statement (the head move as a CTE of the insert)."""
    recorder = _Recorder(sessions)
    root = create_session_entry(session_id="s", kind="label", label="root")
    child = create_session_entry(session_id="s", kind="label", label="c", parent_id=root.id)
    last = create_session_entry(session_id="s", kind="label", label="l", parent_id=child.id)
    one = sessions.engine.dialect.driver == "asyncpg"
    sent = [
        await recorder.run(lambda: sessions.append(root, expected_leaf_id=None)),
        await recorder.run(lambda: sessions.append(child, expected_leaf_id=root.id)),
        await recorder.run(lambda: sessions.append(last)),
    ]
    if one:
        assert sent == [["WITH"], ["WITH"], ["WITH"]]
    else:
        assert sent == [["INSERT", "INSERT"], ["UPDATE", "INSERT"], ["INSERT", "INSERT"]]
    assert await sessions.list("s") == [root, child, last]


@pytest.mark.anyio
async def test_refused_appends_keep_their_errors_and_write_nothing(
    sessions: SqlSessionStore,
) -> None:
    """A taken id is a conflict (also with a bad parent); a parent of another session or a
    missing one is not found; the head stays where it was after each."""
    root = await sessions.append(create_session_entry(session_id="s", kind="label", label="r"))
    other = await sessions.append(create_session_entry(session_id="t", kind="label", label="o"))
    refused: list[tuple[type[Exception], str, Any]] = [
        (SessionConflictError, "already exists", {"id": root.id}),
        (SessionConflictError, "already exists", {"id": other.id}),
        (SessionConflictError, "already exists", {"id": root.id, "parent_id": "missing"}),
        (SessionConflictError, "already exists", {"id": other.id, "parent_id": other.id}),
        (SessionEntryNotFoundError, "is not in session", {"parent_id": other.id}),
        (SessionEntryNotFoundError, "is not in session", {"parent_id": "missing"}),
    ]
    for error, message, fields in refused:
        entry = create_session_entry(session_id="s", kind="label", label="x", **fields)
        with pytest.raises(error, match=message):
            await sessions.append(entry, expected_leaf_id=root.id)
        assert await sessions.list("s") == [root]
        assert await sessions.list("t") == [other]
    itself = create_session_entry(session_id="s", kind="label", label="x")
    with pytest.raises(SessionEntryNotFoundError):
        await sessions.append(attrs.evolve(itself, parent_id=itself.id))
    child = create_session_entry(session_id="s", kind="label", label="c", parent_id=root.id)
    assert await sessions.append(child, expected_leaf_id=root.id) == child
    assert await sessions.read_branch_path("s", child.id) == [root, child]
