"""The npm-registry MCP servers the tests talk to, installed from ``tests/mcp/node``.

``package.json`` and ``package-lock.json`` there pin them; :func:`install` runs ``npm ci``
(bounded in time, without install scripts) when ``node_modules`` does not match the lock file,
and fails with a clear message when npm is missing or the install fails.
``python -m tests.mcp.npm_servers`` does the same from CI before the tests run.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from tests.node_lock import installing

NODE_DIR = Path(__file__).resolve().parent / "node"
EVERYTHING = NODE_DIR / "node_modules" / ".bin" / "mcp-server-everything"
#: Seconds ``npm ci`` may take.
INSTALL_TIMEOUT = 300
_STAMP = NODE_DIR / "node_modules" / ".prism-lock-sha256"


class InstallError(RuntimeError):
    """npm is missing, or ``npm ci`` failed or ran out of time."""


def _lock_digest() -> str:
    return hashlib.sha256((NODE_DIR / "package-lock.json").read_bytes()).hexdigest()


def install() -> Path:
    """Install the pinned servers unless already installed; the server-everything binary."""
    digest = _lock_digest()
    if EVERYTHING.exists() and _STAMP.exists() and _STAMP.read_text() == digest:
        return EVERYTHING
    with installing(NODE_DIR):
        return _install(digest)


def _install(digest: str) -> Path:
    if EVERYTHING.exists() and _STAMP.exists() and _STAMP.read_text() == digest:
        return EVERYTHING
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise InstallError(
            "the MCP tests need Node.js and npm on PATH to install "
            "@modelcontextprotocol/server-everything from tests/mcp/node (apt-get install npm)"
        )
    command = [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"]
    try:
        done = subprocess.run(
            command, cwd=NODE_DIR, capture_output=True, text=True, timeout=INSTALL_TIMEOUT
        )
    except subprocess.TimeoutExpired:
        raise InstallError(
            f"npm ci in {NODE_DIR} did not finish within {INSTALL_TIMEOUT} s"
        ) from None
    if done.returncode != 0 or not EVERYTHING.exists():
        tail = done.stderr[-2000:]
        raise InstallError(f"npm ci in {NODE_DIR} failed ({done.returncode}): {tail}")
    _STAMP.write_text(digest)
    return EVERYTHING


if __name__ == "__main__":
    try:
        print(install())
    except InstallError as exc:
        sys.exit(str(exc))
