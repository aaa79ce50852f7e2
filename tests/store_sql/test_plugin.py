"""The ``plugin`` object: URL resolution through the kernel's plugin host, and its entry point."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest

import prism_store_sql
from prism_core.plugins import PluginHost
from prism_store_sql import SqlCheckpointStore, SqlSessionStore


def test_the_plugin_declares_its_schemes() -> None:
    """``store_schemes`` lists the URL schemes the plugin opens."""
    assert prism_store_sql.plugin.store_schemes == ("sqlite", "postgresql")


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///run.db",
        "sqlite+aiosqlite:///run.db",
        "postgresql://postgres@localhost/prism",
        "postgresql+asyncpg://postgres@localhost/prism",
        "POSTGRESQL://postgres@localhost/prism",
    ],
)
def test_sql_urls_resolve_to_sql_stores(url: str) -> None:
    """``sqlite:`` and ``postgresql:`` URLs (with or without a driver) open SQL stores."""
    host = PluginHost(plugins=[prism_store_sql.plugin])
    assert isinstance(host.checkpoint_store(url), SqlCheckpointStore)
    assert isinstance(host.session_store(url), SqlSessionStore)


@pytest.mark.parametrize(
    "url", ["memory://", "redis://localhost:6379/0", "mysql://db/prism", "sqlite", "file:///x"]
)
def test_other_urls_are_left_to_other_plugins(url: str) -> None:
    """Every other scheme answers ``None`` so the next plugin can try."""
    host = PluginHost(plugins=[prism_store_sql.plugin])
    assert host.checkpoint_store(url) is None
    assert host.session_store(url) is None


@pytest.mark.anyio
async def test_a_resolved_store_works(tmp_path: Path) -> None:
    """A store opened through the plugin host saves and loads."""
    host = PluginHost(plugins=[prism_store_sql.plugin])
    url = f"sqlite:///{tmp_path / 'plugin.db'}"
    async with host.checkpoint_store(url) as store:
        await store.save("ns", "k", {"via": "plugin"}, version=1)
        record = await store.load("ns", "k")
        assert record is not None
        assert record.value == {"via": "plugin"}


def test_the_entry_point_names_the_plugin() -> None:
    """The distribution registers ``plugin`` under the ``prism`` entry-point group."""
    found = [
        entry for entry in entry_points(group="prism") if entry.value == "prism_store_sql:plugin"
    ]
    assert len(found) == 1
    assert found[0].load() is prism_store_sql.plugin


@pytest.mark.anyio
async def test_a_url_table_prefix_selects_the_tables(tmp_path: Path) -> None:
    """``?table_prefix=`` isolates the stores a URL opens; the option never reaches the driver."""
    host = PluginHost(plugins=[prism_store_sql.plugin])
    url = f"sqlite:///{tmp_path / 'prefixed.db'}"
    async with (
        host.checkpoint_store(f"{url}?table_prefix=tenant_a_") as a,
        host.checkpoint_store(f"{url}?table_prefix=tenant_b_") as b,
    ):
        assert (a.table_prefix, b.table_prefix) == ("tenant_a_", "tenant_b_")
        await a.save("ns", "k", {"tenant": "a"}, version=1)
        assert await b.load("ns", "k") is None
    session_store = host.session_store(f"{url}?table_prefix=tenant_a_")
    assert session_store.table_prefix == "tenant_a_"
    await session_store.aclose()


@pytest.mark.parametrize("query", ["table_prefix=", "table_prefix=a_&table_prefix=b_"])
def test_a_malformed_url_table_prefix_is_refused(query: str) -> None:
    """An empty or repeated ``table_prefix`` is a configuration error, before any connection."""
    host = PluginHost(plugins=[prism_store_sql.plugin])
    with pytest.raises(prism_store_sql.SqlStoreConfigError):
        host.checkpoint_store(f"sqlite:///run.db?{query}")
