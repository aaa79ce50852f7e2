"""SIGKILL while a sub-agent runs: a fresh worker process continues the lead run, which
continues the same child run; no charge of the child is applied twice (SQLite, one file,
subprocess workers)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.long

WORKER = Path(__file__).with_name("subagent_worker.py")
#: How long the test waits for one line of a worker, or for a worker to end.
LINE_TIMEOUT = 60.0


class Worker:
    """A worker process and a thread reading its JSON lines."""

    def __init__(self, args: dict[str, Any], script: Path = WORKER) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(script), json.dumps(args)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                self.lines.put(json.loads(line))
        self.process.stdout.close()
        self.lines.put(None)

    def next(self) -> dict[str, Any] | None:
        """The next line (``None`` once the worker's output ended)."""
        return self.lines.get(timeout=LINE_TIMEOUT)

    def until(self, key: str, count: int = 1) -> None:
        """Read lines until ``count`` of them carried ``key``."""
        seen = 0
        while seen < count:
            line = self.next()
            assert line is not None, f"the worker ended before {count} {key!r} lines"
            seen += key in line

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=LINE_TIMEOUT)
        assert self.process.returncode == -signal.SIGKILL

    def finish(self) -> dict[str, Any]:
        """The worker's last line once it exits."""
        last: dict[str, Any] | None = None
        while (line := self.next()) is not None:
            last = line
        self.process.wait(timeout=LINE_TIMEOUT)
        assert last is not None
        return last


def charges(effects: Path) -> Counter[str]:
    return Counter(json.loads(line)["key"] for line in effects.read_text().splitlines())


def logged(effects: Path) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for line in effects.read_text().splitlines():
        record = json.loads(line)
        found.setdefault(record["call"], record["value"])
    return found


def args_for(tmp_path: Path, kind: str, **extra: Any) -> dict[str, Any]:
    return {
        "store": f"sqlite:///{tmp_path / 'runs.db'}",
        "prefix": "subagents",
        "effects": str(tmp_path / "effects.jsonl"),
        "kind": kind,
        "think": 0.2,
        "work": 0.0,
        **extra,
    }


def started(worker: Worker) -> Worker:
    line = worker.next()
    assert line == {"ready": True}
    return worker


@pytest.mark.parametrize("after_charges", [1, 2])
def test_a_sigkill_while_the_child_thinks_is_continued_in_the_same_child(
    tmp_path: Path, after_charges: int
) -> None:
    """Killed while the child waits on its provider after ``after_charges`` charges; the
    next worker's continue of the lead continues that child: three charges in all, each
    applied once, the lead's answer is the child's."""
    first = started(Worker(args_for(tmp_path, "reconcile", think=0.6)))
    first.until("applied", after_charges)
    first.kill()
    effects = tmp_path / "effects.jsonl"
    assert len(charges(effects)) == after_charges
    second = started(Worker(args_for(tmp_path, "reconcile")))
    final = second.finish()
    assert final["status"] == "succeeded"
    assert final["text"] == "researcher said: charged 10, 11 and 12"
    counted = charges(effects)
    assert len(counted) == 3
    assert max(counted.values()) == 1


def test_a_sigkill_inside_the_childs_tool_is_reconciled_by_the_continue(tmp_path: Path) -> None:
    """Killed inside the child's second charge, after its effect: the call is in doubt in the
    child; its ``reconcile`` finds the charge in the host's log, so the lead's continue goes
    on without running it again."""
    first = started(Worker(args_for(tmp_path, "reconcile", work=30.0)))
    first.until("applied", 1)
    first.kill()
    second = started(Worker(args_for(tmp_path, "reconcile", work=0.0)))
    final = second.finish()
    assert final["status"] == "succeeded"
    counted = charges(tmp_path / "effects.jsonl")
    assert len(counted) == 3
    assert max(counted.values()) == 1


def test_a_child_call_in_doubt_refuses_the_continue_until_resolved(tmp_path: Path) -> None:
    """Plain tool, killed inside its first charge: the next worker's continue is refused
    in doubt, naming the child's call; a continue carrying a resolution for it (the logged
    result) finishes the lead, and that charge is not applied again."""
    first = started(Worker(args_for(tmp_path, "plain", work=30.0)))
    first.until("applied", 1)
    first.kill()
    refused = started(Worker(args_for(tmp_path, "plain"))).finish()
    assert refused["code"] == "ERR_PRISM_TOOL_IN_DOUBT"
    assert refused["in_doubt"] == ["c0"]
    effects = tmp_path / "effects.jsonl"
    resolution = {"tool_call_id": "c0", "outcome": "completed", "result": logged(effects)["c0"]}
    final = started(Worker(args_for(tmp_path, "plain", resolutions=[resolution]))).finish()
    assert final["status"] == "succeeded"
    assert final["run_id"] == refused["run_id"]
    counted = charges(effects)
    assert len(counted) == 3
    assert max(counted.values()) == 1
