"""Fixtures of the AG-UI tests: the npm install of the official client, hosts and servers."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.node_lock import installing

from ._support import NODE_DIR, Host, Server, serving

#: ``npm ci`` from the lock file, bounded: the only network the tests use is this install.
NPM_CI_TIMEOUT_S = 600


def _installed_from_lock() -> bool:
    """Whether ``node_modules`` holds exactly what the lock file names (npm's own record of
    the tree it installed, ``node_modules/.package-lock.json``, says so)."""
    installed = NODE_DIR / "node_modules" / ".package-lock.json"
    if not installed.exists():
        return False
    wanted = json.loads((NODE_DIR / "package-lock.json").read_text(encoding="utf-8"))
    packages = {k: v for k, v in wanted["packages"].items() if k}
    have: dict[str, object] = json.loads(installed.read_text(encoding="utf-8"))["packages"]
    return have == packages


@pytest.fixture(scope="session", autouse=True)
def agui_client() -> Path:
    """``@ag-ui/client`` installed under ``tests/agui/node`` from its lock file (``npm ci``,
    unless ``.ci/run`` or an earlier session installed that very tree)."""
    if _installed_from_lock():
        return NODE_DIR
    with installing(NODE_DIR):
        if _installed_from_lock():
            return NODE_DIR
        done = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--prefer-offline"],
            cwd=NODE_DIR,
            capture_output=True,
            text=True,
            timeout=NPM_CI_TIMEOUT_S,
            check=False,
        )
    assert done.returncode == 0, f"npm ci failed:\n{done.stdout}\n{done.stderr}"
    installed = NODE_DIR / "node_modules" / "@ag-ui" / "client" / "package.json"
    assert installed.exists(), done.stdout
    return NODE_DIR


def _host(folder: Path) -> Host:
    effects = folder / "effects"
    effects.mkdir()
    return Host(folder / "agui.db", effects)


@pytest.fixture
def host(tmp_path: Path) -> Host:
    """A SQLite file and effects folder of this test's own."""
    return _host(tmp_path)


@pytest.fixture(scope="module")
def shared_host(tmp_path_factory: pytest.TempPathFactory) -> Host:
    """One module's SQLite file and effects folder (tests keep apart by thread)."""
    return _host(tmp_path_factory.mktemp("agui"))


@pytest.fixture(scope="module")
def server(shared_host: Host) -> Iterator[Server]:
    """One module's server on ``shared_host``, stopped by its pid at the end."""
    with serving(shared_host) as running:
        yield running
