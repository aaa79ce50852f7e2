"""The ledger's commands as an operator runs them, each a ``prism`` subprocess: ``effects
list`` with every filter, ``audit export``, ``runs show`` of a finished run (its calls, its
child runs, every stored string escaped), ``runs list --all``, ``--dry-run``, ``runs purge``
and ``sessions erase``; on SQLite, and ``effects list`` on PostgreSQL and Redis too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.cli import ledger_host
from tests.conftest import POSTGRES_URL, REDIS_URL, service_unavailable

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Any]:
    """The host module, imported from ``tmp_path``."""
    module = ledger_host.install(tmp_path)
    yield module
    sys.modules.pop(module.__name__, None)


def prism(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m prism_cli ARGV`` in ``tmp_path`` (where the host module is)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    return subprocess.run(
        [sys.executable, "-m", "prism_cli", *argv],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def ok(done: subprocess.CompletedProcess[str]) -> str:
    """The stdout of a command that must have succeeded."""
    assert done.returncode == 0, done.stderr
    return done.stdout


def lines_of(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    """The JSON lines a command printed."""
    return [json.loads(line) for line in ok(done).splitlines()]


def approved(tmp_path: Path, host: Any, url: str) -> tuple[str, str]:
    """A run approved by ``ana`` and run to its end; its id and its session id."""
    session = f"s-{uuid.uuid4().hex[:8]}"
    run_id, _ = ledger_host.seed(url, host, session)
    app = f"{host.__name__}:resolve_agent"
    out = ok(
        prism(
            tmp_path,
            "runs",
            "approve",
            run_id,
            "--store",
            url,
            "--app",
            app,
            "--actor",
            "ana",
            "--reason",
            "customer called",
            "--here",
        )
    )
    assert out.startswith(f"run {run_id}: succeeded"), out
    return run_id, session


@pytest.fixture(params=["sqlite", "postgresql", "redis"])
def any_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store URL on each backend (its own file, table prefix or key prefix)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}"
        return
    if request.param == "redis":
        import redis

        client = redis.Redis.from_url(REDIS_URL)
        try:
            client.ping()
        except (redis.RedisError, OSError) as exc:
            service_unavailable("Redis", f"{REDIS_URL}: {exc}")
        prefix = f"prismtest:{uuid.uuid4().hex}"
        yield f"{REDIS_URL}?prefix={prefix}"
        keys = list(client.scan_iter(match=f"{prefix}:*"))
        if keys:
            client.delete(*keys)
        client.close()
        return
    import anyio

    from prism_store_sql import migrate
    from tests.store_sql.conftest import _drop_prefix

    prefix = f"prism_c{uuid.uuid4().hex[:10]}_"
    try:
        anyio.run(lambda: migrate(POSTGRES_URL, table_prefix=prefix))
    except Exception as exc:
        service_unavailable("PostgreSQL", f"{POSTGRES_URL}: {exc}")
    yield f"{POSTGRES_URL}?table_prefix={prefix}"
    anyio.run(lambda: _drop_prefix(POSTGRES_URL, prefix))


def test_effects_list_filters_and_the_audit_export(tmp_path: Path, host: Any, any_url: str) -> None:
    """Every filter of ``effects list`` narrows to the calls it names; ``audit export``
    prints the approval (who, which door, why) and every effect as JSON lines."""
    run_id, _ = approved(tmp_path, host, any_url)
    store = ("--store", any_url)
    every = lines_of(prism(tmp_path, "effects", "list", *store, "--json"))
    by_call = {e["tool_call_id"]: e for e in every}
    assert set(by_call) == {"c1", "c2", "k2"}
    refund = by_call["c1"]
    assert (refund["tool_name"], refund["status"], refund["approved_by"]) == (
        "refund",
        "completed",
        ["ana"],
    )
    assert refund["arguments"] == {"order": "A-3", "amount": 12}
    assert by_call["k2"]["parent_run_id"] == run_id
    assert by_call["k2"]["run_id"] != run_id

    def calls(*filters: str) -> list[str]:
        return sorted(
            e["tool_call_id"]
            for e in lines_of(prism(tmp_path, "effects", "list", *store, "--json", *filters))
        )

    assert calls("--tool", "refund") == ["c1"]
    assert calls("--actor", "ana") == ["c1"]
    assert calls("--actor", "bob") == []
    assert calls("--arg", "order=A-3") == ["c1"]
    assert calls("--arg", "order=A-3", "--arg", "amount=12") == ["c1"]
    assert calls("--arg", 'amount="12"') == []
    assert calls("--key", refund["idempotency_key"]) == ["c1"]
    assert calls("--run", run_id) == ["c1", "c2"]
    assert calls("--status", "completed") == ["c1", "c2", "k2"]
    assert calls("--status", "in_doubt") == []
    later = datetime.fromtimestamp(time.time() + 3600, UTC).isoformat()
    assert calls("--since", later) == []
    assert calls("--since", "2020-01-01") == ["c1", "c2", "k2"]
    assert calls("--owner", "tenant_id=nobody") == []
    table = ok(prism(tmp_path, "effects", "list", *store, "--tool", "refund")).splitlines()
    assert table[0].split()[:4] == ["STARTED", "STATUS", "TOOL", "CALL"]
    assert len(table) == 2
    assert "ana" in table[1]
    assert '"order": "A-3"' in table[1]

    rows = lines_of(prism(tmp_path, "audit", "export", *store))
    decisions = [r for r in rows if r["kind"] == "decision"]
    # The decision, then the receipt of the allowed call, by the process that ran it.
    assert [
        (d["tool_call_id"], d["outcome"], d["actor"], d["channel"], d["reason"]) for d in decisions
    ] == [
        ("c1", "allow_once", "ana", "cli", "customer called"),
        ("c1", "executed", decisions[1]["actor"], "worker", None),
    ]
    assert decisions[1]["actor"].rsplit(":", 1)[1].isdigit()
    assert sorted(r["tool_call_id"] for r in rows if r["kind"] == "effect") == ["c1", "c2", "k2"]
    assert ok(prism(tmp_path, "audit", "export", *store, "--since", later)) == ""


def test_runs_show_of_a_finished_run_prints_its_calls_and_children(
    tmp_path: Path, host: Any
) -> None:
    """A finished run's report lists each call with its arguments, key, status and result,
    its child run, and the audit naming who and through which door; no stored text reaches
    the terminal raw (the child's note holds a newline, an escape sequence and a bidi
    override)."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    run_id, _ = approved(tmp_path, host, url)
    report = ok(prism(tmp_path, "runs", "show", run_id, "--store", url))
    lines = report.splitlines()
    calls = lines.index("calls: 2")
    assert lines[calls + 1].split() == ["c1", "refund", "completed", "approved", "by", "ana"]
    assert lines[calls + 2] == '    arguments: {"amount": 12, "order": "A-3"}'
    assert lines[calls + 3].startswith("    idempotency key: idem_")
    assert lines[calls + 4] == '    result: {"refunded": "A-3"}'
    assert lines[calls + 5].split()[:3] == ["c2", "researcher", "completed"]
    children = lines.index("child runs: 1")
    child_id = lines[children + 1].split()[0]
    assert lines[children + 1].split()[1:3] == ["researcher", "succeeded"]
    assert any(" allow_once  call c1  refund  by ana  via cli  " in line for line in lines)
    child = ok(prism(tmp_path, "runs", "show", child_id, "--store", url))
    assert f"parent     {run_id}" in child.splitlines()
    assert "\x1b" not in child
    assert "\u202e" not in child
    note = next(
        line
        for line in child.splitlines()
        if line.startswith("    arguments:") and "forged" in line
    )
    assert note == '    arguments: {"text": "line\\nforged \\u001b[31mred\\u202e"}'
    detail = json.loads(ok(prism(tmp_path, "runs", "show", run_id, "--store", url, "--json")))
    assert [c["tool_call_id"] for c in detail["calls"]] == ["c1", "c2"]
    assert detail["calls"][0]["result"] == {"refunded": "A-3"}
    assert [c["run_id"] for c in detail["children"]] == [child_id]

    top = lines_of(prism(tmp_path, "runs", "list", "--store", url, "--json"))
    assert [r["run_id"] for r in top] == [run_id]
    every = lines_of(prism(tmp_path, "runs", "list", "--store", url, "--json", "--all"))
    assert sorted(r["run_id"] for r in every) == sorted([run_id, child_id])
    assert {r["run_id"]: r["parent_run_id"] for r in every}[child_id] == run_id


def test_a_dry_run_writes_nothing_and_says_what_would_run(tmp_path: Path, host: Any) -> None:
    """``approve --dry-run`` names the call it would dispatch, ``continue --dry-run`` the
    refusal a suspended run gets; the SQLite file is byte for byte as it was."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    run_id, version = ledger_host.seed(url, host, "s-dry")
    files = [tmp_path / "runs.db", tmp_path / "runs.db-wal"]
    before = [path.read_bytes() if path.exists() else b"" for path in files]
    app = f"{host.__name__}:resolve_agent"
    common = ("--store", url, "--app", app)
    approve = ok(prism(tmp_path, "runs", "approve", run_id, *common, "--dry-run"))
    assert approve.splitlines() == [
        f"run {run_id}: dry run of approve at version {version}; nothing was written",
        "  would dispatch: c1",
        "  would run again: none",
        "  in doubt: none",
        "  would be refused: no",
    ]
    refused = prism(tmp_path, "runs", "continue", run_id, *common, "--dry-run")
    assert refused.returncode == 1
    assert "would be refused (ERR_PRISM_AGENT_RUN_STATE)" in refused.stdout
    denied = ok(prism(tmp_path, "runs", "deny", run_id, *common, "--dry-run"))
    assert "  would dispatch: none" in denied.splitlines()
    assert [path.read_bytes() if path.exists() else b"" for path in files] == before


def test_purge_and_erase(tmp_path: Path, host: Any) -> None:
    """``runs purge`` deletes the finished runs before the date (their effects stay);
    ``sessions erase`` deletes a session's transcript and runs and keeps its ledger rows as
    hashes, and is refused while a run of it is active."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    store = ("--store", url)
    first, first_session = approved(tmp_path, host, url)
    waiting_session = "s-waiting"
    waiting, _ = ledger_host.seed(url, host, waiting_session)
    now = datetime.fromtimestamp(time.time() + 1, UTC).isoformat()
    purged = ok(prism(tmp_path, "runs", "purge", *store, "--finished-before", now))
    assert purged.strip() == "purged 2 finished run(s); their effect and decision records stay"
    # The waiting run's sub-agent run finished, but goes only with its parent.
    remaining = lines_of(prism(tmp_path, "runs", "list", *store, "--json", "--all"))
    assert {r["run_id"]: r["parent_run_id"] for r in remaining}.get(waiting, "gone") is None
    assert [r["parent_run_id"] for r in remaining if r["run_id"] != waiting] == [waiting]
    assert len(lines_of(prism(tmp_path, "effects", "list", *store, "--json", "--run", first))) == 2

    erased = ok(prism(tmp_path, "sessions", "erase", waiting_session, *store))
    assert erased.startswith(f"erased session {waiting_session}: 2 run(s) and ")
    assert "  with sub-agent session session_" in erased
    assert lines_of(prism(tmp_path, "runs", "list", *store, "--json", "--all")) == []
    for effect in lines_of(prism(tmp_path, "effects", "list", *store, "--json")):
        if effect["session_id"] == waiting_session:
            assert effect["arguments"] == f"sha256:{effect['arguments_hash']}"
    assert first_session != waiting_session


def test_erase_is_refused_while_a_run_is_active(tmp_path: Path, host: Any) -> None:
    """A run left ``running`` without a lease may still be held by a worker: the erasure is
    refused (exit 1, its code printed) and nothing is deleted."""
    import anyio

    from prism_core import AGENT_RUN_NAMESPACE, open_stores
    from tests.cli.runs_support import _plugins

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    run_id, _ = ledger_host.seed(url, host, "s-active")

    async def mark_running() -> None:
        async with open_stores(url, plugins=_plugins()) as stores:
            record = await stores.checkpoints.load(AGENT_RUN_NAMESPACE, run_id)
            assert record is not None
            value = {**record.value, "status": "running", "interruption": None}
            await stores.checkpoints.save(
                AGENT_RUN_NAMESPACE, run_id, value, version=record.version + 1
            )

    anyio.run(mark_running)
    refused = prism(tmp_path, "sessions", "erase", "s-active", "--store", url)
    assert refused.returncode == 1
    assert "refused (ERR_PRISM_SESSION_ACTIVE)" in refused.stderr
    listed = lines_of(prism(tmp_path, "runs", "list", "--store", url, "--json"))
    assert [r["run_id"] for r in listed] == [run_id]
