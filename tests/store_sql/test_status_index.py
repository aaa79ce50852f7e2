"""The SQL store's status column: every write path fills it, migration 2 backfills it, and
``list_agent_runs`` reads only the matching rows through it."""

from __future__ import annotations

import sys
import time
from typing import Any

import anyio
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

import prism_store_sql._checkpoint_rows as sql_checkpoints
import prism_store_sql._migrations as sql_migrations
from prism_core.stores import CORRUPT_CHECKPOINT_CODE, CheckpointStoreError, shared_transaction
from prism_store_sql import (
    SCHEMA_VERSION,
    SqlStoreSchemaError,
    create_sql_checkpoint_store,
    migrate,
    open_sql_stores,
    read_schema_version,
)
from prism_store_sql._engine import async_url
from prism_store_sql._schema import build_tables

from .conftest import Target

pytestmark = pytest.mark.anyio

OWNER = '{"tenant_id":"t1"}'

#: (key, owner, stored value text, the status migration 2 must give it)
V1_ROWS: list[tuple[str, str, str, str | None]] = [
    ("a", "", '{"i":1,"status":"running"}', "running"),
    ("b", OWNER, '{"status":"suspended"}', "suspended"),
    ("c", "", '"just text"', None),
    ("d", "", '{"status":5}', None),
    ("e", "", "[1,2]", None),
    ("f", "", '{"status":""}', None),
    ("g", "", "{not json", None),
    ("h", "", '{"nested":{"status":"running"}}', None),
    ("i", "", '{"status":"' + "x" * 65 + '"}', None),
    ("j", "", '{"status":"suspended"}', "suspended"),
]


async def _statuses(target: Target) -> dict[str, str | None]:
    table = build_tables(target.prefix).checkpoints
    engine = create_async_engine(async_url(target.url))
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(sa.select(table.c.key, table.c.status))
            return {row.key: row.status for row in rows}
    finally:
        await engine.dispose()


async def _make_v1_database(target: Target) -> None:
    """A database as version 1 left it: the v1 tables, the version row and some records."""
    tables = build_tables(target.prefix)
    v1 = sql_migrations._checkpoints_v1(target.prefix)

    def create(connection: sa.Connection) -> None:
        tables.schema_version.create(connection)
        sql_migrations.MIGRATIONS[0].apply(connection, tables)
        connection.execute(
            sa.insert(tables.schema_version).values(
                version=1, description="v1", applied_at=time.time()
            )
        )
        connection.execute(
            sa.insert(v1),
            [
                {
                    "namespace": "runs",
                    "key": key,
                    "owner": owner,
                    "version": 1,
                    "value": value,
                    "created_at": 1.0,
                    "updated_at": 1.0,
                }
                for key, owner, value, _ in V1_ROWS
            ],
        )
        connection.commit()

    engine = create_async_engine(async_url(target.url))
    try:
        async with engine.connect() as connection:
            await connection.run_sync(create)
    finally:
        await engine.dispose()


async def test_migration_2_backfills_the_status_of_existing_rows(
    fresh_target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A v1 database is refused until migrated; migrating fills the column in batches from
    each stored state's status (NULL for anything else) and the index serves it."""
    await _make_v1_database(fresh_target)
    prefix = fresh_target.prefix
    assert await read_schema_version(fresh_target.url, table_prefix=prefix) == 1
    async with create_sql_checkpoint_store(
        fresh_target.url, table_prefix=prefix, create_schema=False
    ) as store:
        with pytest.raises(SqlStoreSchemaError, match="are at schema version 1"):
            await store.load("runs", "a")
    monkeypatch.setattr(sql_migrations, "BACKFILL_BATCH", 3)
    assert await migrate(fresh_target.url, table_prefix=prefix) == SCHEMA_VERSION == 3
    assert await _statuses(fresh_target) == {key: status for key, _, _, status in V1_ROWS}
    async with create_sql_checkpoint_store(
        fresh_target.url, table_prefix=prefix, create_schema=False
    ) as store:
        suspended = await store.list_by_status("runs", "suspended")
        assert [record.key for record in suspended.records] == ["j"]
        owned = await store.list_by_status("runs", "suspended", ownership={"tenant_id": "t1"})
        assert [(r.key, r.value) for r in owned.records] == [("b", {"status": "suspended"})]
        running = await store.list_by_status("runs", "running")
        assert [(r.key, r.value) for r in running.records] == [("a", {"i": 1, "status": "running"})]
        await store.save("runs", "c", {"status": "failed"}, version=2, expected_version=1)
        assert [r.key for r in (await store.list_by_status("runs", "failed")).records] == ["c"]


async def test_the_migrate_command_upgrades_a_v1_sqlite_file(sqlite_target: Target) -> None:
    """``python -m prism_store_sql migrate`` (the command the refusal names) upgrades a v1 file."""
    await _make_v1_database(sqlite_target)
    done = await anyio.run_process(
        [sys.executable, "-m", "prism_store_sql", "migrate", sqlite_target.url], check=False
    )
    assert done.returncode == 0, done.stderr
    assert await read_schema_version(sqlite_target.url) == SCHEMA_VERSION
    assert (await _statuses(sqlite_target))["a"] == "running"


async def test_every_write_path_keeps_the_column(fresh_target: Target) -> None:
    """Plain saves (insert, compare-and-swap, upsert) and shared-transaction saves write the
    value's status, or NULL when the value has none; a delete takes the row with it."""
    async with open_sql_stores(fresh_target.url, table_prefix=fresh_target.prefix) as stores:
        store = stores.checkpoints
        await store.save("runs", "k1", {"status": "running"}, version=1, expected_version=0)
        await store.save("runs", "k1", {"status": "suspended"}, version=2, expected_version=1)
        await store.save("runs", "k2", {"status": "running"}, version=1)
        await store.save("runs", "k2", ["no", "status"], version=2)
        await store.save("runs", "k4", {"status": "running"}, version=1)
        transaction = shared_transaction(store, stores.sessions)
        assert transaction is not None
        async with transaction as tx:
            tx.save("runs", "k3", {"status": "succeeded"}, version=1, expected_version=0)
            tx.save("runs", "k1", {"x": 1}, version=3, expected_version=2)
        assert await store.delete("runs", "k4")
    assert await _statuses(fresh_target) == {"k1": None, "k2": None, "k3": "succeeded"}


async def test_a_corrupt_indexed_row_is_named_not_hidden(fresh_target: Target) -> None:
    """A row whose stored value was damaged behind the store's back is reported in the page's
    ``unreadable`` (named, with the corrupt-record reason), not silently skipped."""
    async with create_sql_checkpoint_store(
        fresh_target.url, table_prefix=fresh_target.prefix
    ) as store:
        await store.save("runs", "bad", {"status": "running"}, version=1)
        table = build_tables(fresh_target.prefix).checkpoints
        engine = create_async_engine(async_url(fresh_target.url))
        try:
            async with engine.begin() as connection:
                await connection.execute(sa.update(table).values(value="{broken"))
        finally:
            await engine.dispose()
        by_status = await store.list_by_status("runs", "running")
        listed = await store.list("runs")
        for page in (by_status, listed):
            assert page.records == ()
            assert [(u.namespace, u.key) for u in page.unreadable] == [("runs", "bad")]
            assert "{broken" not in page.unreadable[0].reason
        with pytest.raises(CheckpointStoreError) as info:
            await store.load("runs", "bad")
        assert info.value.code == CORRUPT_CHECKPOINT_CODE


async def test_list_agent_runs_decodes_only_the_matching_rows(
    fresh_target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real runs on a SQL store: a status filter decodes only the records of that status,
    pages by cursor and never lists another tenant's runs."""
    from prism_core import (
        RunStateOptions,
        ToolDefinition,
        create_agent,
        create_mock_provider,
        list_agent_runs,
        provider_done,
        provider_text_delta,
        provider_tool_call,
        tool_call_content,
    )

    def turns(request: Any) -> list[Any]:
        if any(message.role == "assistant" for message in request.messages):
            return [provider_text_delta("done"), provider_done()]
        return [provider_tool_call(tool_call_content("c1", "echo", {"n": 1})), provider_done()]

    decoded: list[str] = []
    decode = sql_checkpoints.decode_stored_value

    def counting(raw: Any, namespace: str, key: str) -> Any:
        decoded.append(key)
        return decode(raw, namespace, key)

    tenant = {"tenant_id": "t1"}
    async with open_sql_stores(fresh_target.url, table_prefix=fresh_target.prefix) as stores:
        agent = create_agent(
            id="worker",
            model={"provider": "mock", "model": "demo"},
            provider=create_mock_provider(turns),
            tools=[ToolDefinition("echo", lambda args, context: args)],
            store=stores.sessions,
        )
        checkpoints = stores.checkpoints
        for index in range(6):
            suspend = index < 4
            options: dict[str, Any] = (
                {"interrupt_before_tool": True} if suspend else {"checkpoint_policy": "every-turn"}
            )
            await agent.create_session(id=f"s-{index}").run(
                "go", run_state=RunStateOptions(checkpoints, "rev-1", ownership=tenant, **options)
            )
        await agent.create_session(id="s-other").run(
            "go", run_state=RunStateOptions(checkpoints, "rev-1", interrupt_before_tool=True)
        )
        monkeypatch.setattr(sql_checkpoints, "decode_stored_value", counting)
        done = await list_agent_runs(checkpoints, status="succeeded", ownership=tenant)
        assert sorted(summary.session_id for summary in done.runs) == ["s-4", "s-5"]
        assert len(decoded) == 2
        decoded.clear()
        seen: list[str] = []
        cursor = None
        while True:
            page = await list_agent_runs(
                checkpoints, status="suspended", ownership=tenant, limit=3, cursor=cursor
            )
            seen.extend(summary.session_id for summary in page.runs)
            cursor = page.cursor
            if cursor is None:
                break
        assert sorted(seen) == ["s-0", "s-1", "s-2", "s-3"]
        assert len(decoded) == 4
        unowned = await list_agent_runs(checkpoints, status="suspended")
        assert [summary.session_id for summary in unowned.runs] == ["s-other"]
