"""``prism runs``: list, show, approve, deny and continue on a SQLite store, in-process and as
a subprocess, with a host module named by ``--app``."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from prism_cli import main
from prism_cli._runs import parse_resolution
from prism_core import Guardrail
from prism_core.tools import idempotency_key

from .runs_support import install_host, refund_log, refunds, seed, stored

TENANT = {"tenant_id": "t1"}
SUMMARY_KEYS = {
    "run_id",
    "session_id",
    "agent_id",
    "status",
    "version",
    "updated_at",
    "pending_decisions",
    "in_doubt",
    "lease_expires_at",
    "started_by",
    "parent_run_id",
}


@pytest.fixture
def host(tmp_path: Path) -> Any:
    """The host module, imported from ``tmp_path``."""
    module = install_host(tmp_path)
    yield module
    sys.modules.pop(module.__name__, None)


@pytest.fixture
def url(tmp_path: Path) -> str:
    """A SQLite store in ``tmp_path``."""
    return f"sqlite:///{tmp_path / 'runs.db'}"


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``prism`` in-process; its exit code, stdout and stderr."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_list_prints_a_table_and_json_lines(capsys: Any, host: Any, url: str) -> None:
    """The table has one row per visible run; ``--json`` one summary object per line."""
    first = seed(url, host, "s-1", how="suspended")
    crashed = seed(url, host, "s-2", how="crashed")
    seed(url, host, "s-3", how="suspended", owner=TENANT)
    code, out, err = cli(capsys, "runs", "list", "--store", url)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == [
        "RUN",
        "AGENT",
        "STATUS",
        "VERSION",
        "AGE",
        "PENDING",
        "IN",
        "DOUBT",
    ]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert set(rows) == {first, crashed}
    assert rows[first][1:4] == ["billing", "suspended", "1"]
    assert rows[first][5:] == ["2", "-"]
    assert rows[crashed][1:4] == ["billing", "running", str(stored(url, crashed)[0])]  # type: ignore[index]
    assert rows[crashed][4].endswith("s")

    code, out, _ = cli(capsys, "runs", "list", "--store", url, "--json")
    assert code == 0
    objects = [json.loads(line) for line in out.splitlines()]
    assert {o["run_id"] for o in objects} == {first, crashed}
    assert all(set(o) == SUMMARY_KEYS for o in objects)
    by_id = {o["run_id"]: o for o in objects}
    assert by_id[first]["pending_decisions"] == 2
    assert by_id[first]["session_id"] == "s-1"

    code, out, _ = cli(capsys, "runs", "list", "--store", url, "--recoverable", "--json")
    assert [json.loads(line)["run_id"] for line in out.splitlines()] == [crashed]
    code, out, _ = cli(capsys, "runs", "list", "--store", url, "--status", "succeeded")
    assert out.splitlines()[1:] == []
    code, out, _ = cli(capsys, "runs", "list", "--store", url, "--owner", "tenant_id=t1", "--json")
    assert [json.loads(line)["session_id"] for line in out.splitlines()] == ["s-3"]
    code, out, _ = cli(capsys, "runs", "list", "--store", url, "--limit", "1", "--json")
    assert len(out.splitlines()) == 1


def test_show_reports_what_each_decision_would_run(capsys: Any, host: Any, url: str) -> None:
    """``show`` gives status, counters, and for each decision the tool, its arguments as the
    session stored them (redacted when written) and its idempotency key, then metadata."""
    run_id = seed(url, host, "s-1", how="suspended")
    code, out, err = cli(capsys, "runs", "show", run_id, "--store", url)
    assert (code, err) == (0, "")
    assert f"run        {run_id}" in out
    assert "status     suspended" in out
    assert "lease      none" in out
    assert "pending decisions: 2" in out
    assert "call c1  refund\n" in out
    assert '    arguments: {"order": "A-1"}\n' in out
    assert '    arguments: {"order": "B-2"}\n' in out
    assert f"    idempotency key: {idempotency_key(run_id, 'c1')}\n" in out
    assert "scope: billing/refund" in out
    assert "in doubt: 0" in out

    code, out, _ = cli(capsys, "runs", "show", run_id, "--store", url, "--json")
    detail = json.loads(out)
    assert set(detail) >= SUMMARY_KEYS
    assert [d["tool_call_id"] for d in detail["decisions"]] == ["c1", "c2"]
    assert [d["arguments"] for d in detail["decisions"]] == [{"order": "A-1"}, {"order": "B-2"}]
    assert detail["decisions"][1]["idempotency_key"] == idempotency_key(run_id, "c2")
    assert detail["decisions"][0]["tool_name"] == "refund"
    assert detail["decisions"][0]["scope"]["tool_name"] == "refund"
    assert len(detail["decisions"][0]["scope"]["arguments_hash"]) == 64
    assert detail["counters"]["turns"] == 1

    doubtful = seed(url, host, "s-2", how="in-doubt")
    code, out, _ = cli(capsys, "runs", "show", doubtful, "--store", url)
    assert "status     running" in out
    assert "in doubt: 1\n  c1  refund\n" in out
    assert '    arguments: {"order": "A-1"}\n' in out


def test_several_pending_calls_need_call_or_all(capsys: Any, host: Any, url: str) -> None:
    """``approve`` or ``deny`` of a run waiting for two decisions, without ``--call`` or
    ``--all``, exits 2 naming the calls, and decides nothing."""
    run_id = seed(url, host, "s-1", how="suspended")
    app = f"{host.__name__}:resolve_agent"
    for command in ("approve", "deny"):
        code, out, err = cli(capsys, "runs", command, run_id, "--store", url, "--app", app)
        assert (code, out) == (2, "")
        assert "waits for 2 decisions (c1, c2)" in err
        assert "--all" in err
    code, _, err = cli(
        capsys, "runs", "approve", run_id, "--store", url, "--app", app, "--all", "--call", "c1"
    )
    assert code == 2
    assert stored(url, run_id) == (1, "suspended")
    assert refunds(host) == []


def test_unknown_and_foreign_runs_are_refused(capsys: Any, host: Any, url: str) -> None:
    """A run another tenant owns is as absent as one that never existed: exit 1 with a code."""
    run_id = seed(url, host, "s-1", how="suspended", owner=TENANT)
    for target in ("run_nope", run_id):
        code, out, err = cli(capsys, "runs", "show", target, "--store", url)
        assert (code, out) == (1, "")
        # The kernel's words: an unknown run and another owner's read the same.
        assert f"refused (ERR_PRISM_AGENT_RUN_STATE): No durable agent run {target}" in err
    code, _, _ = cli(capsys, "runs", "show", run_id, "--store", url, "--owner", "tenant_id=t1")
    assert code == 0
    app = f"{host.__name__}:resolve_agent"
    code, _, err = cli(capsys, "runs", "approve", run_id, "--store", url, "--app", app)
    assert code == 1
    assert f"refused (ERR_PRISM_AGENT_RUN_STATE): No durable agent run {run_id}" in err
    assert stored(url, run_id, TENANT) == (1, "suspended")
    assert refunds(host) == []


def test_approve_here_runs_the_run_to_its_end(capsys: Any, host: Any, url: str) -> None:
    """``approve --here`` resumes through the host's agent on the store's sessions, in this
    process (what ``approve`` did before decisions were recorded for workers)."""
    run_id = seed(url, host, "s-1", how="suspended", owner=TENANT)
    app = f"{host.__name__}:resolve_agent"
    owner = ("--owner", "tenant_id=t1")
    code, out, err = cli(
        capsys, "runs", "approve", run_id, "--store", url, "--app", app, *owner, "--all", "--here"
    )
    assert (code, err) == (0, "")
    assert out.splitlines()[0].startswith(f"run {run_id}: succeeded (version ")
    assert "refunds settled" in out
    assert refunds(host) == ["A-1", "B-2"]
    assert stored(url, run_id, TENANT)[1] == "succeeded"  # type: ignore[index]
    code, _, err = cli(
        capsys, "runs", "approve", run_id, "--store", url, "--app", app, "--owner", "tenant_id=t1"
    )
    assert code == 1
    assert "ERR_PRISM_AGENT_RUN_STATE" in err
    assert refunds(host) == ["A-1", "B-2"]


def test_per_call_decisions_with_reasons(capsys: Any, host: Any, url: str) -> None:
    """``--call`` decides one call at a time; a rejected call never runs."""
    run_id = seed(url, host, "s-1", how="suspended")
    app = f"{host.__name__}:resolve_agent"
    base = ("--store", url, "--app", app, "--here")
    code, out, err = cli(capsys, "runs", "approve", run_id, *base, "--call", "c9")
    assert (code, out) == (1, "")
    assert "refused (ERR_PRISM_DECISION_UNKNOWN)" in err
    assert stored(url, run_id) == (1, "suspended")
    code, out, _ = cli(capsys, "runs", "approve", run_id, *base, "--call", "c1", "--reason", "ok")
    assert code == 0
    assert out.startswith(f"run {run_id}: suspended")
    assert refunds(host) == []
    code, out, _ = cli(capsys, "runs", "show", run_id, "--store", url, "--json")
    assert [d["tool_call_id"] for d in json.loads(out)["decisions"]] == ["c2"]
    code, out, _ = cli(
        capsys, "runs", "deny", run_id, *base, "--call", "c2", "--reason", "duplicate order"
    )
    assert code == 0
    assert out.startswith(f"run {run_id}: succeeded")
    assert refunds(host) == ["A-1"]


def test_deny_ends_the_run(capsys: Any, host: Any, url: str) -> None:
    """``deny`` without ``--call`` ends the run ``denied``; its ``--reason`` is audited."""
    run_id = seed(url, host, "s-1", how="suspended")
    app = f"{host.__name__}:resolve_agent"
    code, out, _ = cli(
        capsys, "runs", "deny", run_id, "--store", url, "--app", app, "--all", "--reason", "no"
    )
    assert code == 0
    assert out.splitlines() == [
        f"run {run_id}: deny recorded at version 2",
        f"run {run_id}: denied (version 2)",
    ]
    assert refunds(host) == []
    code, out, _ = cli(capsys, "runs", "show", run_id, "--store", url, "--json")
    audit = json.loads(out)["audit"]
    assert [(r["tool_call_id"], r["outcome"], r["reason"]) for r in audit] == [
        ("c1", "deny", "no"),
        ("c2", "deny", "no"),
    ]


def test_show_escapes_stored_text_so_no_line_is_forged(capsys: Any, host: Any, url: str) -> None:
    """A reason and an actor holding a newline, a carriage return, a terminal escape and a
    Unicode line separator print on their own lines, escaped: the report has exactly the
    lines it would have for plain text, and the forged audit line appears only inside the
    reason's line."""
    run_id = seed(url, host, "s-1", how="suspended")
    app = f"{host.__name__}:resolve_agent"
    forged = "2030-01-01T00:00:00Z  allow_once  call c2  refund  by cfo  via console"
    reason = f"no\n  {forged}\r\x1b[2K\u2028end"
    actor = "mallory\x1b[1A\u202e"
    base = ("--store", url, "--app", app, "--all")
    code, _, err = cli(capsys, "runs", "deny", run_id, *base, "--reason", reason, "--actor", actor)
    assert code == 0, err
    code, out, _ = cli(capsys, "runs", "show", run_id, "--store", url)
    assert code == 0
    lines = out.splitlines()
    start = lines.index("audit: 2")
    assert lines[start + 1].endswith("by mallory\\x1b[1A\\u202e  via cli  (version 1)")
    escaped = f"    reason: no\\n  {forged}\\r\\x1b[2K\\u2028end"
    assert lines[start + 2] == escaped
    assert [line for line in lines if forged in line] == [escaped, escaped]
    assert not any(char in out for char in "\r\x1b\u2028\u202e")
    assert lines[start + 5 : start + 7] == ["receipts: 0", "metadata: 0"]
    # The JSON form keeps the stored strings as they are (JSON escapes them itself).
    code, out, _ = cli(capsys, "runs", "show", run_id, "--store", url, "--json")
    assert {(r["actor"], r["reason"]) for r in json.loads(out)["audit"]} == {(actor, reason)}


def test_a_run_with_guardrails_of_its_own_is_refused(capsys: Any, host: Any, url: str) -> None:
    """The CLI cannot hand over a run's own guards (callables), so approve, deny and continue
    of such a run are refused before anything is written or run."""
    guard = Guardrail("no-b2", "tool_input", lambda ctx: {"action": "allow"})
    app = f"{host.__name__}:resolve_agent"
    run_id = seed(url, host, "s-1", how="suspended", guardrails={"tool_input": [guard]})
    before = stored(url, run_id)
    for command in ("approve", "deny"):
        code, out, err = cli(capsys, "runs", command, run_id, "--store", url, "--app", app, "--all")
        assert (code, out) == (1, "")
        assert "refused (ERR_PRISM_RUN_GUARDRAILS)" in err
        assert "tool_input:no-b2" in err
    assert stored(url, run_id) == before
    crashed = seed(url, host, "s-2", how="crashed", guardrails={"tool_input": [guard]})
    before = stored(url, crashed)
    code, _, err = cli(capsys, "runs", "continue", crashed, "--store", url, "--app", app)
    assert code == 1
    assert "refused (ERR_PRISM_RUN_GUARDRAILS)" in err
    assert stored(url, crashed) == before


def test_continue_finishes_a_crashed_run(capsys: Any, host: Any, url: str) -> None:
    """A run whose worker stopped between turns is continued to its end."""
    run_id = seed(url, host, "s-1", how="crashed")
    version, status = stored(url, run_id)  # type: ignore[misc]
    assert status == "running"
    assert version >= 2
    assert refunds(host) == ["A-1", "B-2"]
    app = f"{host.__name__}:resolve_agent"
    code, out, err = cli(capsys, "runs", "continue", run_id, "--store", url, "--app", app, "--here")
    assert (code, err) == (0, "")
    assert out.startswith(f"run {run_id}: succeeded")
    assert refunds(host) == ["A-1", "B-2"]


def test_continue_of_an_in_doubt_run(capsys: Any, host: Any, url: str) -> None:
    """An in-doubt call is never re-run blindly: a plain continue is refused with its id and
    nothing written; ``--resolve ID=completed:JSON`` stores that result without running the
    call again, and the run goes on."""
    run_id = seed(url, host, "s-1", how="in-doubt")
    app = f"{host.__name__}:resolve_agent"
    code, out, err = cli(capsys, "runs", "continue", run_id, "--store", url, "--app", app)
    assert (code, out) == (1, "")
    assert "refused (ERR_PRISM_TOOL_IN_DOUBT)" in err
    assert "c1" in err
    assert stored(url, run_id) == (2, "running")
    resolution = 'c1=completed:{"refunded": "A-1"}'
    code, out, err = cli(
        capsys,
        "runs",
        "continue",
        run_id,
        "--store",
        url,
        "--app",
        app,
        "--resolve",
        resolution,
        "--here",
    )
    assert (code, err) == (0, "")
    assert out.startswith(f"run {run_id}: succeeded")
    assert refunds(host) == ["B-2"]


@pytest.mark.parametrize(
    ("resolution", "ran"),
    [("c1=not_started", ["A-1", "B-2"]), ("c1=failed:card declined", ["B-2"])],
)
def test_other_resolutions(
    capsys: Any, host: Any, url: str, resolution: str, ran: list[str]
) -> None:
    """``not_started`` runs the call now; ``failed`` records the failure and never runs it."""
    run_id = seed(url, host, "s-1", how="in-doubt")
    app = f"{host.__name__}:resolve_agent"
    here = ("--store", url, "--app", app, "--resolve", resolution, "--here")
    code, out, err = cli(capsys, "runs", "continue", run_id, *here)
    assert (code, err) == (0, "")
    assert out.startswith(f"run {run_id}: succeeded")
    assert refunds(host) == ran
    code, out, err = cli(capsys, "runs", "continue", run_id, *here)
    assert code == 1
    assert "refused (" in err
    assert refunds(host) == ran


@pytest.mark.parametrize(
    ("text", "entry"),
    [
        ("c1=not_started", {"tool_call_id": "c1", "outcome": "not_started"}),
        (
            'c1=completed:{"ok": [1, "a=b"]}',
            {"tool_call_id": "c1", "outcome": "completed", "result": {"ok": [1, "a=b"]}},
        ),
        ("c1=completed:null", {"tool_call_id": "c1", "outcome": "completed", "result": None}),
        (
            "call_9=failed:card declined: expired",
            {"tool_call_id": "call_9", "outcome": "failed", "reason": "card declined: expired"},
        ),
    ],
)
def test_resolutions_parse(text: str, entry: dict[str, Any]) -> None:
    """Each ``--resolve`` form becomes one resolution entry of the resume input."""
    assert parse_resolution(text) == entry


@pytest.mark.parametrize(
    "argv",
    [
        ["runs", "continue", "r", "--store", "sqlite://", "--app", "m:a", "--resolve", "c1"],
        ["runs", "continue", "r", "--store", "sqlite://", "--app", "m:a", "--resolve", "c1=done"],
        ["runs", "continue", "r", "--store", "sqlite://", "--app", "m:a", "--resolve", "=x"],
        [
            "runs",
            "continue",
            "r",
            "--store",
            "sqlite://",
            "--app",
            "m:a",
            "--resolve",
            "c1=completed:{nope",
        ],
        [
            "runs",
            "continue",
            "r",
            "--store",
            "sqlite://",
            "--app",
            "m:a",
            "--resolve",
            "c1=failed:",
        ],
        ["runs", "continue", "r", "--store", "sqlite://"],
        ["runs", "list"],
        ["runs", "list", "--store", "sqlite://", "--status", "sleeping"],
        ["runs", "list", "--store", "sqlite://", "--owner", "tenant"],
        ["runs", "show", "--store", "sqlite://"],
        ["runs", "frobnicate"],
    ],
)
def test_usage_mistakes_exit_2(capsys: Any, argv: list[str]) -> None:
    """Malformed arguments are usage errors (exit 2), found before any store is opened."""
    code, out, err = cli(capsys, *argv)
    assert code == 2
    assert out == ""
    assert "usage:" in err


def test_bad_app_and_limit_exit_2(capsys: Any, host: Any, url: str) -> None:
    """An ``--app`` that does not name a callable, or a ``--limit`` below 1: exit 2."""
    run_id = seed(url, host, "s-1", how="suspended")
    for app in ("no_colon", "no_such_module_xyz:resolve", f"{host.__name__}:missing"):
        code, _, err = cli(capsys, "runs", "approve", run_id, "--store", url, "--app", app)
        assert code == 2
        assert "--app" in err
    code, _, err = cli(capsys, "runs", "list", "--store", url, "--limit", "0")
    assert code == 2
    assert "--limit" in err
    assert stored(url, run_id) == (1, "suspended")


def test_an_unsupported_store_url_is_refused(capsys: Any) -> None:
    """A URL no installed store opens: exit 1 with the store error's code."""
    code, _, err = cli(capsys, "runs", "list", "--store", "ftp://example.invalid/x")
    assert code == 1
    assert "refused (ERR_PRISM_STORE_UNSUPPORTED)" in err


def test_approve_records_and_a_prism_worker_runs_it_once(
    tmp_path: Path, host: Any, url: str
) -> None:
    """As subprocesses: ``prism runs approve --wait`` records the decision and runs no tool in
    its own process; a ``prism worker`` claims the run and runs each approved call exactly
    once (its process id in the tool log); ``--wait`` prints each step until the run stops;
    SIGTERM stops the worker with exit 0."""
    run_id = seed(url, host, "s-1", how="suspended")
    app = f"{host.__name__}:resolve_agent"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}

    def prism(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "prism_cli", *argv],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )

    listed = prism("runs", "list", "--store", url, "--json")
    assert listed.returncode == 0, listed.stderr
    assert [json.loads(line)["run_id"] for line in listed.stdout.splitlines()] == [run_id]
    with (tmp_path / "worker.log").open("w") as worker_log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "prism_cli", "worker", "--store", url, "--app", app],
            cwd=tmp_path,
            env=env,
            stdout=worker_log,
            stderr=subprocess.STDOUT,
        )
        try:
            approved = prism(
                "runs", "approve", run_id, "--store", url, "--app", app, "--all", "--wait", "150"
            )
        finally:
            worker.send_signal(signal.SIGTERM)
            code = worker.wait(timeout=60)
    log = (tmp_path / "worker.log").read_text()
    assert code == 0, log
    assert "SIGTERM: stopping" in log
    assert approved.returncode == 0, approved.stderr
    lines = approved.stdout.splitlines()
    assert lines[0] == f"run {run_id}: approve recorded at version 2"
    assert lines[-1].startswith(f"run {run_id}: succeeded (version ")
    # Every refund ran once, in the worker's process, none in the operator's.
    assert refund_log(host) == [("A-1", worker.pid), ("B-2", worker.pid)]
    shown = prism("runs", "show", run_id, "--store", url, "--json")
    assert json.loads(shown.stdout)["status"] == "succeeded"
    again = prism("runs", "approve", run_id, "--store", url, "--app", app, "--all")
    assert again.returncode == 1
    assert "refused (ERR_PRISM_AGENT_RUN_STATE)" in again.stderr


def test_wait_without_a_worker_gives_up_and_leaves_the_decision(
    capsys: Any, host: Any, url: str
) -> None:
    """``--wait 1`` with no worker running: the decision stays recorded, nothing ran, and the
    command exits 1 saying it gave up; ``--wait`` and ``--here`` do not go together."""
    run_id = seed(url, host, "s-1", how="suspended")
    app = f"{host.__name__}:resolve_agent"
    base = ("--store", url, "--app", app, "--all")
    code, out, err = cli(capsys, "runs", "approve", run_id, *base, "--wait", "1")
    assert code == 1
    assert out.splitlines() == [f"run {run_id}: approve recorded at version 2"]
    assert "gave up waiting after 1 s; the run is still running" in err
    assert stored(url, run_id) == (2, "running")
    assert refunds(host) == []
    with pytest.raises(SystemExit):
        main(["runs", "approve", run_id, *base, "--wait", "1", "--here"])


def test_a_corrupt_record_is_named_and_the_others_listed(
    capsys: Any, host: Any, url: str, tmp_path: Path
) -> None:
    """A run row rewritten with ``sqlite3`` so it cannot be read back: ``list`` still lists
    the other runs (exit 0) and names the corrupt one on stderr."""
    good = seed(url, host, "s-1", how="suspended")
    bad = seed(url, host, "s-2", how="suspended")
    with sqlite3.connect(tmp_path / "runs.db") as db:
        db.execute("UPDATE prism_checkpoints SET value = 'nul' WHERE key = ?", (bad,))
    code, out, err = cli(capsys, "runs", "list", "--store", url)
    assert code == 0
    assert good in out
    assert bad not in out
    assert f"record {bad} cannot be read and is not listed" in err
    assert "corrupt" in err


def test_the_audit_keeps_actor_and_reason_through_a_subprocess(
    tmp_path: Path, host: Any, url: str
) -> None:
    """``approve --actor --reason`` in a subprocess records both; ``show`` prints the audit
    (text and JSON); without ``--actor`` the OS user name is recorded."""
    run_id = seed(url, host, "s-1", how="suspended")
    app = f"{host.__name__}:resolve_agent"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path]),
        "LOGNAME": "operator-from-env",
    }

    def prism(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "prism_cli", *argv],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    base = ("--store", url, "--app", app)
    first = prism(
        "runs", "approve", run_id, *base, "--call", "c1", "--actor", "alice", "--reason", "ok"
    )
    assert first.returncode == 0, first.stderr
    second = prism("runs", "deny", run_id, *base, "--call", "c2", "--reason", "duplicate order")
    assert second.returncode == 0, second.stderr
    # Recorded only: nothing ran in the operator's processes.
    assert refunds(host) == []
    shown = prism("runs", "show", run_id, "--store", url, "--json")
    assert shown.returncode == 0, shown.stderr
    audit = json.loads(shown.stdout)["audit"]
    assert [
        (r["tool_call_id"], r["tool_name"], r["outcome"], r["actor"], r["reason"], r["version"])
        for r in audit
    ] == [
        ("c1", "refund", "allow_once", "alice", "ok", 1),
        ("c2", "refund", "reject_once", "operator-from-env", "duplicate order", 2),
    ]
    assert all(isinstance(r["decided_at"], float) for r in audit)
    text = prism("runs", "show", run_id, "--store", url)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    start = lines.index("audit: 2")
    assert " allow_once  call c1  refund  by alice  via cli  (version 1)" in lines[start + 1]
    assert lines[start + 2] == "    reason: ok"
    assert (
        " reject_once  call c2  refund  by operator-from-env  via cli  (version 2)"
        in lines[start + 3]
    )
    assert lines[start + 4] == "    reason: duplicate order"
    # Nothing ran yet (no worker): no receipt.
    assert lines[start + 5] == "receipts: 0"


def test_continue_records_the_actor_of_a_resolution(capsys: Any, host: Any, url: str) -> None:
    """``continue --resolve --actor`` audits the resolution with its actor."""
    run_id = seed(url, host, "s-1", how="in-doubt")
    app = f"{host.__name__}:resolve_agent"
    code, _, err = cli(
        capsys,
        "runs",
        "continue",
        run_id,
        "--store",
        url,
        "--app",
        app,
        "--resolve",
        "c1=not_started",
        "--actor",
        "oncall",
        "--reason",
        "bank shows no transfer",
    )
    assert code == 0, err
    code, out, _ = cli(capsys, "runs", "show", run_id, "--store", url, "--json")
    audit = json.loads(out)["audit"]
    assert [
        (r["approval_id"], r["tool_call_id"], r["outcome"], r["actor"], r["reason"]) for r in audit
    ] == [(None, "c1", "not_started", "oncall", "bank shows no transfer")]


OPERATOR_COMMANDS = [
    ("list",),
    ("show", "run_1"),
    ("approve", "run_1", "--app", "APP", "--all"),
    ("deny", "run_1", "--app", "APP", "--all"),
    ("continue", "run_1", "--app", "APP"),
]


@pytest.mark.parametrize("command", OPERATOR_COMMANDS, ids=[c[0] for c in OPERATOR_COMMANDS])
def test_a_mistyped_sqlite_store_is_refused_and_not_created(
    capsys: Any, host: Any, tmp_path: Path, command: tuple[str, ...]
) -> None:
    """A ``--store`` naming a SQLite file that does not exist: exit 1, "no Prism tables at",
    and the file is not created by any operator command."""
    typo = tmp_path / "runs-typo.db"
    argv = [part.replace("APP", f"{host.__name__}:resolve_agent") for part in command]
    code, out, err = cli(capsys, "runs", argv[0], *argv[1:], "--store", f"sqlite:///{typo}")
    assert (code, out) == (1, "")
    assert f"refused (ERR_PRISM_STORE_SCHEMA): no Prism tables at sqlite:///{typo}" in err
    assert not typo.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("runs-typo")] == []


def test_a_sqlite_database_of_another_application_is_left_alone(
    capsys: Any, tmp_path: Path
) -> None:
    other = tmp_path / "crm.db"
    with sqlite3.connect(other) as connection:
        connection.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY)")
    before = other.read_bytes()
    code, _, err = cli(capsys, "runs", "list", "--store", f"sqlite:///{other}")
    assert code == 1
    assert f"no Prism tables at sqlite:///{other}" in err
    assert other.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["crm.db"]


def test_a_postgresql_store_without_prism_tables_creates_none(tmp_path: Path) -> None:
    """As a subprocess: a database without tables under the prefix is refused with the
    password masked, and no table appears under the prefix."""
    import uuid

    import psycopg

    from tests.conftest import POSTGRES_URL, service_unavailable
    from tests.integration.test_crash_demo import reachable

    reason = reachable("127.0.0.1", 5432)
    if reason:
        service_unavailable("PostgreSQL", reason)
    prefix = f"pnone_{uuid.uuid4().hex[:8]}_"
    url = POSTGRES_URL.replace("postgres@", "postgres:s3cret-pw@", 1)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "prism_cli",
            "runs",
            "list",
            "--store",
            f"{url}?table_prefix={prefix}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "refused (ERR_PRISM_STORE_SCHEMA): no Prism tables at postgresql" in done.stderr
    assert "postgres:***@" in done.stderr
    assert "s3cret-pw" not in done.stderr
    with psycopg.connect(POSTGRES_URL) as connection:
        rows = connection.execute(
            "SELECT tablename FROM pg_tables WHERE starts_with(tablename, %s)", (prefix,)
        ).fetchall()
    assert rows == []


def test_an_oversized_actor_is_refused_and_nothing_decided(
    capsys: Any, host: Any, url: str
) -> None:
    run_id = seed(url, host, "s-1", how="suspended")
    app = f"{host.__name__}:resolve_agent"
    code, out, err = cli(
        capsys,
        "runs",
        "approve",
        run_id,
        "--store",
        url,
        "--app",
        app,
        "--all",
        "--actor",
        "a" * 257,
    )
    assert (code, out) == (1, "")
    assert "refused (ERR_PRISM_DECISION_LIMIT): actor is 257 bytes; the limit is 256" in err
    assert stored(url, run_id) == (1, "suspended")
    assert refunds(host) == []
