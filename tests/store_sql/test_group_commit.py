"""Group commit on the thread-driven SQLite backend: writes queued while a commit is in
flight share the next one; a refusal fails its own write only; a failed commit fails every
write of its group, none of them written."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from prism_core.errors import CheckpointConflictError
from prism_core.records import create_session_entry
from prism_core.stores import CheckpointStoreError, shared_transaction
from prism_store_sql import SqliteCheckpointStore, SqlStoreConfigError, open_sql_stores
from prism_store_sql._sqlite import SqliteDatabase

from .conftest import Target

pytestmark = pytest.mark.anyio


@pytest.fixture
async def stores(sqlite_target: Target) -> AsyncIterator[tuple[Any, Any, list[str]]]:
    """Both stores on a fresh file, every statement of the writing connection recorded."""
    async with open_sql_stores(sqlite_target.url) as opened:
        assert isinstance(opened.checkpoints, SqliteCheckpointStore)
        statements: list[str] = []

        def trace(connection: sqlite3.Connection) -> None:
            connection.set_trace_callback(statements.append)

        await opened.checkpoints.database.run("trace", trace)
        yield opened.checkpoints, opened.sessions, statements


async def _while_a_write_is_in_flight(database: SqliteDatabase, *writes: Any) -> list[Any]:
    """Queue ``writes`` (coroutine functions) while another write holds the writer thread,
    then let it go; each write's result or exception, in order."""
    holding, release = threading.Event(), threading.Event()

    def hold(connection: sqlite3.Connection) -> None:
        holding.set()
        release.wait(10)

    outcomes: list[Any] = [None] * len(writes)

    async def one(index: int) -> None:
        try:
            outcomes[index] = await writes[index]()
        except Exception as exc:
            outcomes[index] = exc

    async with anyio.create_task_group() as group:
        group.start_soon(database.write, "hold the writer", hold)
        await anyio.to_thread.run_sync(holding.wait, 10)
        for index in range(len(writes)):
            group.start_soon(one, index)
        await anyio.sleep(0.05)  # every write queued behind the held one
        release.set()
    return outcomes


def _commits(statements: list[str]) -> int:
    return sum(1 for s in statements if s.split(None, 1)[0].upper() == "COMMIT")


async def test_writes_queued_behind_a_commit_share_the_next_one(
    stores: tuple[Any, Any, list[str]],
) -> None:
    checkpoints, sessions, statements = stores
    entries = [create_session_entry(session_id=f"s{i}", kind="label", label="x") for i in range(4)]

    def turn(i: int) -> Any:
        async def commit() -> None:
            tx = shared_transaction(checkpoints, sessions)
            assert tx is not None
            async with tx as batch:
                batch.append(entries[i], expected_leaf_id=None)
                batch.save("runs", f"r{i}", {"leaf": entries[i].id}, version=1, expected_version=0)

        return commit

    def save(i: int) -> Any:
        return lambda: checkpoints.save("ns", f"k{i}", {"v": i}, version=1, expected_version=0)

    statements.clear()
    loop = asyncio.get_running_loop()
    wake_ups: list[Any] = []
    real = loop.call_soon_threadsafe

    def counted(callback: Any, *args: Any, **kw: Any) -> Any:
        wake_ups.append(callback)
        return real(callback, *args, **kw)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(loop, "call_soon_threadsafe", counted)
        outcomes = await _while_a_write_is_in_flight(
            checkpoints.database, *(turn(i) for i in range(4)), *(save(i) for i in range(3))
        )
    assert not [o for o in outcomes if isinstance(o, Exception)]
    # The held write's commit, then one for all seven queued behind it.
    assert _commits(statements) == 2
    # The loop is woken once per commit to settle its writes, not once per write (the
    # thread pool's wake-ups for the helper that waits on the held write aside).
    assert sum(1 for c in wake_ups if getattr(c, "__name__", "") == "_settle_all") == 2
    # Nothing refused: the group ran once, with no savepoints.
    assert statements.count("BEGIN IMMEDIATE") == 2
    assert "SAVEPOINT prism_write" not in statements
    for i in range(4):
        assert await sessions.list(f"s{i}") == [entries[i]]
        record = await checkpoints.load("runs", f"r{i}")
        assert record is not None
        assert record.value == {"leaf": entries[i].id}
    for i in range(3):
        record = await checkpoints.load("ns", f"k{i}")
        assert record is not None
        assert record.value == {"v": i}


async def test_a_refused_write_fails_alone(stores: tuple[Any, Any, list[str]]) -> None:
    """A compare-and-swap refusal and a taken entry id inside a group raise to their own
    callers and write nothing; the other writes of the group are committed."""
    checkpoints, sessions, statements = stores
    await checkpoints.save("ns", "taken", {"v": 0}, version=1, expected_version=0)
    root = create_session_entry(session_id="s", kind="label", label="root")
    await sessions.append(root, expected_leaf_id=None)
    again = create_session_entry(session_id="s", kind="label", label="late", parent_id=root.id)

    async def refused_turn() -> None:
        tx = shared_transaction(checkpoints, sessions)
        assert tx is not None
        async with tx as batch:
            batch.append(again, expected_leaf_id=root.id)
            batch.save("ns", "taken", {"v": 9}, version=2, expected_version=5)  # stale

    statements.clear()
    outcomes = await _while_a_write_is_in_flight(
        checkpoints.database,
        lambda: checkpoints.save("ns", "a", {"v": 1}, version=1, expected_version=0),
        refused_turn,
        lambda: checkpoints.save("ns", "taken", {"v": 2}, version=2, expected_version=7),
        lambda: checkpoints.save("ns", "b", {"v": 2}, version=1, expected_version=0),
    )
    assert isinstance(outcomes[1], CheckpointConflictError)
    assert isinstance(outcomes[2], CheckpointConflictError)
    assert not isinstance(outcomes[0], Exception)
    assert not isinstance(outcomes[3], Exception)
    assert _commits(statements) == 2
    # The group met a refusal, was rolled back and ran again with a savepoint per write.
    assert statements.count("BEGIN IMMEDIATE") == 3
    assert statements.count("SAVEPOINT prism_write") == 4
    assert statements.count("ROLLBACK TO prism_write") == 1  # the refused turn (a stale
    # plain save writes nothing and raises outside the transaction)
    assert (await checkpoints.load("ns", "a")).value == {"v": 1}  # type: ignore[union-attr]
    assert (await checkpoints.load("ns", "b")).value == {"v": 2}  # type: ignore[union-attr]
    assert (await checkpoints.load("ns", "taken")).value == {"v": 0}  # type: ignore[union-attr]
    assert await sessions.list("s") == [root]  # the refused turn's entry rolled back with it


async def test_a_failed_commit_fails_every_write_of_its_group(
    stores: tuple[Any, Any, list[str]],
) -> None:
    """A COMMIT that fails (here a deferred foreign key one write broke) fails each write
    of the group with the typed store error; none of them is written."""
    checkpoints, _, _ = stores
    database = checkpoints.database

    def schema(connection: sqlite3.Connection) -> None:
        connection.execute("PRAGMA foreign_keys=ON")
        connection.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
        connection.execute(
            "CREATE TABLE child (pid INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)"
        )

    await database.run("make the tables", schema)

    def orphan(connection: sqlite3.Connection) -> None:
        connection.execute("INSERT INTO child (pid) VALUES (42)")

    outcomes = await _while_a_write_is_in_flight(
        database,
        lambda: checkpoints.save("ns", "a", {"v": 1}, version=1, expected_version=0),
        lambda: database.write("insert an orphan", orphan),
        lambda: checkpoints.save("ns", "b", {"v": 1}, version=1, expected_version=0),
    )
    assert all(isinstance(o, CheckpointStoreError) for o in outcomes), outcomes
    assert not any(isinstance(o, CheckpointConflictError) for o in outcomes)
    assert "FOREIGN KEY" in str(outcomes[0])
    assert "save a checkpoint" in str(outcomes[0])
    assert "insert an orphan" in str(outcomes[1])
    assert await checkpoints.load("ns", "a") is None
    assert await checkpoints.load("ns", "b") is None

    def orphans(connection: sqlite3.Connection) -> int:
        return int(connection.execute("SELECT count(*) FROM child").fetchone()[0])

    assert await database.run("count", orphans) == 0
    # The connection is usable again.
    await checkpoints.save("ns", "a", {"v": 2}, version=1, expected_version=0)
    assert (await checkpoints.load("ns", "a")).value == {"v": 2}  # type: ignore[union-attr]


async def test_group_commit_one_commits_each_write_alone(sqlite_target: Target) -> None:
    async with open_sql_stores(sqlite_target.url, group_commit=1) as opened:
        checkpoints = opened.checkpoints
        statements: list[str] = []

        def trace(connection: sqlite3.Connection) -> None:
            connection.set_trace_callback(statements.append)

        await checkpoints.database.run("trace", trace)  # type: ignore[attr-defined]
        statements.clear()
        entries = [
            create_session_entry(session_id=f"s{i}", kind="label", label="x") for i in range(3)
        ]
        await _while_a_write_is_in_flight(
            checkpoints.database,  # type: ignore[attr-defined]
            *((lambda e=e: opened.sessions.append(e, expected_leaf_id=None)) for e in entries),
            *((lambda i=i: checkpoints.save("ns", f"k{i}", {"v": i}, version=1)) for i in range(2)),
        )
        # The held write's commit and one per append; each save alone is one statement in
        # autocommit, with no BEGIN or COMMIT of its own.
        assert _commits(statements) == 4
        assert statements.count("BEGIN IMMEDIATE") == 4
        assert "SAVEPOINT prism_write" not in statements
        for i in range(2):
            assert await checkpoints.load("ns", f"k{i}") is not None


@pytest.mark.parametrize("bad", [0, -1, 1025, 2.5, "8", True])
def test_group_commit_bound_is_checked(sqlite_target: Target, bad: Any) -> None:
    with pytest.raises(SqlStoreConfigError, match="group_commit"):
        open_sql_stores(sqlite_target.url, group_commit=bad)


async def test_the_writer_checkpoints_the_wal_so_it_is_rewritten_in_place(
    sqlite_target: Target,
) -> None:
    """The writer connection keeps SQLite's automatic checkpoint (1000 pages): after far more
    than 1000 pages of commits the WAL file has stayed near that size (it restarts from its
    beginning after each checkpoint instead of growing), and every row reads back."""
    async with open_sql_stores(sqlite_target.url) as opened:
        checkpoints = opened.checkpoints
        database = checkpoints.database  # type: ignore[attr-defined]

        def threshold(connection: sqlite3.Connection) -> int:
            return int(connection.execute("PRAGMA wal_autocheckpoint").fetchone()[0])

        await checkpoints.save("ns", "k0", {"v": 0}, version=1)
        assert await database.run("read", threshold) == 1000
        # Each save of 9,000 bytes takes at least three pages of 4 KiB: 1,200 saves write
        # well over 3,000 pages, three times the threshold.
        for i in range(1, 1201):
            await checkpoints.save("ns", f"k{i}", {"v": f"{i:05d}" + "x" * 9000}, version=1)
        size = await anyio.to_thread.run_sync(os.path.getsize, f"{database.path}-wal")
        frame = 4096 + 24
        assert size <= 1100 * frame, size
        for i in (1, 600, 1200):
            record = await checkpoints.load("ns", f"k{i}")
            assert record is not None
            assert record.value["v"].startswith(f"{i:05d}")
