"""The SQL session stores read a branch and a run's later entries in one statement."""

from __future__ import annotations

import sqlite3
from typing import Any

import anyio
import pytest

from prism_core.content import Message
from prism_core.records import (
    BranchAndRunTailReader,
    SessionEntry,
    SessionEntryNotFoundError,
    SessionStore,
    create_session_entry,
)
from prism_store_sql import create_sql_session_store

from .conftest import PostgresServer, Target, aiosqlite_url, sent_statements

pytestmark = pytest.mark.anyio


async def _session(store: SessionStore) -> tuple[list[SessionEntry], list[SessionEntry]]:
    """A 30-entry branch, then 10 entries of run ``r`` after its leaf: (branch, tail)."""
    branch: list[SessionEntry] = []
    parent: str | None = None
    for index in range(40):
        entry = create_session_entry(
            session_id="s",
            kind="message",
            parent_id=parent,
            run_id="r",
            message=Message.user(f"entry {index}"),
        )
        branch.append(await store.append(entry))
        parent = entry.id
    return branch[:30], branch[30:]


async def test_sqlite_reads_in_one_hand_off(sqlite_target: Target) -> None:
    """The thread-driven SQLite store answers with one call on its connection."""
    async with create_sql_session_store(sqlite_target.url) as store:
        assert isinstance(store, BranchAndRunTailReader)
        branch, tail = await _session(store)
        database: Any = store.database  # type: ignore[attr-defined]
        calls: list[str] = []
        run = database.read_many

        async def counted(action: str, operation: Any) -> Any:
            calls.append(action)
            return await run(action, operation)

        database.read_many = counted
        read = await store.read_branch_and_run_tail("s", branch[-1].id, "r")
        assert (read.path, read.tail) == (branch, tail)
        assert len(calls) == 1


@pytest.mark.parametrize("backend", ["aiosqlite", "postgresql"])
async def test_engine_stores_read_in_one_statement(
    backend: str, sqlite_target: Target, request: pytest.FixtureRequest
) -> None:
    """The SQLAlchemy-driven stores send one statement for the read."""
    if backend == "postgresql":
        server: PostgresServer = request.getfixturevalue("postgres_server")
        target = server.fresh()
        store = create_sql_session_store(target.url, table_prefix=target.prefix)
    else:
        store = create_sql_session_store(aiosqlite_url(sqlite_target.url))
    async with store:
        assert isinstance(store, BranchAndRunTailReader)
        branch, tail = await _session(store)
        with sent_statements(store.engine) as statements:  # type: ignore[attr-defined]
            read = await store.read_branch_and_run_tail("s", branch[-1].id, "r")
        assert (read.path, read.tail) == (branch, tail)
        assert len(statements) == 1, statements


async def _traced(store: Any, session_id: str, leaf: str, run: str) -> tuple[Any, list[str]]:
    """The read and the SQL statements it ran on the store's connections (a file's reads
    run on its reading connection)."""
    statements: list[str] = []

    def trace(connection: Any) -> None:
        connection.set_trace_callback(statements.append)

    def untrace(connection: Any) -> None:
        connection.set_trace_callback(None)

    database = store.database
    await database.run("trace", trace)
    await anyio.to_thread.run_sync(database._read_call, "trace", trace)
    statements.clear()
    try:
        read = await store.read_branch_and_run_tail(session_id, leaf, run)
    finally:
        await database.run("untrace", untrace)
        await anyio.to_thread.run_sync(database._read_call, "untrace", untrace)
    return read, statements


async def test_sqlite_walks_the_seq_index_and_falls_back_beside_long_branches(
    sqlite_target: Target,
) -> None:
    """A branch that is most of the session is read in index order, without the recursive
    query; a short branch beside a long abandoned one is read with it; both equal
    ``read_branch_path``, and the run's later entries come with them."""
    async with create_sql_session_store(sqlite_target.url) as store:

        async def add(text: str, parent: SessionEntry | None, run: str | None) -> SessionEntry:
            entry = create_session_entry(
                session_id="s",
                kind="message",
                parent_id=parent.id if parent is not None else None,
                run_id=run,
                message=Message.user(text),
            )
            return await store.append(entry)

        root = await add("root", None, None)
        abandoned = root
        for index in range(60):
            abandoned = await add(f"abandoned {index}", abandoned, "old")
        short = await add("short 1", root, "r")
        short = await add("short 2", short, "r")
        later = await add("later", short, "r")
        await add("elsewhere", abandoned, "r")
        read, statements = await _traced(store, "s", short.id, "r")
        assert read.path == await store.read_branch_path("s", short.id)
        assert [entry.message.text for entry in read.path] == ["root", "short 1", "short 2"]
        assert [entry.message.text for entry in read.tail] == ["later", "elsewhere"]
        assert any("RECURSIVE" in text for text in statements)
        read, statements = await _traced(store, "s", abandoned.id, "old")
        assert read.path == await store.read_branch_path("s", abandoned.id)
        assert len(read.path) == 61
        assert read.tail == []
        assert not any("RECURSIVE" in text for text in statements)
        assert later in (await store.read_branch_and_run_tail("s", root.id, "r")).tail


@pytest.mark.parametrize("driver", ["sqlite", "aiosqlite"])
async def test_a_branch_whose_ancestor_is_gone_names_it(sqlite_target: Target, driver: str) -> None:
    """A branch whose chain breaks (an ancestor row removed behind the store's back) is
    refused by both reads, naming the missing entry, on both SQLite drivers."""
    url = sqlite_target.url if driver == "sqlite" else aiosqlite_url(sqlite_target.url)
    async with create_sql_session_store(url) as store:
        branch, tail = await _session(store)
        gone = branch[10]
        path = sqlite_target.url.removeprefix("sqlite:///")
        with sqlite3.connect(path) as raw:
            raw.execute(
                f"DELETE FROM {sqlite_target.prefix}session_entries WHERE id = ?", (gone.id,)
            )
        with pytest.raises(SessionEntryNotFoundError) as raised:
            await store.read_branch_path("s", branch[-1].id)
        assert gone.id in str(raised.value)
        with pytest.raises(SessionEntryNotFoundError) as raised:
            await store.read_branch_and_run_tail("s", branch[-1].id, "r")
        assert gone.id in str(raised.value)
        read = await store.read_branch_and_run_tail("s", branch[5].id, "r")
        assert read.path == branch[:6]
        assert read.tail == [*branch[6:10], *branch[11:], *tail]


@pytest.mark.parametrize("driver", ["sqlite", "aiosqlite", "postgresql"])
async def test_a_parent_link_into_another_session_is_not_followed(
    sqlite_target: Target, driver: str, request: pytest.FixtureRequest
) -> None:
    """The branch query walks parent links by primary key and keeps only the session's own
    rows: an entry whose parent was pointed (behind the store's back) at another session's
    entry reads as a branch with a missing ancestor, never as that session's rows."""
    if driver == "postgresql":
        server: PostgresServer = request.getfixturevalue("postgres_server")
        target = server.fresh()
        store: Any = create_sql_session_store(target.url, table_prefix=target.prefix)
    else:
        target = sqlite_target
        url = sqlite_target.url if driver == "sqlite" else aiosqlite_url(sqlite_target.url)
        store = create_sql_session_store(url)
    async with store:
        branch, _ = await _session(store)
        other = await store.append(
            create_session_entry(session_id="t", kind="message", message=Message.user("t"))
        )
        table = f"{target.prefix}session_entries"
        update = f"UPDATE {table} SET parent_id = :parent WHERE id = :entry"
        params = {"parent": other.id, "entry": branch[3].id}
        if driver == "sqlite":
            with sqlite3.connect(sqlite_target.url.removeprefix("sqlite:///")) as raw:
                raw.execute(update, params)
        else:
            import sqlalchemy as sa

            async with store.engine.begin() as connection:
                await connection.execute(sa.text(update), params)
        with pytest.raises(SessionEntryNotFoundError) as raised:
            await store.read_branch_path("s", branch[-1].id)
        assert other.id in str(raised.value)
        with pytest.raises(SessionEntryNotFoundError):
            await store.read_branch_and_run_tail("s", branch[-1].id, "r")
        assert await store.read_branch_path("t", other.id) == [other]
