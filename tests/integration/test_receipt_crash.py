"""A SIGKILL inside an allowed call: the continue that settles it records ``in_doubt`` naming
the killed process, and the call that then runs records ``executed`` naming its own (SQLite,
one file, subprocess workers)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import anyio

from prism_core import load_agent_run_state
from prism_store_sql import open_sql_stores

from .test_subagent_crash import Worker

WORKER = Path(__file__).with_name("receipt_worker.py")


class _Worker(Worker):
    """A receipt worker process, once it is ready (``pid``: its process id)."""

    def __init__(self, args: dict[str, Any]) -> None:
        super().__init__(args, WORKER)
        ready = self.next()
        assert ready is not None
        assert ready["ready"] is True
        self.pid = ready["pid"]


def _audit(store: str, run_id: str) -> list[Any]:
    async def read() -> list[Any]:
        async with open_sql_stores(store, table_prefix="receipts") as stores:
            found = await load_agent_run_state(stores.checkpoints, {"run_id": run_id})
            assert found is not None
            return [found.state.status, list(found.audit)]

    return anyio.run(read)


def test_a_sigkill_inside_an_allowed_call_leaves_in_doubt_then_executed(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    started = _Worker({"store": store, "step": "start"}).finish()
    assert started["status"] == "suspended"
    run_id = started["run_id"]

    approving = _Worker({"store": store, "step": "approve", "hang": True})
    line = approving.next()
    assert line == {"in_tool": approving.pid}
    approving.kill()

    refused = _Worker({"store": store, "step": "continue"}).finish()
    assert refused == {"code": "ERR_PRISM_TOOL_IN_DOUBT", "in_doubt": ["r1"]}
    status, audit = _audit(store, run_id)
    assert status == "running"
    assert [r.outcome for r in audit] == ["allow_once"]

    resolution = [{"tool_call_id": "r1", "outcome": "not_started"}]
    last = _Worker({"store": store, "step": "continue", "resolutions": resolution})
    done = last.finish()
    assert done == {"status": "succeeded", "run_id": run_id}
    status, audit = _audit(store, run_id)
    assert status == "succeeded"
    host = socket.gethostname()
    rows = [(r.outcome, r.actor, r.channel) for r in audit]
    assert rows == [
        ("allow_once", "alice", "host"),
        ("in_doubt", f"{host}:{approving.pid}", "worker"),
        ("not_started", "ops", "host"),
        ("executed", f"{host}:{last.pid}", "worker"),
    ]
    assert {r.tool_call_id for r in audit} == {"r1"}
