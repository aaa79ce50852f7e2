"""Commits per turn of an every-turn run on the SQL stores, counted at the database driver.

SQLite: a ``sqlite3`` trace callback on the stores' one connection counts each ``COMMIT``
and each write statement run outside a transaction (autocommit). PostgreSQL: SQLAlchemy's
``commit`` event on the shared engine counts each transaction committed (an autocommit
statement's too).
"""

from __future__ import annotations

import sqlite3
import uuid
from typing import Any

import attrs
import pytest
import sqlalchemy as sa

import prism_store_sql
from prism_core import (
    RunStateOptions,
    ToolDefinition,
    create_agent,
    create_mock_provider,
    decide_agent_run,
    open_stores,
)
from prism_core.durable._outbox import OUTBOX_NAMESPACE
from prism_core.errors import CheckpointConflictError
from prism_core.records import SessionConflictError, SessionEntryNotFoundError, create_session_entry
from prism_store_sql import create_sql_checkpoint_store, create_sql_session_store, open_sql_stores
from tests.core.helpers import text_turn, tool_turn
from tests.turn_commits import commits_per_turn

from .conftest import PostgresServer, Target, counted_commits, sent_statements

SHARED = {"read-only": 1, "idempotent": 1, "side-effecting": 2, "answer": 1}
WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def count_sqlite_commits(connection: sqlite3.Connection) -> list[int]:
    """Count the commits ``connection`` makes from now on (in the returned one-item list)."""
    count = [0]

    def trace(statement: str) -> None:
        head = statement.lstrip().split(None, 1)[0].upper()
        if head == "COMMIT" or (head in WRITES and not connection.in_transaction):
            count[0] += 1

    connection.set_trace_callback(trace)
    return count


@pytest.mark.anyio
async def test_sqlite_one_commit_per_read_only_turn(sqlite_target: Target) -> None:
    """``open_sql_stores`` on SQLite: 1 commit for a read-only or idempotent turn, 2 for a
    side-effecting one."""
    async with open_sql_stores(sqlite_target.url) as stores:
        await stores.checkpoints.load("warm", "up")  # opens the connection
        connection = stores.checkpoints.database._connection  # type: ignore[attr-defined]
        count = count_sqlite_commits(connection)
        per_turn = await commits_per_turn(stores.checkpoints, stores.sessions, lambda: count[0])
    assert per_turn == SHARED


@pytest.mark.anyio
async def test_sqlite_notifications_add_no_commit_to_a_turn(sqlite_target: Target) -> None:
    """A notifying run on SQLite: the same commits per turn (its ``finished`` notification
    rides its last commit)."""
    async with open_sql_stores(sqlite_target.url) as stores:
        await stores.checkpoints.load("warm", "up")
        connection = stores.checkpoints.database._connection  # type: ignore[attr-defined]
        count = count_sqlite_commits(connection)
        per_turn = await commits_per_turn(
            stores.checkpoints, stores.sessions, lambda: count[0], notify=True
        )
    assert per_turn == SHARED


@pytest.mark.anyio
async def test_postgres_notifications_add_no_commit_to_a_turn(
    postgres_server: PostgresServer,
) -> None:
    """A notifying run on PostgreSQL: the same commits per turn."""
    target = postgres_server.shared()
    async with open_sql_stores(target.url, table_prefix=target.prefix) as stores:
        with counted_commits(stores.checkpoints.engine) as commits:
            per_turn = await commits_per_turn(
                stores.checkpoints, stores.sessions, commits, notify=True
            )
    assert per_turn == SHARED


async def _decision_commits(stores: Any, count: list[int], *, notify: bool) -> tuple[int, int]:
    """Suspend a refund run and approve it with ``decide_agent_run``: the commits the
    decision cost, and the outbox records it wrote."""
    agent = create_agent(
        id="desk",
        model={"provider": "mock", "model": "m"},
        provider=create_mock_provider(
            turns=[tool_turn(("r1", "refund", {"amount": 9})), text_turn("ok")]
        ),
        store=stores.sessions,
        tools=[ToolDefinition("refund", lambda args, ctx: "ok", needs_approval=True)],
    )
    result = await agent.create_session(id=f"s-{uuid.uuid4().hex[:8]}").run(
        "go", run_state=RunStateOptions(stores.checkpoints, "rev-1", notify=notify)
    )
    assert result.status == "suspended"
    before = (await stores.checkpoints.list(OUTBOX_NAMESPACE)).records
    start = count[0]
    await decide_agent_run(
        agent,
        {"run_id": result.run_id},
        {"expected_version": result.run_state.version, "decision": "approve", "actor": "ann"},
        checkpoints=stores.checkpoints,
        definition_revision="rev-1",
    )
    after = (await stores.checkpoints.list(OUTBOX_NAMESPACE)).records
    return count[0] - start, len(after) - len(before)


@pytest.mark.anyio
async def test_sqlite_a_decision_commits_its_notification_with_it(sqlite_target: Target) -> None:
    """``decide_agent_run`` on SQLite: the decision's compare-and-swap write and its work mark
    are two commits, with or without the ``decided`` notification, which rides the first."""
    async with open_sql_stores(sqlite_target.url) as stores:
        await stores.checkpoints.load("warm", "up")
        connection = stores.checkpoints.database._connection  # type: ignore[attr-defined]
        count = count_sqlite_commits(connection)
        assert await _decision_commits(stores, count, notify=False) == (2, 0)
        assert await _decision_commits(stores, count, notify=True) == (2, 1)


@pytest.mark.anyio
async def test_sqlite_url_opened_as_a_pair_commits_a_turn_once(sqlite_target: Target) -> None:
    """``prism_core.open_stores("sqlite:///…")`` through the plugin gives both stores one
    connection: 1 commit for a read-only or idempotent turn, 2 for a side-effecting one."""
    async with open_stores(sqlite_target.url, plugins=[prism_store_sql.plugin]) as pair:
        checkpoints, sessions = pair
        await checkpoints.load("warm", "up")
        connection = checkpoints.database._connection  # type: ignore[attr-defined]
        assert sessions.database._connection is connection  # type: ignore[attr-defined]
        count = count_sqlite_commits(connection)
        per_turn = await commits_per_turn(checkpoints, sessions, lambda: count[0])
    assert per_turn == SHARED


@pytest.mark.anyio
async def test_sqlite_stores_on_two_connections_commit_each_write(sqlite_target: Target) -> None:
    """Two stores opened from one URL have a connection each and do not share commits: the
    session store's appends commit on their own connection (counted there)."""
    checkpoints = create_sql_checkpoint_store(sqlite_target.url)
    sessions = create_sql_session_store(sqlite_target.url)
    async with checkpoints, sessions:
        await checkpoints.load("warm", "up")
        await sessions.list("warm")
        saves = count_sqlite_commits(checkpoints.database._connection)  # type: ignore[attr-defined]
        appends = count_sqlite_commits(sessions.database._connection)  # type: ignore[attr-defined]
        per_turn = await commits_per_turn(checkpoints, sessions, lambda: saves[0] + appends[0])
    assert per_turn == {"read-only": 3, "idempotent": 3, "side-effecting": 4, "answer": 2}


@pytest.mark.anyio
async def test_postgres_one_commit_per_read_only_turn(postgres_server: PostgresServer) -> None:
    """``open_sql_stores`` on PostgreSQL (one engine): 1 commit for a read-only or
    idempotent turn, 2 for a side-effecting one."""
    target = postgres_server.shared()
    async with open_sql_stores(target.url, table_prefix=target.prefix) as stores:
        with counted_commits(stores.checkpoints.engine) as commits:
            per_turn = await commits_per_turn(stores.checkpoints, stores.sessions, commits)
    assert per_turn == SHARED


@pytest.mark.anyio
async def test_postgres_url_opened_as_a_pair_commits_a_turn_once(
    postgres_server: PostgresServer,
) -> None:
    """``prism_core.open_stores("postgresql://…?table_prefix=…")`` gives both stores one
    engine: 1 commit for a read-only or idempotent turn, 2 for a side-effecting one."""
    target = postgres_server.shared()
    url = f"{target.url}?table_prefix={target.prefix}"
    async with open_stores(url, plugins=[prism_store_sql.plugin]) as pair:
        checkpoints, sessions = pair
        assert sessions.engine is checkpoints.engine  # type: ignore[attr-defined]
        with counted_commits(checkpoints.engine) as commits:  # type: ignore[attr-defined]
            per_turn = await commits_per_turn(checkpoints, sessions, commits)
    assert per_turn == SHARED


@pytest.mark.anyio
async def test_postgres_session_store_on_the_checkpoint_engine_shares_commits(
    postgres_server: PostgresServer,
) -> None:
    """``create_sql_session_store(checkpoints)`` shares the engine, and so the commits."""
    target = postgres_server.shared()
    checkpoints = create_sql_checkpoint_store(target.url, table_prefix=target.prefix)
    sessions = create_sql_session_store(checkpoints)
    async with checkpoints, sessions:
        with counted_commits(checkpoints.engine) as commits:
            per_turn = await commits_per_turn(checkpoints, sessions, commits)
    assert per_turn == SHARED


def _label(session_id: str, text: str, parent: Any = None) -> Any:
    return create_session_entry(
        session_id=session_id,
        kind="label",
        label=text,
        parent_id=parent.id if parent is not None else None,
    )


@pytest.mark.anyio
async def test_postgres_turn_commit_in_one_statement(postgres_server: PostgresServer) -> None:
    """A save and a chain of appends without a head check (a turn's commit) is one
    statement on PostgreSQL: the entries follow the head in order and the save is written;
    a refused save writes none of the entries; a foreign parent or a taken id refuses the
    whole commit with the same errors as a plain append."""
    target = postgres_server.shared()
    ns, run, session = f"ns-{uuid.uuid4().hex}", "run-1", f"s-{uuid.uuid4().hex}"
    async with open_sql_stores(target.url, table_prefix=target.prefix) as stores:
        checkpoints, sessions = stores
        root = _label(session, "root")
        await sessions.append(root)
        first = _label(session, "a", root)
        second = _label(session, "b", first)
        assert await checkpoints.load(ns, run) is None  # prepares the store
        with sent_statements(checkpoints.engine) as statements:
            async with stores.transaction() as tx:
                tx.save(ns, run, {"v": 1}, version=1, expected_version=0)
                tx.append(first)
                tx.append(second)
        assert len(statements) == 1
        assert [r.version for r in tx.records] == [1]
        assert await sessions.read_branch_path(session, second.id) == [root, first, second]
        assert [e.id for e in await sessions.list(session)] == [root.id, first.id, second.id]
        # The head moved to the last entry: the next plain append follows it.
        third = _label(session, "c", second)
        await sessions.append(third, expected_leaf_id=second.id)

        stranger = _label(f"{session}-other", "elsewhere")
        await sessions.append(stranger)

        async def commit(version: int, expected: int, *appended: Any) -> None:
            async with stores.transaction() as tx:
                tx.save(ns, run, {"v": version}, version=version, expected_version=expected)
                for entry in appended:
                    tx.append(entry)

        with pytest.raises(CheckpointConflictError):
            await commit(2, 0, _label(session, "lost", third))
        with pytest.raises(SessionEntryNotFoundError):
            await commit(2, 1, _label(session, "ok", third), _label(session, "bad", stranger))
        with pytest.raises(SessionConflictError):
            await commit(2, 1, attrs.evolve(_label(session, "dup", third), id=first.id))
        record = await checkpoints.load(ns, run)
        assert record is not None
        assert (record.version, record.value) == (1, {"v": 1})
        assert [e.id for e in await sessions.list(session)] == [
            root.id,
            first.id,
            second.id,
            third.id,
        ]


@pytest.mark.anyio
async def test_postgres_turn_commit_on_a_new_connection_reads_no_catalog(
    postgres_server: PostgresServer,
) -> None:
    """The one-statement turn commit binds only array types asyncpg encodes without asking
    the server: a new connection's first commit sends no catalog (type) query, which costs
    8-11 ms, and every timestamp reads back as the same double."""
    target = postgres_server.shared()
    session = f"s-{uuid.uuid4().hex}"
    queries: list[str] = []
    async with open_sql_stores(target.url, table_prefix=target.prefix) as stores:
        checkpoints, sessions = stores

        def on_connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.driver_connection.add_query_logger(
                lambda logged: queries.append(logged.query)
            )

        sa.event.listen(checkpoints.engine.sync_engine, "connect", on_connect)
        root = _label(session, "root")
        assert await checkpoints.load("ns", session) is None  # connects, reads the schema
        queries.clear()
        times = (1764607000.1234567, 0.1 + 0.2, 1e-7, 2.0**40 + 0.5)
        chain = [root]
        for index, timestamp in enumerate(times):
            entry = attrs.evolve(_label(session, f"e{index}", chain[-1]), timestamp=timestamp)
            chain.append(entry)
        async with stores.transaction() as tx:
            tx.save("ns", session, {"v": 1}, version=1, expected_version=0)
            for entry in chain:
                tx.append(entry)
        assert queries, "the query logger saw nothing: it is not on the store's connection"
        assert [q for q in queries if "pg_catalog" in q] == []
        stored = await sessions.read_branch_path(session, chain[-1].id)
        assert [e.timestamp for e in stored] == [e.timestamp for e in chain]
        assert stored == chain
