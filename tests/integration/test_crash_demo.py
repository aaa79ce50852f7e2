"""A real SIGKILLed worker process, continued by a fresh process, on each store backend."""

from __future__ import annotations

import os
import shlex
import socket
from pathlib import Path

import pytest

from prism_cli import main
from prism_cli._demo import run_crash_demo
from prism_cli._demo_worker import STEPS
from tests.conftest import POSTGRES_URL, REDIS_URL, service_unavailable


def reachable(host: str, port: int) -> str | None:
    """``None`` when a TCP connection succeeds, else the reason."""
    try:
        with socket.create_connection((host, port), timeout=2):
            return None
    except OSError as exc:
        return str(exc)


def check_report(report: object, kill_at_turn: int) -> None:
    """The run finished after the kill and every tool ran exactly once across two processes."""
    from prism_cli._demo import DemoReport

    assert isinstance(report, DemoReport)
    assert report.status == "succeeded"
    assert report.each_tool_once
    assert report.killed_pid != report.resumed_pid
    by_pid = {e["call"]: e["pid"] for e in report.executions}
    assert {by_pid[f"call_{i + 1}"] for i in range(kill_at_turn - 1)} <= {report.killed_pid}
    assert {by_pid[f"call_{i + 1}"] for i in range(kill_at_turn - 1, len(STEPS))} == {
        report.resumed_pid
    }
    kinds = [e["type"] for e in report.timeline]
    assert kinds.index("worker_killed") < kinds.index("agent_resumed")
    assert {e["run_id"] for e in report.timeline} == {report.run_id}
    assert report.answer.startswith("Root cause")


@pytest.mark.long
@pytest.mark.parametrize("kill_at_turn", [1, 3, 5])
def test_sigkilled_worker_is_continued_on_sqlite(tmp_path: Path, kill_at_turn: int) -> None:
    """SQLite file: kill in turn N, continue in a new process, each tool exactly once."""
    report = run_crash_demo(directory=str(tmp_path), kill_at_turn=kill_at_turn, think_seconds=0.25)
    check_report(report, kill_at_turn)
    assert (tmp_path / "prism-demo.db").exists()


@pytest.mark.long
def test_sigkilled_trio_worker_is_continued_on_sqlite(tmp_path: Path) -> None:
    """Workers on trio: the SQLite store runs there too; the same crash and continue."""
    report = run_crash_demo(
        directory=str(tmp_path), kill_at_turn=2, think_seconds=0.25, backend="trio"
    )
    check_report(report, 2)


def test_trio_workers_need_the_sqlite_store() -> None:
    """Asking for trio workers on an asyncio-only store fails before any process starts."""
    with pytest.raises(ValueError, match="SQLite store only"):
        run_crash_demo(REDIS_URL, backend="trio")


@pytest.mark.long
@pytest.mark.services
def test_sigkilled_worker_is_continued_on_postgresql(tmp_path: Path) -> None:
    """PostgreSQL: the same crash and continue, in prefixed tables that are dropped after."""
    reason = reachable("127.0.0.1", 5432)
    if reason:
        service_unavailable("PostgreSQL", reason)
    report = run_crash_demo(POSTGRES_URL, directory=str(tmp_path), think_seconds=0.25)
    check_report(report, 3)


@pytest.mark.long
@pytest.mark.services
def test_sigkilled_worker_is_continued_on_redis(tmp_path: Path) -> None:
    """Redis: the same crash and continue, under a key prefix that is deleted after."""
    reason = reachable("127.0.0.1", 6379)
    if reason:
        service_unavailable("Redis", reason)
    report = run_crash_demo(REDIS_URL, directory=str(tmp_path), think_seconds=0.25)
    check_report(report, 3)


def test_prism_demo_command_prints_the_timeline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`prism demo --dir` prints the kill, the continue, a per-tool tally and the exact
    `prism runs` commands that inspect the kept run, and exits 0; those commands work."""
    assert main(["demo", "--dir", str(tmp_path), "--no-color"]) == 0
    out = capsys.readouterr().out
    assert "KILLED" in out
    assert "agent_resumed" in out
    for name, _, _ in STEPS:
        assert f"{name:<14}" in out
    assert out.count("ran 1x") == len(STEPS)
    assert "\nevery tool ran exactly once and the run finished.\n" in out
    assert os.path.exists(tmp_path / "prism-demo.db")
    commands = [line.strip() for line in out.splitlines() if line.startswith("  prism runs ")]
    assert [c.split()[:3] for c in commands] == [
        ["prism", "runs", "list"],
        ["prism", "runs", "show"],
    ]
    for command in commands:
        argv = shlex.split(command)[1:]
        assert main(argv) == 0, command
    shown = capsys.readouterr().out
    assert shown.count("succeeded") == 2  # the listed run, and the run shown


@pytest.mark.long
def test_prism_demo_runs_its_workers_on_trio(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`prism demo --backend trio` runs both workers on trio and still finishes cleanly."""
    assert main(["demo", "--dir", str(tmp_path), "--no-color", "--backend", "trio"]) == 0
    out = capsys.readouterr().out
    assert "workers on trio" in out
    assert out.count("ran 1x") == len(STEPS)


def test_demo_rejects_a_bad_kill_turn() -> None:
    """A kill turn outside the script fails before any process starts."""
    with pytest.raises(ValueError, match="kill_at_turn"):
        run_crash_demo(kill_at_turn=9)
