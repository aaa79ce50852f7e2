"""``prism runs show`` on a call that needs two approvers and expires: the approvals needed
and given, the deadline, the receipts; every stored string with its control characters
escaped, so no stored text forges a line of the report."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

import prism_store_sql
from prism_cli._main import main
from prism_core import (
    RunStateOptions,
    ToolDefinition,
    create_agent,
    open_checkpoint_store,
    open_session_store,
    provider_done,
    provider_text_delta,
    provider_tool_call,
    resume_agent_run,
    tool_call_content,
)

FORGED = "ok\naudit: 0\x1b[2K\u202e"


class _Model:
    id = "mock"

    async def generate(self, request: Any) -> Any:
        if not any(m.role == "assistant" for m in request.messages):
            yield provider_tool_call(tool_call_content("w1", "wire", {"memo": "rent\nreceipts: 9"}))
        else:
            yield provider_text_delta("wired")
        yield provider_done()


def _agent(sessions: Any) -> Any:
    return create_agent(
        id="treasury",
        model={"provider": "mock", "model": "demo"},
        provider=_Model(),
        store=sessions,
        tools=[
            ToolDefinition(
                "wire",
                lambda args, context: "sent",
                needs_approval=True,
                approvers=2,
                approval_timeout_ms=4 * 3600 * 1000,
            )
        ],
    )


def _decide(url: str, *, finish: bool) -> dict[str, Any]:
    """A run held for two approvers, allowed by one (with a reason that tries to forge lines),
    and, with ``finish``, by a second one (the wire then runs)."""

    async def go() -> dict[str, Any]:
        plugins = [prism_store_sql.plugin]
        async with (
            open_checkpoint_store(url, plugins=plugins) as checkpoints,
            open_session_store(url, plugins=plugins) as sessions,
        ):
            agent = _agent(sessions)
            held = await agent.create_session(id="s1").run(
                "wire the rent", run_state=RunStateOptions(checkpoints, "t1")
            )
            ref = {"run_id": held.run_id, "session_id": "s1"}
            options = {"checkpoints": checkpoints, "definition_revision": "t1"}
            after = await resume_agent_run(
                agent,
                ref,
                {
                    "expected_version": held.run_state.version,
                    "decision": "approve",
                    "actor": "alice\x1b[31m",
                    "reason": FORGED,
                },
                **options,
            )
            (pending,) = after.interruption.pending_decisions
            if finish:
                await resume_agent_run(
                    agent,
                    ref,
                    {
                        "expected_version": after.run_state.version,
                        "decision": "approve",
                        "actor": "bob",
                    },
                    **options,
                )
            return {"run_id": held.run_id, "expires_at": pending.expires_at}

    return anyio.run(go)


def _show(capsys: pytest.CaptureFixture[str], url: str, run_id: str, *extra: str) -> str:
    try:
        code = main(["runs", "show", run_id, "--store", url, *extra])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    assert (code, out.err) == (0, "")
    return out.out


def test_show_prints_approvals_needed_and_given_and_the_deadline(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    run = _decide(url, finish=False)
    out = _show(capsys, url, run["run_id"])
    lines = out.splitlines()
    assert "    approvals: 1 of 2 (alice\\x1b[31m)" in lines
    deadline = datetime.fromtimestamp(run["expires_at"], UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert any(line.startswith(f"    expires: {deadline} (pending since ") for line in lines)
    # Arguments print as JSON: the newline is the encoder's escape, never a line break.
    assert '    arguments: {"memo": "rent\\nreceipts: 9"}' in lines
    assert "    reason: ok\\naudit: 0\\x1b[2K\\u202e" in lines
    # No stored text added a line: one "audit:" and one "receipts:" line, as the report has.
    assert [line for line in lines if line.startswith("audit: ")] == ["audit: 1"]
    assert [line for line in lines if line.startswith("receipts: ")] == ["receipts: 0"]
    assert "\x1b" not in out
    assert "\u202e" not in out
    detail = json.loads(_show(capsys, url, run["run_id"], "--json"))
    (decision,) = detail["decisions"]
    assert decision["approvers"] == 2
    assert decision["approved_by"] == ["alice\x1b[31m"]
    assert decision["expires_at"] == run["expires_at"]
    assert decision["expires_at"] - decision["pending_since"] == pytest.approx(14400.0)


def test_show_prints_the_receipt_of_the_call_that_ran(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    run = _decide(url, finish=True)
    lines = _show(capsys, url, run["run_id"]).splitlines()
    start = lines.index("receipts: 1")
    assert " executed  call w1  wire  by " in lines[start + 1]
    assert lines[start + 1].endswith("  via worker  (version 4)")
    assert "  via host  (version 1)" in lines[lines.index("audit: 2") + 1]
