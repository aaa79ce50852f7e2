"""A worker process of the crash-recovery demo: the scripted investigation, run or continued.

``python -m prism_cli._demo_worker '<json arguments>'`` opens the stores through the one store
plugin that declares the URL's scheme (``prism_core.discover_store_plugins``), then either starts
the run (``"mode": "start"``, every-turn checkpoints) or continues it from its last
checkpoint (``"mode": "continue"``), and prints each event as one JSON line for the
orchestrator (:mod:`prism_cli._demo`). Every tool appends to a side-effect log, so the demo
can count how often each one ran.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio

from prism_core import (
    Agent,
    ProviderEvent,
    ProviderRequest,
    RunStateOptions,
    SessionStore,
    ToolDefinition,
    ToolExecutionContext,
    create_agent,
    load_agent_run_state,
    provider_done,
    provider_text_delta,
    provider_thinking_delta,
    provider_tool_call,
    resume_agent_run_stream,
    tool_call_content,
)

from ._demo_stores import open_demo_stores

__all__ = ("AGENT_ID", "ANSWER", "REVISION", "SESSION_ID", "STEPS", "worker_main")

REVISION = "demo-2026-11-30"
AGENT_ID = "incident-investigator"
SESSION_ID = "incident-4711"
#: The investigation, one tool call per turn: (tool, arguments, what the model thinks).
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


class _ThinkingProvider:
    """Scripted by history, so a continued run picks up at the right step; it 'thinks' for a
    while each turn, which is when the demo kills the worker."""

    id = "mock"

    def __init__(self, think_seconds: float) -> None:
        self.think_seconds = think_seconds

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        turn = sum(1 for m in request.messages if m.role == "assistant")
        await anyio.sleep(self.think_seconds)
        if turn < len(STEPS):
            name, args, thought = STEPS[turn]
            yield provider_thinking_delta(thought)
            yield provider_tool_call(tool_call_content(f"call_{turn + 1}", name, args))
        else:
            yield provider_text_delta(ANSWER)
        yield provider_done({"input_tokens": 150 + 60 * turn, "output_tokens": 25})


def _side_effect(name: str, tool_log: Path) -> Any:
    def execute(args: dict[str, Any], context: ToolExecutionContext) -> Any:
        record = {
            "tool": name,
            "call": context.tool_call_id,
            "pid": os.getpid(),
            "time": time.time(),
        }
        with tool_log.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        return {"tool": name, "ok": True, "args": args}

    return execute


def _agent(session_store: SessionStore, tool_log: Path, think_seconds: float) -> Agent:
    tools = [
        ToolDefinition(name, _side_effect(name, tool_log), description=f"demo tool {name}")
        for name, _, _ in STEPS
    ]
    return create_agent(
        id=AGENT_ID,
        model={"provider": "mock", "model": "demo"},
        provider=_ThinkingProvider(think_seconds),
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
    async with open_demo_stores(args["store"], args["prefix"]) as pair:
        checkpoints, sessions = pair.checkpoints, pair.sessions
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
    """Entry point of a demo worker process (``python -m prism_cli._demo_worker '<json>'``)."""
    args = json.loads(argv[0])
    return anyio.run(_worker, args, backend=args.get("backend", "asyncio"))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m prism_cli._demo_worker '<json arguments>'")
    raise SystemExit(worker_main(sys.argv[1:]))
