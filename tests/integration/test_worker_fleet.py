"""Two ``prism worker`` processes on one store, one SIGKILLed inside a tool: no call runs twice.

Six refund runs are suspended, then their approvals are recorded (``decide_agent_run``): no
tool runs where they are decided. Two workers claim them under a 2 s lease. Once the first
worker has applied a refund (its effect is in the ledger) and is still inside that tool, the
test SIGKILLs it. The other worker continues the killed worker's run when its lease lapses:
the call is in doubt, and the tool's ``reconcile`` finds its effect in the ledger by the
call's idempotency key, so it is settled ``completed`` and never run again. Every run ends
``succeeded``; the ledger holds each refund exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from prism_core import (
    RunStateOptions,
    create_agent_run_lifecycle,
    discover_store_plugins,
    list_agent_runs,
    load_agent_run_state,
    open_stores,
)

pytestmark = pytest.mark.long

RUNS = 6

HOST = '''
"""A refund desk whose refunds are recorded in a ledger file, keyed by idempotency key."""

import os
import time
from pathlib import Path

from prism_core import (
    RECONCILE_NOT_STARTED,
    ToolDefinition,
    create_agent,
    provider_done,
    provider_text_delta,
    provider_tool_call,
    tool_call_content,
)

REVISION = "refunds-1"
LEDGER = Path(__file__).with_name("ledger.log")


class Model:
    id = "mock"

    async def generate(self, request):
        if not any(message.role == "assistant" for message in request.messages):
            order = request.messages[-1].text
            yield provider_tool_call(tool_call_content("c1", "refund", {"order": order}))
        else:
            yield provider_text_delta("refunded")
        yield provider_done()


def _applied(key):
    if not LEDGER.exists():
        return False
    return any(line.split()[1] == key for line in LEDGER.read_text().splitlines())


def refund(args, context):
    with LEDGER.open("a") as ledger:
        ledger.write(f"{args['order']} {context.idempotency_key} {os.getpid()}\\n")
    # The effect is applied; the worker is still inside the tool for a while.
    time.sleep(1.5)
    return {"refunded": args["order"]}


def reconcile(call, context):
    return {"refunded": call.arguments["order"]} if _applied(context.idempotency_key) else (
        RECONCILE_NOT_STARTED
    )


def build(store=None):
    return create_agent(
        id="refunds",
        model={"provider": "mock", "model": "demo"},
        provider=Model(),
        tools=[ToolDefinition("refund", refund, reconcile=reconcile, needs_approval=True)],
        store=store,
    )


def resolve_agent(agent_id):
    return (build() if agent_id == "refunds" else None), REVISION
'''


def _host(folder: Path) -> Any:
    import importlib

    name = f"refund_host_{uuid.uuid4().hex[:8]}"
    (folder / f"{name}.py").write_text(HOST)
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(folder))


def _ledger(host: Any) -> list[tuple[str, str, int]]:
    path = Path(host.LEDGER)
    if not path.exists():
        return []
    rows = [line.split() for line in path.read_text().splitlines()]
    return [(order, key, int(pid)) for order, key, pid in rows]


async def _seed_and_decide(url: str, host: Any) -> list[str]:
    async with open_stores(url, plugins=discover_store_plugins(url)) as stores:
        agent = host.build(store=stores.sessions)
        run_ids = []
        for n in range(RUNS):
            result = await agent.create_session(id=f"s{n}").run(
                f"order-{n}",
                run_state=RunStateOptions(
                    stores.checkpoints, host.REVISION, checkpoint_policy="every-turn"
                ),
            )
            assert result.status == "suspended"
            run_ids.append(result.run_id)
        lifecycle = create_agent_run_lifecycle(
            checkpoints=stores.checkpoints,
            resolve_agent=lambda agent_id: (host.build(store=stores.sessions), host.REVISION),
        )
        for run_id in run_ids:
            status = await lifecycle.decide(
                {"run_id": run_id},
                {"expected_version": 2, "decision": "approve", "actor": "ops"},
            )
            assert status.state.status == "running"
        return run_ids


async def _statuses(url: str) -> dict[str, str]:
    async with open_stores(url, plugins=discover_store_plugins(url)) as stores:
        page = await list_agent_runs(stores.checkpoints, limit=100)
        return {summary.run_id: summary.status for summary in page.runs}


def test_two_workers_one_killed_mid_tool_run_every_call_once(tmp_path: Path) -> None:
    host = _host(tmp_path)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    run_ids = anyio.run(_seed_and_decide, url, host)
    assert _ledger(host) == []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    app = f"{host.__name__}:resolve_agent"

    logs: list[Any] = []

    def worker(name: str) -> subprocess.Popen[bytes]:
        log = (tmp_path / f"{name}.log").open("w")
        logs.append(log)
        return subprocess.Popen(
            [
                sys.executable,
                *("-m", "prism_cli", "worker", "--store", url, "--app", app),
                *("--lease-ms", "2000", "--concurrency", "2", "--verbose"),
            ],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    first, second = worker("first"), worker("second")
    try:
        deadline = time.monotonic() + 120
        while not any(pid == first.pid for _, _, pid in _ledger(host)):
            assert time.monotonic() < deadline, "the first worker never applied a refund"
            assert first.poll() is None
            time.sleep(0.02)
        # Inside the tool: its refund is in the ledger, its result is not stored.
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        while set((statuses := anyio.run(_statuses, url)).values()) != {"succeeded"}:
            assert time.monotonic() < deadline, f"runs never all ended: {statuses}"
            assert second.poll() is None, (tmp_path / "second.log").read_text()
            time.sleep(0.1)
    finally:
        for process in (first, second):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        second.wait(timeout=60)
        for log in logs:
            log.close()
    assert sorted(statuses) == sorted(run_ids)
    ledger = _ledger(host)
    keys = [key for _, key, _ in ledger]
    assert sorted(order for order, _, _ in ledger) == sorted(f"order-{n}" for n in range(RUNS))
    assert len(keys) == len(set(keys)) == RUNS
    # The killed worker's calls (up to its concurrency of 2) were settled by their tool's
    # reconcile: one whose refund was in the ledger as completed, never run again.
    settled = anyio.run(_kernel_settlements, url)
    assert 1 <= len(settled) <= 2
    assert ("completed", "prism", "kernel", "reconcile") in settled
    assert {row[1:] for row in settled} == {("prism", "kernel", "reconcile")}
    killed = [order for order, _, pid in ledger if pid == first.pid]
    assert len(killed) == [row[0] for row in settled].count("completed")


async def _kernel_settlements(url: str) -> list[tuple[Any, ...]]:
    async with open_stores(url, plugins=discover_store_plugins(url)) as stores:
        page = await list_agent_runs(stores.checkpoints, limit=100)
        found = []
        for summary in page.runs:
            status = await load_agent_run_state(stores.checkpoints, {"run_id": summary.run_id})
            assert status is not None
            found.extend(
                (r.outcome, r.actor, r.channel, r.reason)
                for r in status.audit
                if r.approval_id is None
            )
        return found
