"""The crash-recovery demo: a worker dies mid-run; a fresh process continues the same run.

``prism demo`` starts a worker process (:mod:`prism_cli._demo_worker`) that runs a multi-turn
investigation with every-turn checkpoints on the embedded SQLite store (or ``--store URL``),
kills it with SIGKILL while the model is thinking, then starts a fresh process that resumes
the same run with ``continue``. The timeline shows that every side-effecting tool ran exactly
once.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import attrs

from prism_core import load_agent_run_state

from ._demo_stores import (
    check_store_installed,
    drop_demo_stores,
    open_demo_stores,
    prefixed_url,
)
from ._demo_worker import SESSION_ID, STEPS

__all__ = ("DemoCommand", "DemoReport", "command", "run_crash_demo", "run_demo")


# -- the orchestrator --------------------------------------------------------------------


@attrs.frozen
class DemoReport:
    """What the demo observed: the run, both workers, and every tool execution."""

    run_id: str
    killed_pid: int
    resumed_pid: int
    kill_turn: int
    checkpoint_version: int
    executions: tuple[dict[str, Any], ...]
    status: str
    answer: str
    timeline: tuple[dict[str, Any], ...]
    #: The store URL (with the demo's prefix) when the run's stores were kept for
    #: ``prism runs``: a SQLite file in a ``directory`` the caller named. ``None``: removed.
    kept_store: str | None = None

    @property
    def each_tool_once(self) -> bool:
        """Whether every step's tool ran exactly once across both processes."""
        counts = Counter(e["call"] for e in self.executions)
        return sorted(counts) == [f"call_{i + 1}" for i in range(len(STEPS))] and all(
            n == 1 for n in counts.values()
        )


def _spawn(args: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "prism_cli._demo_worker", json.dumps(args)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _finish(process: subprocess.Popen[str]) -> None:
    process.wait(timeout=60)
    if process.stdout is not None:
        process.stdout.close()


def _lines(process: subprocess.Popen[str]) -> Iterator[dict[str, Any]]:
    assert process.stdout is not None
    for line in process.stdout:
        line = line.strip()
        if line.startswith("{"):
            yield json.loads(line)


def run_crash_demo(
    store_url: str | None = None,
    *,
    directory: str | None = None,
    kill_at_turn: int = 3,
    think_seconds: float = 0.4,
    prefix: str | None = None,
    on_event: Any = None,
    backend: str = "asyncio",
) -> DemoReport:
    """Run the whole demo and return what happened (no printing; see :func:`run_demo`).

    ``backend`` is the anyio backend of both workers: ``"asyncio"`` or ``"trio"`` (trio
    needs the SQLite store, the only one that runs on it).
    """
    if not 1 <= kill_at_turn <= len(STEPS):
        raise ValueError(f"kill_at_turn must be in 1..{len(STEPS)}")
    if backend not in ("asyncio", "trio"):
        raise ValueError(f"backend must be 'asyncio' or 'trio', got {backend!r}")
    if backend == "trio" and store_url is not None and not store_url.startswith("sqlite:///"):
        raise ValueError(
            "the workers can run on trio with the SQLite store only (sqlite:///path.db); "
            "PostgreSQL and Redis stores run on asyncio"
        )
    # Before any folder or process: a store that is not installed is refused here.
    check_store_installed(store_url or "sqlite:///prism-demo.db")
    work = Path(directory or tempfile.mkdtemp(prefix="prism-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    url = store_url or f"sqlite:///{work / 'prism-demo.db'}"
    tool_log = work / f"tool-executions-{uuid.uuid4().hex[:8]}.jsonl"
    common: dict[str, Any] = {
        "store": url,
        "prefix": prefix or f"prismdemo_{uuid.uuid4().hex[:8]}",
        "session": f"{SESSION_ID}-{uuid.uuid4().hex[:6]}",
        "tool_log": str(tool_log),
        "think": think_seconds,
        "backend": backend,
    }
    timeline: list[dict[str, Any]] = []
    first = _spawn({**common, "mode": "start"})
    run_id = ""
    try:
        for event in _lines(first):
            timeline.append(event)
            if on_event is not None:
                on_event(event)
            run_id = event["run_id"]
            if event["type"] == "turn_started" and event["turn"] == kill_at_turn:
                time.sleep(think_seconds / 3)
                first.send_signal(signal.SIGKILL)
                break
    finally:
        _finish(first)
    if first.returncode != -signal.SIGKILL:
        raise RuntimeError(f"the first worker ended on its own (exit {first.returncode})")
    killed = {
        "pid": first.pid,
        "time": time.time(),
        "type": "worker_killed",
        "run_id": run_id,
        "signal": "SIGKILL",
    }
    timeline.append(killed)
    if on_event is not None:
        on_event(killed)
    version = asyncio_status_version(url, common["prefix"], run_id, common["session"])
    second = _spawn({**common, "mode": "continue", "run_id": run_id})
    answer = ""
    status = "failed"
    for event in _lines(second):
        timeline.append(event)
        if on_event is not None:
            on_event(event)
        if event["type"] == "message_delta" and "text" in event:
            answer += event["text"]
        if event["type"] == "agent_finished":
            status = "succeeded"
    _finish(second)
    executions = tuple(
        json.loads(line) for line in tool_log.read_text(encoding="utf-8").splitlines() if line
    )
    # A SQLite file in a folder the caller named is theirs to inspect; anything else (a
    # temporary folder, a shared server) is removed.
    kept = prefixed_url(url, common["prefix"]) if directory and store_url is None else None
    if kept is None:
        drop_demo_stores(url, common["prefix"])
    return DemoReport(
        run_id=run_id,
        killed_pid=first.pid,
        resumed_pid=second.pid,
        kill_turn=kill_at_turn,
        checkpoint_version=version,
        executions=executions,
        status=status if second.returncode == 0 else "failed",
        answer=answer,
        timeline=tuple(timeline),
        kept_store=kept,
    )


def asyncio_status_version(url: str, prefix: str, run_id: str, session_id: str) -> int:
    """The version of the run's last checkpoint, read in this (orchestrating) process."""

    async def read() -> int:
        async with open_demo_stores(url, prefix) as pair:
            status = await load_agent_run_state(
                pair.checkpoints, {"run_id": run_id, "session_id": session_id}
            )
            return status.version if status is not None else 0

    return anyio.run(read)


# -- printing ----------------------------------------------------------------------------


class _Printer:
    def __init__(self, color: bool) -> None:
        self.color = color
        self.started = time.time()
        self.pids: dict[int, str] = {}

    def paint(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color else text

    def worker(self, pid: int) -> str:
        if pid not in self.pids:
            self.pids[pid] = f"worker {len(self.pids) + 1}"
        return self.pids[pid]

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        detail = ""
        code = "36"
        if kind == "turn_started":
            detail, code = f"turn {event['turn']}", "1"
        elif kind == "message_delta" and "thinking" in event:
            kind, detail, code = "thinking", self.paint(event["thinking"], "3;2"), "35"
        elif kind == "message_delta":
            return
        elif kind == "tool_execution_started":
            kind, detail, code = "tool runs", f"{event['name']} ({event['call']})", "33"
        elif kind == "tool_execution_finished":
            return
        elif kind == "worker_killed":
            kind, detail, code = "KILLED", "SIGKILL while the model was thinking", "1;31"
        elif kind == "agent_resumed":
            detail, code = f"claimed the run as v{event['version']}", "1;32"
        elif kind == "agent_finished":
            detail, code = "run succeeded", "1;32"
        elif kind in ("message_started", "message_finished", "turn_finished"):
            return
        stamp = f"{event['time'] - self.started:6.2f}s"
        who = f"{self.worker(event['pid'])} pid {event['pid']}"
        print(f"{self.paint(stamp, '2')}  {who:<20} {self.paint(f'{kind:<16}', code)} {detail}")


def run_demo(
    *,
    store: str | None = None,
    directory: str | None = None,
    kill_at_turn: int = 3,
    color: bool = False,
    backend: str = "asyncio",
) -> int:
    """Run the crash-recovery demo, print its timeline and verdict; returns an exit code."""
    printer = _Printer(color)
    where = store or "embedded SQLite"
    print(f"Prism crash-recovery demo ({where}, every-turn checkpoints, workers on {backend})\n")
    report = run_crash_demo(
        store, directory=directory, kill_at_turn=kill_at_turn, on_event=printer, backend=backend
    )
    print()
    print(
        f"run {report.run_id}: killed worker pid {report.killed_pid} at turn "
        f"{report.kill_turn}; pid {report.resumed_pid} continued from checkpoint "
        f"v{report.checkpoint_version}"
    )
    print("tool executions (from the side-effect log):")
    counts = Counter(e["call"] for e in report.executions)
    for index, (name, _, _) in enumerate(STEPS):
        call = f"call_{index + 1}"
        pids = [e["pid"] for e in report.executions if e["call"] == call]
        print(
            f"  {name:<14} {call:<8} ran {counts.get(call, 0)}x  by pid {', '.join(map(str, pids))}"
        )
    print(f"\nanswer: {report.answer}")
    ok = report.each_tool_once and report.status == "succeeded"
    verdict = "every tool ran exactly once and the run finished" if ok else "FAILED"
    print(printer.paint(f"\n{verdict}.", "1;32" if ok else "1;31"))
    if report.kept_store is not None:
        store_arg = shlex.quote(report.kept_store)
        print(f"\nthe run's stores are kept in {directory}; inspect them with:")
        print(f"  prism runs list --store {store_arg}")
        print(f"  prism runs show {report.run_id} --store {store_arg}")
    return 0 if ok else 1


class DemoCommand:
    """``prism demo [--store URL] [--dir PATH] [--kill-at-turn N] [--backend B] [--no-color]``."""

    help = "crash-recovery demo: kill a worker mid-run, continue the same run elsewhere"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add the demo's options."""
        parser.add_argument(
            "--store",
            metavar="URL",
            help="checkpoint and session store (default: a SQLite file in --dir); "
            "e.g. postgresql://postgres@127.0.0.1/test or redis://127.0.0.1:6379/0",
        )
        parser.add_argument(
            "--dir", metavar="PATH", help="folder for the SQLite file and the tool log"
        )
        parser.add_argument(
            "--kill-at-turn", type=int, default=3, metavar="N", help="kill the worker in turn N"
        )
        parser.add_argument("--no-color", action="store_true", help="plain output")
        parser.add_argument(
            "--backend",
            choices=("asyncio", "trio"),
            default="asyncio",
            help="the workers' event loop",
        )

    def run(self, args: argparse.Namespace) -> int:
        """Run the demo and print it (:func:`run_demo`)."""
        return run_demo(
            store=args.store,
            directory=args.dir,
            kill_at_turn=args.kill_at_turn,
            color=not args.no_color and sys.stdout.isatty(),
            backend=args.backend,
        )


#: The ``demo`` command (entry point ``prism.commands`` → ``demo``).
command = DemoCommand()
