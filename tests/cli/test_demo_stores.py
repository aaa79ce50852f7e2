"""The demo's stores: one pair per URL under a private prefix, removed without a trace.

The demo opens its stores through ``prism_core.open_stores`` and the installed plugins; on a
shared PostgreSQL or Redis server it must drop everything it wrote under its prefix, and
nothing else.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import anyio
import psycopg
import pytest
import redis

from prism_cli._demo import run_crash_demo
from prism_cli._demo_stores import (
    drop_demo_stores,
    open_demo_stores,
    prefixed_url,
)
from prism_core import (
    RunStateOptions,
    create_agent,
    create_mock_provider,
    discover_store_plugins,
    provider_done,
    provider_text_delta,
)
from prism_store_redis import RedisCheckpointStore
from prism_store_sql import SqlCheckpointStore
from tests.conftest import POSTGRES_URL, REDIS_URL, service_unavailable
from tests.integration.test_crash_demo import reachable


def _write_through(url: str, prefix: str) -> None:
    """One durable run on the demo's pair: session entries and checkpoints under ``prefix``."""

    async def write() -> None:
        async with open_demo_stores(url, prefix) as pair:
            agent = create_agent(
                id="drop-test",
                model={"provider": "mock", "model": "demo"},
                provider=create_mock_provider(turns=[[provider_text_delta("ok"), provider_done()]]),
                store=pair.sessions,
            )
            result = await agent.create_session().run(
                "hello",
                run_state=RunStateOptions(pair.checkpoints, "r1", checkpoint_policy="every-turn"),
            )
            assert result.status == "succeeded"

    anyio.run(write)


def test_the_prefix_rides_in_the_url_as_each_store_documents_it() -> None:
    """``?table_prefix=<prefix>_`` on SQL URLs, ``?prefix=<prefix>`` on Redis URLs, after any
    query the URL already has; another scheme is refused."""
    assert prefixed_url("sqlite:///d.db", "p1") == "sqlite:///d.db?table_prefix=p1_"
    assert (
        prefixed_url("postgresql://u@h/db?sslmode=disable", "p1")
        == "postgresql://u@h/db?sslmode=disable&table_prefix=p1_"
    )
    assert prefixed_url("redis://h:6379/0", "p1") == "redis://h:6379/0?prefix=p1"
    with pytest.raises(SystemExit, match="unsupported store URL scheme 'mysql'"):
        prefixed_url("mysql://h/db", "p1")


def test_a_sqlite_pair_shares_one_connection_and_stays_on_disk(tmp_path: Path) -> None:
    """On SQLite the demo's pair is the SQL plugin's (its tables under the prefix); dropping
    leaves the file, which the user asked to keep with ``--dir``."""
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    pair = open_demo_stores(url, "pdemo")
    assert isinstance(pair.checkpoints, SqlCheckpointStore)
    assert pair.checkpoints.table_prefix == "pdemo_"
    anyio.run(pair.aclose)
    _write_through(url, "pdemo")
    drop_demo_stores(url, "pdemo")
    assert (tmp_path / "demo.db").exists()


@pytest.mark.services
def test_dropping_a_postgresql_demo_removes_its_tables_only() -> None:
    """After a demo's writes, dropping removes every table under its prefix and leaves a
    neighbour's tables alone."""
    reason = reachable("127.0.0.1", 5432)
    if reason:
        service_unavailable("PostgreSQL", reason)
    mine, theirs = f"pdrop_{uuid.uuid4().hex[:8]}", f"pkeep_{uuid.uuid4().hex[:8]}"
    _write_through(POSTGRES_URL, mine)
    _write_through(POSTGRES_URL, theirs)

    def tables(prefix: str) -> list[str]:
        with psycopg.connect(POSTGRES_URL) as connection:
            rows = connection.execute(
                "SELECT tablename FROM pg_tables WHERE tablename LIKE %s", (f"{prefix}\\_%",)
            ).fetchall()
        return sorted(row[0] for row in rows)

    try:
        assert len(tables(mine)) >= 3
        drop_demo_stores(POSTGRES_URL, mine)
        assert tables(mine) == []
        assert len(tables(theirs)) >= 3
    finally:
        drop_demo_stores(POSTGRES_URL, theirs)
    assert tables(theirs) == []


@pytest.mark.services
def test_dropping_a_redis_demo_removes_its_keys_only() -> None:
    """After a demo's writes, dropping deletes every key under its prefix and leaves a
    neighbour's keys alone."""
    reason = reachable("127.0.0.1", 6379)
    if reason:
        service_unavailable("Redis", reason)
    mine, theirs = f"pdrop_{uuid.uuid4().hex[:8]}", f"pkeep_{uuid.uuid4().hex[:8]}"
    pair = open_demo_stores(REDIS_URL, mine)
    assert isinstance(pair.checkpoints, RedisCheckpointStore)
    assert pair.checkpoints.prefix == mine
    anyio.run(pair.aclose)
    _write_through(REDIS_URL, mine)
    _write_through(REDIS_URL, theirs)
    client = redis.Redis.from_url(REDIS_URL)
    try:
        assert list(client.scan_iter(match=f"{mine}:*")) != []
        drop_demo_stores(REDIS_URL, mine)
        assert list(client.scan_iter(match=f"{mine}:*")) == []
        assert list(client.scan_iter(match=f"{theirs}:*")) != []
    finally:
        drop_demo_stores(REDIS_URL, theirs)
        assert list(client.scan_iter(match=f"{theirs}:*")) == []
        client.close()


def test_the_stores_plugin_comes_from_the_urls_scheme() -> None:
    """Each URL's scheme names, in entry-point metadata, the one store plugin that opens it:
    the SQL plugin for sqlite, postgresql and a +driver URL, the Redis plugin for redis."""
    kinds = {
        url: [type(p).__module__.split(".")[0] for p in discover_store_plugins(url)]
        for url in (
            "sqlite:///demo.db",
            "postgresql://u@h/db",
            "postgresql+asyncpg://u@h/db",
            "redis://127.0.0.1:6379/0",
            "nosuch://x",
        )
    }
    assert kinds == {
        "sqlite:///demo.db": ["prism_store_sql"],
        "postgresql://u@h/db": ["prism_store_sql"],
        "postgresql+asyncpg://u@h/db": ["prism_store_sql"],
        "redis://127.0.0.1:6379/0": ["prism_store_redis"],
        "nosuch://x": [],
    }


def test_an_unsupported_store_is_refused_before_any_worker_starts(tmp_path: Path) -> None:
    """A URL no store opens fails before the demo creates a file or starts a process."""
    with pytest.raises(SystemExit, match="unsupported store URL scheme 'mysql'"):
        run_crash_demo("mysql://h/db", directory=str(tmp_path / "demo"))
    assert not (tmp_path / "demo").exists()
