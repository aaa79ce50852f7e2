"""A process that only opens stores imports the store plugin of its URL and no other plugin.

A fresh interpreter opens both stores from a ``sqlite:///`` and a ``postgresql://`` URL the
way the documentation shows (``open_stores(url, plugins=discover_store_plugins(url))``, under
``asyncio.run``), loads a checkpoint (which opens the connection) and appends a session entry,
then prints the top-level packages in ``sys.modules``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import PostgresServer

#: Top-level packages a process that only opens stores has no use for: model SDKs and their
#: plugins, the server and web faces, tracing, workers, protocol adapters, the other store.
UNNEEDED = (
    "openai",
    "anthropic",
    "httpx",
    "prism_provider_openai",
    "prism_provider_anthropic",
    "prism_server",
    "prism_web",
    "starlette",
    "uvicorn",
    "opentelemetry",
    "prism_otel",
    "celery",
    "prism_celery",
    "mcp",
    "prism_mcp",
    "a2a",
    "prism_a2a",
    "ag_ui",
    "prism_agui",
    "prism_packs",
    "prism_cli",
    "prism_store_redis",
    "redis",
)

_CHILD = """
import asyncio, json, sys
from prism_core import discover_store_plugins, open_stores
from prism_core.records import create_session_entry

async def main(url):
    pair = open_stores(url, plugins=discover_store_plugins(url))
    try:
        await pair.checkpoints.load("imports", "none")
        entry = create_session_entry(session_id="imports", kind="label", label="x")
        await pair.sessions.append(entry)
    finally:
        await pair.aclose()

asyncio.run(main(sys.argv[1]))
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


def _imported(url: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, url], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_opening_sqlite_stores_imports_no_other_plugin(tmp_path: Path) -> None:
    """``sqlite:///``: prism_store_sql is loaded, none of the other plugins or SDKs."""
    modules = _imported(f"sqlite:///{tmp_path / 'runs.db'}")
    assert "prism_store_sql" in modules
    assert sorted(set(UNNEEDED) & modules) == []


def test_opening_postgres_stores_imports_no_other_plugin(
    postgres_server: PostgresServer,
) -> None:
    """``postgresql://``: prism_store_sql and asyncpg are loaded, none of the others."""
    target = postgres_server.fresh()
    modules = _imported(f"{target.url}?table_prefix={target.prefix}")
    assert {"prism_store_sql", "asyncpg"} <= modules
    assert sorted(set(UNNEEDED) & modules) == []


@pytest.mark.parametrize("scheme", ["sqlite", "postgresql"])
def test_the_scheme_group_names_only_the_sql_plugin(scheme: str) -> None:
    """The ``prism.stores`` entry points of the SQL schemes name prism_store_sql's plugin."""
    from importlib.metadata import entry_points

    values = {e.value for e in entry_points(group="prism.stores", name=scheme)}
    assert values == {"prism_store_sql:plugin"}


@pytest.mark.parametrize(
    ("group", "name"),
    [
        ("prism.stores", "sqlite"),
        ("prism.stores", "postgresql"),
        ("prism.stores", "redis"),
        ("prism.stores", "mongodb"),
        ("prism.commands", "runs"),
        ("prism", "sql"),
    ],
)
def test_the_quick_entry_point_scan_agrees_with_importlib(group: str, name: str) -> None:
    """The store plugins' lookup (which parses only the distributions that declare the
    group) finds exactly the entry points ``importlib.metadata.entry_points`` does."""
    from importlib.metadata import entry_points

    from prism_core.plugins import _entry_points_of

    assert _entry_points_of(group, name) == list(entry_points(group=group, name=name))
