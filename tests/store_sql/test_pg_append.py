"""A PostgreSQL session store's append without a durable run: one statement, one commit,
and a refused append writes nothing (the head stays where it was).

Statements and commits are counted as sent to asyncpg or through SQLAlchemy.
"""

from __future__ import annotations

import pytest

from prism_core.records import (
    SessionConflictError,
    SessionEntry,
    SessionEntryNotFoundError,
    create_session_entry,
)
from prism_store_sql import open_sql_stores

from .conftest import PostgresServer, counted_commits, sent_statements

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """asyncpg runs on asyncio only."""
    return "asyncio"


def _entry(session: str, parent: str | None, entry_id: str) -> SessionEntry:
    return create_session_entry(
        session_id=session, kind="label", parent_id=parent, id=entry_id, label=entry_id
    )


async def test_an_append_is_one_statement_and_one_commit(
    postgres_server: PostgresServer,
) -> None:
    """Each append without ``expected_leaf_id``, with ``None`` and with the head is one
    statement sent and one commit."""
    target = postgres_server.fresh()
    stores = open_sql_stores(target.url, table_prefix=target.prefix)
    try:
        sessions = stores.sessions
        await sessions.append(_entry("s", None, "warm"))  # the schema, the connection
        engine = stores.checkpoints.engine
        with counted_commits(engine) as commits, sent_statements(engine) as sent:
            await sessions.append(_entry("s", "warm", "a"))
            await sessions.append(_entry("t", None, "b"), expected_leaf_id=None)
            await sessions.append(_entry("t", "b", "c"), expected_leaf_id="b")
        assert len(sent) == 3
        assert commits() == 3
        assert [e.id for e in await sessions.list("s")] == ["warm", "a"]
        assert [e.id for e in await sessions.list("t")] == ["b", "c"]
    finally:
        await stores.aclose()


async def test_a_refused_append_leaves_the_head(postgres_server: PostgresServer) -> None:
    """A foreign parent, a taken id and a moved head are refused with the store contract's
    errors, and none of them moves the head: the next append at the old head succeeds."""
    target = postgres_server.fresh()
    stores = open_sql_stores(target.url, table_prefix=target.prefix)
    try:
        sessions = stores.sessions
        await sessions.append(_entry("other", None, "foreign"))
        await sessions.append(_entry("s", None, "root"))
        with pytest.raises(SessionEntryNotFoundError):
            await sessions.append(_entry("s", "foreign", "x"))
        with pytest.raises(SessionConflictError, match="already exists"):
            await sessions.append(_entry("s", "root", "foreign"))
        with pytest.raises(SessionConflictError, match="moved"):
            await sessions.append(_entry("s", "root", "y"), expected_leaf_id="nope")
        with pytest.raises(SessionConflictError, match="moved"):
            await sessions.append(_entry("s", None, "z"), expected_leaf_id=None)
        await sessions.append(_entry("s", "root", "next"), expected_leaf_id="root")
        entries = await sessions.list("s")
        assert [e.id for e in entries] == ["root", "next"]
        assert [e.parent_id for e in entries] == [None, "root"]
    finally:
        await stores.aclose()
