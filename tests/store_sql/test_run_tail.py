"""The SQL session stores read a branch and a run's later entries in one statement."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from prism_core.content import Message
from prism_core.sessions import (
    BranchAndRunTailReader,
    SessionEntry,
    SessionStore,
    create_session_entry,
)
from prism_store_sql import create_sql_session_store

from .conftest import PostgresServer, Target, aiosqlite_url

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
        run = database.run

        async def counted(action: str, operation: Any) -> Any:
            calls.append(action)
            return await run(action, operation)

        database.run = counted
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
        statements: list[str] = []

        def record(*args: Any) -> None:
            statements.append(args[2])

        engine = store.engine.sync_engine  # type: ignore[attr-defined]
        sa.event.listen(engine, "before_cursor_execute", record)
        try:
            read = await store.read_branch_and_run_tail("s", branch[-1].id, "r")
        finally:
            sa.event.remove(engine, "before_cursor_execute", record)
        assert (read.path, read.tail) == (branch, tail)
        assert len(statements) == 1, statements
