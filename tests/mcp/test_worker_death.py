"""A stdio server dies with the worker that started it: a worker SIGKILLed while the server
holds a call leaves no server behind to finish it (the effect log, read 5 s later, holds no
effect), and the call carried the idempotency key and the fencing token in its ``_meta``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

WORKER = Path(__file__).with_name("kill_worker.py")
#: Seconds the server waits before its effect: well inside the 5 s the test watches.
EFFECT_AFTER = 1.5
#: Seconds the test waits for the server to receive the call.
PATIENCE = 120


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for this purpose: it runs nothing.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_sigkilled_worker_leaves_no_server_to_finish_its_call(tmp_path: Path) -> None:
    effects = tmp_path / "effects.jsonl"
    worker = subprocess.Popen([sys.executable, str(WORKER), str(effects), str(EFFECT_AFTER)])
    try:
        deadline = time.monotonic() + PATIENCE
        while not any(line["phase"] == "received" for line in _lines(effects)):
            assert worker.poll() is None, "the worker ended before the server got the call"
            assert time.monotonic() < deadline, "the server never received the call"
            time.sleep(0.02)
    finally:
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)
    (received,) = _lines(effects)
    server = received["pid"]
    assert received["meta"]["prism/fencing_token"] == 3
    assert received["meta"]["prism/idempotency_key"].startswith("idem_")
    # Long past the moment the server would have applied the call.
    time.sleep(5)
    assert [line["phase"] for line in _lines(effects)] == ["received"]
    assert not _alive(server)


@pytest.mark.parametrize("signal_number", [signal.SIGTERM])
def test_stopping_the_launcher_stops_the_server_tree(tmp_path: Path, signal_number: int) -> None:
    """The SDK stops a server by signalling its process group; the supervisor takes the
    whole group down with it."""
    effects = tmp_path / "effects.jsonl"
    worker = subprocess.Popen([sys.executable, str(WORKER), str(effects), "600"])
    try:
        deadline = time.monotonic() + PATIENCE
        while not _lines(effects):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        server = _lines(effects)[0]["pid"]
        os.killpg(os.getpgid(server), signal_number)
        deadline = time.monotonic() + PATIENCE
        while _alive(server):
            assert time.monotonic() < deadline, "the server outlived its group's SIGTERM"
            time.sleep(0.02)
    finally:
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)
