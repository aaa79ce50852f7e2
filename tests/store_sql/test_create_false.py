"""``open_stores(url, create=False)``: the SQL stores create nothing. A SQLite file that does
not exist, or a database without Prism tables under the prefix, is refused on first use with
"no Prism tables at <url>" (its password masked), and neither the file nor any table appears."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

import prism_store_sql
from prism_core import AGENT_RUN_NAMESPACE, open_checkpoint_store, open_stores
from prism_store_sql import SqlStoreSchemaError
from prism_store_sql._engine import async_url

from .conftest import PostgresServer, Target


def _with_prefix(target: Target) -> str:
    joiner = "&" if "?" in target.url else "?"
    return f"{target.url}{joiner}table_prefix={target.prefix}"


async def _pg_tables(url: str, prefix: str) -> list[str]:
    engine = create_async_engine(async_url(url))
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(
                sa.text(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                    "AND starts_with(tablename, :prefix)"
                ),
                {"prefix": prefix},
            )
            return sorted(rows.scalars())
    finally:
        await engine.dispose()


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


async def _refused(url: str) -> str:
    async with open_stores(url, plugins=[prism_store_sql.plugin], create=False) as pair:
        with pytest.raises(SqlStoreSchemaError) as caught:
            await pair.checkpoints.load(AGENT_RUN_NAMESPACE, "run-1")
        with pytest.raises(SqlStoreSchemaError):
            await pair.sessions.list("s-1")
    assert caught.value.code == "ERR_PRISM_STORE_SCHEMA"
    return str(caught.value)


@pytest.mark.anyio
@pytest.mark.parametrize("scheme", ["sqlite", "sqlite+aiosqlite"])
async def test_a_missing_sqlite_file_is_refused_and_not_created(
    tmp_path: Path, scheme: str
) -> None:
    path = tmp_path / "typo.db"
    message = await _refused(f"{scheme}:///{path}")
    assert message.startswith("no Prism tables at sqlite")
    assert str(path) in message
    assert _names(tmp_path) == []


@pytest.mark.anyio
async def test_a_sqlite_file_without_prism_tables_is_left_as_it_was(tmp_path: Path) -> None:
    """Another application's database: no Prism table, no WAL switch, no side file."""
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    before = path.read_bytes()
    message = await _refused(f"sqlite:///{path}")
    assert message.startswith(f"no Prism tables at sqlite:///{path}")
    assert path.read_bytes() == before
    assert _names(tmp_path) == ["other.db"]
    with sqlite3.connect(path) as connection:
        names = [row[0] for row in connection.execute("SELECT name FROM sqlite_master")]
        mode = connection.execute("PRAGMA journal_mode").fetchone()[0]
    assert names == ["invoices"]
    assert mode == "delete"


@pytest.mark.anyio
async def test_postgresql_without_tables_under_the_prefix_creates_none(
    postgres_server: PostgresServer,
) -> None:
    target = postgres_server.fresh()
    secret_url = target.url.replace("postgres@", "postgres:s3cret-pw@", 1)
    assert "s3cret-pw" in secret_url
    message = await _refused(_with_prefix(Target(target.backend, secret_url, target.prefix)))
    assert message.startswith("no Prism tables at postgresql")
    assert "s3cret-pw" not in message
    assert "postgres:***@" in message
    assert await _pg_tables(target.url, target.prefix) == []


@pytest.mark.anyio
async def test_create_false_uses_existing_tables(sqlite_target: Target) -> None:
    """Once the tables exist (here: created by a default store) the same URL opens."""
    async with open_checkpoint_store(
        sqlite_target.url, plugins=[prism_store_sql.plugin]
    ) as creator:
        await creator.load(AGENT_RUN_NAMESPACE, "run-1")
    store: Any = open_checkpoint_store(
        sqlite_target.url, plugins=[prism_store_sql.plugin], create=False
    )
    async with store:
        assert await store.load(AGENT_RUN_NAMESPACE, "run-1") is None
