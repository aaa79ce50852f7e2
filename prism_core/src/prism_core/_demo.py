"""The crash-recovery demo: a worker dies mid-run; a fresh process continues the same run.

``prism demo`` starts a worker process that runs a multi-turn investigation with every-turn
checkpoints on the embedded SQLite store (or ``--store URL``), kills it with SIGKILL while
the model is thinking, then starts a fresh process that resumes the same run with
``continue``. The timeline shows that every side-effecting tool ran exactly once.
"""

from __future__ import annotations

import json
import os
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

from .stores import STORE_INSTALL_HINTS

__all__ = ("DemoReport", "run_crash_demo", "run_demo", "worker_main")

REVISION = "demo-2026-11-30"
AGENT_ID = "incident-investigator"
SESSION_ID = "incident-4711"
STEPS: tuple[tuple[str, dict[str, str], str], ...] = (
    (
        "search_logs",
        {"service": "checkout"},
        "Checkout errors spike at 12:01; start with its logs.",
    ),
    (
        "query_metrics",
        {"metric": "payments.latency.p99"},
        "Timeouts at 2.0 s: check payments latency.",
    ),
    ("check_deploys", {"service": "payments"}, "Latency jumped at 11:58: was there a deploy?"),
    (
        "read_config",
        {"path": "payments/client.yaml"},
        "A deploy at 11:57 changed the client config.",
    ),
    ("open_ticket", {"title": "payments client timeout"}, "Found it; record the incident ticket."),
)
ANSWER = (
    "Root cause: the 11:57 payments deploy set the client timeout to 2000 ms with no "
    "retries; p99 latency is 2.3 s, so checkout calls time out. Roll back or raise the timeout."
)


# -- stores ------------------------------------------------------------------------------


def open_stores(url: str, prefix: str) -> tuple[Any, Any]:
    """Checkpoint and session stores for ``url`` (SQLite, PostgreSQL or Redis), isolated by
    ``prefix``; the session store shares the checkpoint store's connection or client, so a
    turn's entries and checkpoint commit together."""
    scheme = url.split(":", 1)[0].split("+", 1)[0]
    if scheme in ("sqlite", "postgresql", "postgres"):
        try:
            from prism_store_sql import create_sql_checkpoint_store, create_sql_session_store
        except ImportError as exc:
            raise SystemExit(
                f"the SQL stores are not installed: {STORE_INSTALL_HINTS[scheme]}"
            ) from exc
        checkpoints = create_sql_checkpoint_store(url, table_prefix=f"{prefix}_")
        return checkpoints, create_sql_session_store(checkpoints)
    if scheme in ("redis", "rediss"):
        try:
            from prism_store_redis import create_redis_checkpoint_store, create_redis_session_store
        except ImportError as exc:
            raise SystemExit(
                f"the Redis stores are not installed: {STORE_INSTALL_HINTS[scheme]}"
            ) from exc
        redis_checkpoints = create_redis_checkpoint_store(url, prefix=prefix)
        return redis_checkpoints, create_redis_session_store(redis_checkpoints)
    raise SystemExit(f"prism demo: unsupported store URL scheme {scheme!r}")


# -- the worker --------------------------------------------------------------------------


def _agent(session_store: Any, tool_log: Path, think_seconds: float) -> Any:
    from .agents import create_agent
    from .content import tool_call_content
    from .providers import (
        ProviderRequest,
        provider_done,
        provider_text_delta,
        provider_thinking_delta,
        provider_tool_call,
    )
    from .tools import ToolDefinition, ToolExecutionContext

    class ThinkingProvider:
        """Scripted by history, so a continued run picks up at the right step; it 'thinks'
        for a while each turn, which is when the demo kills the worker."""

        id = "mock"

        async def generate(self, request: ProviderRequest) -> Any:
            turn = sum(1 for m in request.messages if m.role == "assistant")
            await anyio.sleep(think_seconds)
            if turn < len(STEPS):
                name, args, thought = STEPS[turn]
                yield provider_thinking_delta(thought)
                yield provider_tool_call(tool_call_content(f"call_{turn + 1}", name, args))
            else:
                yield provider_text_delta(ANSWER)
            yield provider_done({"input_tokens": 150 + 60 * turn, "output_tokens": 25})

    def side_effect(name: str) -> Any:
        def execute(args: dict[str, Any], context: ToolExecutionContext) -> Any:
            with tool_log.open("a", encoding="utf-8") as handle:
                handle.write(
                    json.dumps(
                        {
                            "tool": name,
                            "call": context.tool_call_id,
                            "pid": os.getpid(),
                            "time": time.time(),
                        }
                    )
                    + "\n"
                )
                handle.flush()
                os.fsync(handle.fileno())
            return {"tool": name, "ok": True, "args": args}

        return execute

    tools = [
        ToolDefinition(name, side_effect(name), description=f"demo tool {name}")
        for name, _, _ in STEPS
    ]
    return create_agent(
        id=AGENT_ID,
        model={"provider": "mock", "model": "demo"},
        provider=ThinkingProvider(),
        instructions="Investigate production incidents step by step.",
        tools=tools,
        store=session_store,
    )


def _emit(event: Any) -> None:
    detail: dict[str, Any] = {}
    kind = event.type
    if kind == "turn_started":
        detail = {"turn": event.turn}
    elif kind in ("tool_execution_started", "tool_execution_finished"):
        detail = {"name": event.name, "call": event.tool_call_id}
    elif kind == "message_delta" and event.delta.kind == "thinking":
        detail = {"thinking": event.delta.text}
    elif kind == "message_delta" and event.delta.kind == "text":
        detail = {"text": event.delta.text}
    elif kind == "agent_resumed":
        detail = {"version": event.version}
    elif kind == "error":
        detail = {"error": event.error.message}
    elif kind == "message_delta":
        return
    line = {"pid": os.getpid(), "time": time.time(), "type": kind, "run_id": event.run_id, **detail}
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


async def _worker(args: dict[str, Any]) -> int:
    from .durable import RunStateOptions
    from .resume import load_agent_run_state, resume_agent_run_stream

    checkpoints, sessions = open_stores(args["store"], args["prefix"])
    async with checkpoints, sessions:
        agent = _agent(sessions, Path(args["tool_log"]), args["think"])
        if args["mode"] == "start":
            stream: Any = agent.create_session(id=args["session"]).stream(
                "Checkout has been failing since 12:00. Find the root cause.",
                run_state=RunStateOptions(checkpoints, REVISION, checkpoint_policy="every-turn"),
            )
        else:
            ref = {"run_id": args["run_id"], "session_id": args["session"]}
            status = await load_agent_run_state(checkpoints, ref)
            if status is None:
                raise SystemExit("no checkpoint to continue")
            stream = resume_agent_run_stream(
                agent,
                ref,
                {"expected_version": status.version, "decision": "continue"},
                checkpoints=checkpoints,
                definition_revision=REVISION,
            )
        async for event in stream:
            _emit(event)
        result = stream.result
        return 0 if result is not None and result.status == "succeeded" else 1


def worker_main(argv: list[str]) -> int:
    """Entry point of a demo worker process (``python -m prism_core._demo worker …``)."""
    args = json.loads(argv[0])
    return anyio.run(_worker, args, backend=args.get("backend", "asyncio"))


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

    @property
    def each_tool_once(self) -> bool:
        """Whether every step's tool ran exactly once across both processes."""
        counts = Counter(e["call"] for e in self.executions)
        return sorted(counts) == [f"call_{i + 1}" for i in range(len(STEPS))] and all(
            n == 1 for n in counts.values()
        )


def _spawn(args: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "prism_core._demo", "worker", json.dumps(args)],
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
    _cleanup(url, common["prefix"])
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
    )


def asyncio_status_version(url: str, prefix: str, run_id: str, session_id: str) -> int:
    """The version of the run's last checkpoint, read in this (orchestrating) process."""
    from .resume import load_agent_run_state

    async def read() -> int:
        checkpoints, sessions = open_stores(url, prefix)
        async with checkpoints, sessions:
            status = await load_agent_run_state(
                checkpoints, {"run_id": run_id, "session_id": session_id}
            )
            return status.version if status is not None else 0

    return anyio.run(read)


def _cleanup(url: str, prefix: str) -> None:
    """Drop what a demo on a shared server created (SQLite files stay in their folder)."""
    scheme = url.split(":", 1)[0].split("+", 1)[0]

    async def drop_sql() -> None:
        from sqlalchemy import text
        from sqlalchemy.ext.asyncio import create_async_engine

        async_url = url.replace("postgresql://", "postgresql+asyncpg://", 1)
        engine = create_async_engine(async_url)
        try:
            async with engine.begin() as connection:
                rows = await connection.execute(
                    text("SELECT tablename FROM pg_tables WHERE tablename LIKE :p"),
                    {"p": f"{prefix}_%"},
                )
                for (name,) in rows.fetchall():
                    await connection.execute(text(f'DROP TABLE IF EXISTS "{name}" CASCADE'))
        finally:
            await engine.dispose()

    async def drop_redis() -> None:
        import redis.asyncio as redis

        client = redis.from_url(url)
        try:
            async for key in client.scan_iter(match=f"{prefix}:*"):
                await client.delete(key)
        finally:
            await client.aclose()

    if scheme in ("postgresql", "postgres"):
        anyio.run(drop_sql)
    elif scheme in ("redis", "rediss"):
        anyio.run(drop_redis)


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
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "worker":
        raise SystemExit(worker_main(sys.argv[2:]))
    raise SystemExit("usage: python -m prism_core._demo worker '<json arguments>'")
