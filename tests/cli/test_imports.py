"""``prism runs`` imports the store plugin its URL names, and nothing of the other plugins.

Checked with ``python -X importtime``, which lists every module a process imports: the store
distribution for the URL's scheme is loaded (from entry-point metadata), the model SDKs,
tracing, workers and protocol adapters are not.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio

from prism_store_sql import migrate

#: Top-level modules that ``prism runs`` on a SQLite URL has no use for.
UNNEEDED = (
    "openai",
    "anthropic",
    "prism_provider_openai",
    "prism_provider_anthropic",
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
    "prism_server",
    "prism_store_redis",
    "redis",
)


def _imported(argv: list[str]) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "prism_cli", *argv],
        capture_output=True,
        text=True,
        timeout=300,
    )
    modules = set()
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            modules.add(name.split(".")[0])
    return modules, done


def test_runs_list_imports_only_the_store_plugin_of_its_url(tmp_path: Path) -> None:
    """``prism runs list --store sqlite:///…`` loads prism_store_sql and none of the other
    installed plugins or their SDKs."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"

    async def create() -> None:
        await migrate(url)

    anyio.run(create)
    modules, done = _imported(["runs", "list", "--store", url])
    assert done.returncode == 0, done.stderr[-2000:]
    assert "prism_store_sql" in modules
    assert sorted(set(UNNEEDED) & modules) == []
