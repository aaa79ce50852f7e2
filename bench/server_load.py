"""Load on the approval server: many suspended runs, each approved twice at once.

Seeds ``--runs`` suspended runs (one gated ``refund`` call each) in a SQLite file, serves them
with ``prism_server`` under uvicorn on 127.0.0.1 (a free port), and lets ``--clients``
concurrent HTTP clients send two approvals for every run with the same ``expected_version``.
Checks that every run was decided exactly once (one 200, one 409), that every refund ran
once, and prints the throughput and latency percentiles. Loopback only, bounded by
``--timeout``.

    .venv/bin/python bench/server_load.py [--runs 200] [--clients 20] [--store URL]
"""

from __future__ import annotations

import argparse
import random
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import httpx
import uvicorn

from prism_core import (
    ProviderRequest,
    RunStateOptions,
    ToolDefinition,
    create_agent,
    provider_done,
    provider_text_delta,
    provider_tool_call,
    tool_call_content,
)
from prism_server import create_app
from prism_server._serve import close_on_shutdown
from prism_store_sql import create_sql_checkpoint_store, create_sql_session_store

REVISION = "load-1"


class Host:
    """One agent, ``payer``: its first turn asks to refund the order it was given."""

    def __init__(self) -> None:
        self.refunds: Counter[str] = Counter()
        self._lock = threading.Lock()

    def refund(self, args: dict[str, Any], context: Any) -> dict[str, Any]:
        with self._lock:
            self.refunds[args["order"]] += 1
        return {"refunded": args["order"]}

    def agent(self, store: Any = None) -> Any:
        class Model:
            id = "mock"

            async def generate(self, request: ProviderRequest) -> Any:
                if any(m.role == "assistant" for m in request.messages):
                    yield provider_text_delta("done")
                else:
                    order = request.messages[-1].content[0].text  # type: ignore[union-attr]
                    yield provider_tool_call(tool_call_content("c1", "refund", {"order": order}))
                yield provider_done()

        return create_agent(
            id="payer",
            model={"provider": "mock", "model": "load"},
            provider=Model(),
            tools=[ToolDefinition("refund", self.refund)],
            store=store,
        )

    def resolve_agent(self, agent_id: str) -> tuple[Any, str]:
        return (self.agent() if agent_id == "payer" else None), REVISION


async def seed(url: str, host: Host, runs: int) -> dict[str, int]:
    """``runs`` suspended runs; their ids and versions."""
    checkpoints = create_sql_checkpoint_store(url)
    sessions = create_sql_session_store(url)
    seeded: dict[str, int] = {}
    try:
        agent = host.agent(store=sessions)
        state = RunStateOptions(checkpoints, REVISION, interrupt_before_tool=True)
        for index in range(runs):
            result = await agent.create_session().run(f"O-{index}", run_state=state)
            assert result.status == "suspended"
            seeded[result.run_id] = result.run_state.version
    finally:
        await checkpoints.aclose()
        await sessions.aclose()
    return seeded


def percentile(values: list[float], share: float) -> float:
    """The ``share`` quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


async def approve_all(
    base: str, seeded: dict[str, int], clients: int
) -> list[tuple[str, int, float]]:
    """Two approvals per run, shuffled, sent by ``clients`` concurrent clients."""
    attempts = [run_id for run_id in seeded for _ in range(2)]
    random.Random(7).shuffle(attempts)
    outcomes: list[tuple[str, int, float]] = []
    send, receive = anyio.create_memory_object_stream[str](len(attempts))
    for run_id in attempts:
        send.send_nowait(run_id)
    send.close()

    async def client() -> None:
        async with httpx.AsyncClient(base_url=base, timeout=30) as http, receive.clone() as mine:
            async for run_id in mine:
                body = {"expected_version": seeded[run_id], "decision": "approve"}
                started = time.perf_counter()
                answer = await http.post(f"/api/runs/{run_id}/resume", json=body)
                outcomes.append((run_id, answer.status_code, time.perf_counter() - started))

    async with anyio.create_task_group() as group:
        for _ in range(clients):
            group.start_soon(client)
    receive.close()
    return outcomes


def main(argv: list[str] | None = None) -> int:
    """Run the load test; 0 when every run was decided once and every refund ran once."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--store", metavar="URL", help="a SQL store URL (default: a temp SQLite)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds before giving up")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        url = args.store or f"sqlite:///{Path(folder) / 'load.db'}"
        host = Host()
        seeded = anyio.run(seed, url, host, args.runs)
        checkpoints, sessions = create_sql_checkpoint_store(url), create_sql_session_store(url)
        app = create_app(
            checkpoints=checkpoints, sessions=sessions, resolve_agent=host.resolve_agent
        )
        close_on_shutdown(app, sessions, checkpoints)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        while not server.started:
            if not thread.is_alive():
                raise SystemExit("the server did not start")
            time.sleep(0.02)
        try:
            base = f"http://127.0.0.1:{sock.getsockname()[1]}"
            started = time.perf_counter()

            async def bounded() -> list[tuple[str, int, float]]:
                with anyio.fail_after(args.timeout):
                    return await approve_all(base, seeded, args.clients)

            outcomes = anyio.run(bounded)
            elapsed = time.perf_counter() - started
        finally:
            server.should_exit = True
            thread.join(30)
            sock.close()
    by_run: dict[str, list[int]] = {}
    for run_id, status, _ in outcomes:
        by_run.setdefault(run_id, []).append(status)
    decided_once = all(sorted(codes) == [200, 409] for codes in by_run.values())
    ran_once = len(host.refunds) == args.runs and set(host.refunds.values()) == {1}
    latencies = [seconds * 1000 for _, _, seconds in outcomes]
    print(f"runs {args.runs}, clients {args.clients}, requests {len(outcomes)} in {elapsed:.2f}s")
    rate = len(outcomes) / elapsed
    print(f"throughput {rate:.1f} requests/s, {args.runs / elapsed:.1f} decisions/s")
    print(
        f"latency p50 {statistics.median(latencies):.1f} ms, "
        f"p99 {percentile(latencies, 0.99):.1f} ms, max {max(latencies):.1f} ms"
    )
    print(f"every run decided exactly once (one 200, one 409): {decided_once}")
    print(f"every refund ran exactly once: {ran_once}")
    return 0 if decided_once and ran_once and len(by_run) == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
