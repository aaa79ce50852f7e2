"""``prism chat`` as a subprocess for the provider tests: stdin piped, output captured."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_prism_chat(
    args: list[str], stdin: str, env: dict[str, str], *, provider_env_prefix: str
) -> subprocess.CompletedProcess[str]:
    """``prism chat <args>`` fed ``stdin``, with ``env`` on top of this process's
    environment minus its variables starting with ``provider_env_prefix`` (so a developer's
    own key or base URL never reaches the test)."""
    script = Path(sys.executable).with_name("prism")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "prism_cli"]
    base = {k: v for k, v in os.environ.items() if not k.startswith(provider_env_prefix)}
    return subprocess.run(
        [*command, "chat", *args],
        input=stdin,
        capture_output=True,
        encoding="utf-8",
        env={**base, "PYTHONIOENCODING": "utf-8", **env},
        cwd=ROOT,
        timeout=60,
        check=False,
    )
