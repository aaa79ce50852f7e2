"""Durable runs on MCP tools: a SIGKILLed worker continued in a new process, a call cut by a
crash left in doubt and resolved, and a changed server schema refusing the resume.

The ledger server (official SDK, Streamable HTTP on loopback) outlives the workers and logs
every call it receives, so "each call reached the server exactly once" is counted there.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from prism_core import (
    AgentRunStateError,
    RunStateOptions,
    create_memory_checkpoint_store,
    create_memory_session_store,
    load_agent_run_state,
    resume_agent_run,
)
from prism_mcp import MCPServerStdio, mcp_tools
from tests.core.durable_support import rewrite_as_in_doubt

from .conftest import HttpLedger, ledger_entries
from .durable_worker import ANSWER
from .support import agent_on, by_name, calls, says

WORKER = Path(__file__).with_name("durable_worker.py")
#: Seconds a worker may take to print its next line or to finish.
PATIENCE = 120


class Worker:
    """One worker process and the JSON lines it printed."""

    def __init__(self, **args: Any) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), json.dumps(args)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: list[dict[str, Any]] = []

    def until(self, key: str) -> dict[str, Any]:
        """Read lines until one has ``key``; fail if none comes in time or the worker ends."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [], 1.0)
            if not ready:
                continue
            line = self.process.stdout.readline()
            if not line:
                break
            if line.startswith("{"):
                self.lines.append(json.loads(line))
                if key in self.lines[-1]:
                    return self.lines[-1]
        self.kill()
        pytest.fail(f"the worker printed no {key!r} line: {self.lines}")

    def finish(self) -> tuple[int, dict[str, Any]]:
        """Wait for the end; the exit status and the last line."""
        assert self.process.stdout is not None
        out, _ = self.process.communicate(timeout=PATIENCE)
        self.lines += [json.loads(x) for x in out.splitlines() if x.startswith("{")]
        return self.process.returncode, self.lines[-1]

    def kill(self) -> None:
        """SIGKILL the worker by its pid."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        if self.process.stdout is not None:
            self.process.stdout.close()


def _calls(ledger: HttpLedger) -> Counter[tuple[str, str, str | None]]:
    """How often each (tool, entry, phase) reached the server."""
    return Counter((e["tool"], e["entry"], e.get("phase")) for e in ledger.entries())


def _wait_for_slow_call(ledger: HttpLedger) -> None:
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        if any(e["tool"] == "slow_append" for e in ledger.entries()):
            return
        time.sleep(0.05)
    pytest.fail(f"the slow call never reached the server: {ledger.entries()}")


@pytest.mark.long
def test_a_killed_worker_is_continued_in_a_new_process(
    http_ledger: HttpLedger, tmp_path: Path
) -> None:
    """Killed while the model thinks its third turn; a new process with a fresh
    ``mcp_tools`` block continues from the last checkpoint, and each call reached the server
    exactly once, each with its own idempotency key."""
    base = {"store": f"sqlite:///{tmp_path / 'runs.db'}", "url": http_ledger.url, "session": "s1"}
    first = Worker(**base, think_at=2)
    run_id = first.until("run_id")["run_id"]
    assert first.until("thinking") == {"thinking": 2}
    first.kill()

    code, last = Worker(**base, run_id=run_id).finish()
    assert (code, last) == (0, {"status": "succeeded", "text": ANSWER})
    assert _calls(http_ledger) == {
        ("append_entry", "one", None): 1,
        ("slow_append", "two", "started"): 1,
        ("slow_append", "two", "finished"): 1,
        ("append_entry", "three", None): 1,
    }
    keys = [e["key"] for e in http_ledger.entries() if e.get("phase") != "finished"]
    assert len(set(keys)) == 3
    assert all(key.startswith("idem_") for key in keys)


@pytest.mark.long
def test_an_mcp_call_cut_by_a_crash_stays_in_doubt_until_resolved(
    http_ledger: HttpLedger, tmp_path: Path
) -> None:
    """Killed while the server holds ``slow_append``: a continue is refused with the call in
    doubt (and sends nothing); the operator's ``completed`` resolution settles it, and the run
    finishes without calling it again."""
    base = {"store": f"sqlite:///{tmp_path / 'runs.db'}", "url": http_ledger.url, "session": "s1"}
    first = Worker(**base, slow=300)
    run_id = first.until("run_id")["run_id"]
    _wait_for_slow_call(http_ledger)
    first.kill()
    seen = _calls(http_ledger)

    code, refused = Worker(**base, run_id=run_id).finish()
    assert (code, refused) == (3, {"code": "ERR_PRISM_TOOL_IN_DOUBT", "in_doubt": ["c2"]})
    assert _calls(http_ledger) == seen

    resolution = {"tool_call_id": "c2", "outcome": "completed", "result": "appended two slowly"}
    code, last = Worker(**base, run_id=run_id, resolutions=[resolution]).finish()
    assert (code, last) == (0, {"status": "succeeded", "text": ANSWER})
    assert _calls(http_ledger) == {
        ("append_entry", "one", None): 1,
        ("slow_append", "two", "started"): 1,
        ("append_entry", "three", None): 1,
    }


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_changed_server_schema_refuses_the_resume(
    stdio_ledger: Callable[..., MCPServerStdio], tmp_path: Path
) -> None:
    """The fingerprint covers the MCP tools' names and schemas: after the server added a
    parameter, the approval is refused with the usual mismatch and nothing is sent; the same
    schema in a fresh block resumes."""
    checkpoints, sessions = create_memory_checkpoint_store(), create_memory_session_store()
    turns = [calls(("c1", "append_entry", {"entry": "one"})), says("Done.")]
    revision = "mcp-schema-1"
    async with mcp_tools(stdio_ledger(name="ledger")) as tools:
        result = (
            await agent_on(tools, turns, store=sessions)
            .create_session()
            .run(
                "append",
                run_state=RunStateOptions(checkpoints, revision, interrupt_before_tool=True),
            )
        )
    assert result.status == "suspended"
    ref = {"run_id": result.run_id, "session_id": result.session_id}
    approve = {"expected_version": result.run_state.version, "decision": "approve"}

    async with mcp_tools(stdio_ledger(name="ledger", variant=2)) as changed:
        with pytest.raises(AgentRunStateError) as refused:
            await resume_agent_run(
                agent_on(changed, turns, store=sessions),
                ref,
                approve,
                checkpoints=checkpoints,
                definition_revision=revision,
            )
    assert refused.value.code == "ERR_PRISM_AGENT_RUN_STATE"
    assert "fingerprint mismatch" in str(refused.value)
    assert ledger_entries(tmp_path / "stdio-ledger.jsonl") == []

    async with mcp_tools(stdio_ledger(name="ledger")) as again:
        resumed = await resume_agent_run(
            agent_on(again, turns, store=sessions),
            ref,
            approve,
            checkpoints=checkpoints,
            definition_revision=revision,
        )
    assert resumed.status == "succeeded"
    assert [e["tool"] for e in ledger_entries(tmp_path / "stdio-ledger.jsonl")] == ["append_entry"]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_server_newly_claiming_idempotent_cannot_rerun_an_in_doubt_call(
    stdio_ledger: Callable[..., MCPServerStdio], tmp_path: Path
) -> None:
    """``idempotentHint`` is part of the fingerprint: a call in doubt (its dispatched mark
    stored, no result) on a tool the server now calls idempotent is refused as a mismatch,
    not sent again; with the hint the run recorded, the continue meets the in-doubt refusal.
    """
    checkpoints, sessions = create_memory_checkpoint_store(), create_memory_session_store()
    turns = [calls(("c1", "append_entry", {"entry": "one"})), says("Done.")]
    revision = "mcp-idempotent-1"
    async with mcp_tools(stdio_ledger(name="ledger")) as tools:
        result = (
            await agent_on(tools, turns, store=sessions)
            .create_session()
            .run(
                "append",
                run_state=RunStateOptions(checkpoints, revision, interrupt_before_tool=True),
            )
        )
    await rewrite_as_in_doubt(checkpoints, result.run_id)
    ref = {"run_id": result.run_id, "session_id": result.session_id}
    status = await load_agent_run_state(checkpoints, ref)
    assert status is not None
    go_on = {"expected_version": status.version, "decision": "continue"}

    async with mcp_tools(stdio_ledger(name="ledger", variant=3)) as claims_idempotent:
        assert by_name(claims_idempotent)["append_entry"].idempotent
        with pytest.raises(AgentRunStateError) as refused:
            await resume_agent_run(
                agent_on(claims_idempotent, turns, store=sessions),
                ref,
                go_on,
                checkpoints=checkpoints,
                definition_revision=revision,
            )
    assert refused.value.code == "ERR_PRISM_AGENT_RUN_STATE"
    assert "tool 'append_entry' differs" in str(refused.value)

    async with mcp_tools(stdio_ledger(name="ledger")) as same:
        with pytest.raises(AgentRunStateError) as in_doubt:
            await resume_agent_run(
                agent_on(same, turns, store=sessions),
                ref,
                go_on,
                checkpoints=checkpoints,
                definition_revision=revision,
            )
    assert in_doubt.value.code == "ERR_PRISM_TOOL_IN_DOUBT"
    assert ledger_entries(tmp_path / "stdio-ledger.jsonl") == []
