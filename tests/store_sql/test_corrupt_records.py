"""Corrupt rows written with the driver: typed errors from the SQL store and the durable layer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from prism_core import AGENT_RUN_NAMESPACE
from prism_store_sql import SqlCheckpointStore, create_sql_checkpoint_store
from prism_store_sql._engine import async_url
from tests.core.records_support import (
    RUN_ID,
    expect_corrupt,
    expect_listed_around,
    expect_metadata_absent,
    expect_not_a_state,
    seed,
    seed_neighbours,
)

from .conftest import Target

pytestmark = pytest.mark.anyio


class Rows:
    """Reads and rewrites the seeded checkpoint row with plain SQL, behind the store's back."""

    def __init__(self, engine: AsyncEngine, prefix: str) -> None:
        self.engine = engine
        self.table = f'"{prefix}checkpoints"'

    async def set(self, **columns: Any) -> None:
        """``UPDATE`` the row's columns to exactly these values."""
        assignments = ", ".join(f'"{name}" = :{name}' for name in columns)
        async with self.engine.begin() as connection:
            result = await connection.execute(
                sa.text(
                    f"UPDATE {self.table} SET {assignments} WHERE namespace = :ns AND key = :k"
                ),
                {**columns, "ns": AGENT_RUN_NAMESPACE, "k": RUN_ID},
            )
            assert result.rowcount == 1

    async def raw(self) -> Any:
        """Every column of the row, as the database holds it."""
        async with self.engine.connect() as connection:
            row = (
                await connection.execute(
                    sa.text(f"SELECT * FROM {self.table} WHERE key = :k"), {"k": RUN_ID}
                )
            ).one()
        return tuple(row)


@pytest.fixture
async def seeded(fresh_target: Target) -> AsyncIterator[tuple[SqlCheckpointStore, Rows]]:
    """A store holding one good record on this target, and direct access to its row."""
    engine = create_async_engine(async_url(fresh_target.url))
    try:
        async with create_sql_checkpoint_store(
            fresh_target.url, table_prefix=fresh_target.prefix
        ) as store:
            await seed(store)
            yield store, Rows(engine, fresh_target.prefix)
    finally:
        await engine.dispose()


@pytest.mark.parametrize("value", ['{"status": "suspen', "", "nul", '{"a": [1, 2}'])
async def test_value_that_is_not_json(seeded: tuple[SqlCheckpointStore, Rows], value: str) -> None:
    """A truncated, empty or garbled value column is a typed corrupt-record error."""
    store, rows = seeded
    await rows.set(value=value)
    await expect_corrupt(store, rows.raw)


@pytest.mark.parametrize("value", ['{"status": "suspen', "nul"])
async def test_a_corrupt_row_is_left_out_of_listings_and_named(
    seeded: tuple[SqlCheckpointStore, Rows], value: str
) -> None:
    """A row rewritten with the driver so it cannot be read back, between two good runs: every
    listing returns the good runs and names the corrupt one in ``unreadable``."""
    store, rows = seeded
    await seed_neighbours(store)
    await rows.set(value=value)
    await expect_listed_around(store)


@pytest.mark.parametrize("value", ["[1, 2]", '"suspended"', "7", "null", '{"status": "x"}'])
async def test_value_that_is_json_but_not_a_state(
    seeded: tuple[SqlCheckpointStore, Rows], value: str
) -> None:
    """JSON that is not a run state is returned by the store and refused by the durable layer."""
    store, rows = seeded
    await rows.set(value=value)
    await expect_not_a_state(store, rows.raw)


@pytest.mark.parametrize("metadata", ["not json{", "", '{"n": 1}', "[]", '"text"'])
async def test_metadata_that_cannot_be_read_is_absent(
    seeded: tuple[SqlCheckpointStore, Rows], metadata: str
) -> None:
    """A sidecar that is not a JSON map of strings reads as absent; the state still loads."""
    store, rows = seeded
    await rows.set(metadata=metadata)
    await expect_metadata_absent(store)


async def test_sqlite_version_that_is_not_an_integer(
    sqlite_target: Target,
) -> None:
    """SQLite keeps text in an INTEGER column: such a version is a corrupt record."""
    engine = create_async_engine(async_url(sqlite_target.url))
    try:
        async with create_sql_checkpoint_store(sqlite_target.url) as store:
            await seed(store)
            rows = Rows(engine, sqlite_target.prefix)
            await rows.set(version="one")
            await expect_corrupt(store, rows.raw)
    finally:
        await engine.dispose()
