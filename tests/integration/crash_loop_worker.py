"""One crash-loop worker process: starts or continues one durable run; the test kills it.

Run as ``python crash_loop_worker.py '<json args>'``. It prints ``{"ready": true}`` once its
stores are open, then, when it lives to the end, one JSON line: the run's final status, or
the in-doubt refusal (exit 3) with the call ids and the version to resolve at. Before a
continue it reports which calls the record holds in doubt, and which of those never applied
their effect (never started).

Tool effects go to a host-side log keyed on ``context.idempotency_key`` (appended and
fsynced), as a payment system would key its charges: the test counts them.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio

import prism_store_redis
import prism_store_sql
from prism_cli._demo_stores import open_demo_stores
from prism_core import (
    AGENT_RUN_NAMESPACE,
    RECONCILE_NOT_STARTED,
    AgentRunStateError,
    ProviderRequest,
    RunStateOptions,
    ToolDefinition,
    create_agent,
    load_agent_run_state,
    provider_done,
    provider_text_delta,
    provider_tool_call,
    resume_agent_run,
    tool_call_content,
)
from prism_core.durable import in_doubt_calls

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.effect_log import EffectLog, say

# Run as a script, outside the tests package: the stores it needs, not every installed plugin.
STORE_PLUGINS = (prism_store_redis.plugin, prism_store_sql.plugin)
REVISION = "crash-loop-1"
#: Tool turns per run, each with two calls.
TURNS = 3


def build_agent(kind: str, sessions: Any, effects: EffectLog, think: float, work: float) -> Any:
    """An agent whose ``charge`` tool is idempotent, reconcilable or plain (``kind``)."""

    class Provider:
        id = "mock"

        async def generate(self, request: ProviderRequest) -> Any:
            turn = sum(1 for m in request.messages if m.role == "assistant")
            await anyio.sleep(think)
            if turn < TURNS:
                for index in range(2):
                    args = {"amount": 10 * turn + index}
                    yield provider_tool_call(tool_call_content(f"t{turn}c{index}", "charge", args))
            else:
                yield provider_text_delta("all charged")
            yield provider_done()

    def charge(args: dict[str, Any], context: Any) -> Any:
        if kind == "idempotent":
            earlier = effects.applied().get(context.idempotency_key)
            if earlier is not None:
                # The payment system deduplicates on the key: no second charge.
                return earlier
        value = {"charged": args["amount"]}
        effects.apply(context.idempotency_key, context.tool_call_id, value)
        time.sleep(work)
        return value

    def reconcile(call: Any, context: Any) -> Any:
        earlier = effects.applied().get(context.idempotency_key)
        return earlier if earlier is not None else RECONCILE_NOT_STARTED

    tool = ToolDefinition(
        "charge",
        charge,
        idempotent=kind == "idempotent",
        reconcile=reconcile if kind == "reconcile" else None,
    )
    return create_agent(
        id="crash-loop",
        model={"provider": "mock", "model": "demo"},
        provider=Provider(),
        tools=[tool],
        store=sessions,
    )


async def find_run(checkpoints: Any, session: str) -> Any:
    cursor = None
    while True:
        page = await checkpoints.list(AGENT_RUN_NAMESPACE, cursor=cursor)
        for record in page.records:
            if record.value.get("session_id") == session:
                return record
        cursor = page.cursor
        if cursor is None:
            return None


async def main(args: dict[str, Any]) -> int:
    checkpoints, sessions = open_demo_stores(args["store"], args["prefix"], STORE_PLUGINS)
    effects = EffectLog(args["effects"])
    async with checkpoints, sessions:
        agent = build_agent(args["kind"], sessions, effects, args["think"], args["work"])
        say({"ready": True})
        record = await find_run(checkpoints, args["session"])
        if record is None:
            result = await agent.create_session(id=args["session"]).run(
                "charge every line item",
                run_state=RunStateOptions(checkpoints, REVISION, checkpoint_policy="every-turn"),
            )
            say({"status": result.status})
            return 0
        ref = {"run_id": record.key, "session_id": args["session"]}
        status = await load_agent_run_state(checkpoints, ref)
        assert status is not None
        if status.state.terminal:
            say({"status": status.state.status})
            return 0
        doubt = in_doubt_calls(status.state)
        started = _calls(effects)
        say({"in_doubt": list(doubt), "never_started": [c for c in doubt if c not in started]})
        resume: dict[str, Any] = {"expected_version": status.version, "decision": "continue"}
        if args.get("resolutions"):
            resume["resolutions"] = args["resolutions"]
        try:
            result = await resume_agent_run(
                agent, ref, resume, checkpoints=checkpoints, definition_revision=REVISION
            )
        except AgentRunStateError as exc:
            if exc.code != "ERR_PRISM_TOOL_IN_DOUBT":
                raise
            say({"code": exc.code, "in_doubt": list(exc.in_doubt), "run_id": record.key})
            return 3
        say({"status": result.status})
        return 0


def _calls(effects: EffectLog) -> set[str]:
    """The tool call ids whose effect the host applied."""
    if not effects.path.exists():
        return set()
    return {
        json.loads(line)["call"]
        for line in effects.path.read_text(encoding="utf-8").splitlines()
        if line.endswith("}")
    }


if __name__ == "__main__":
    sys.exit(anyio.run(main, json.loads(sys.argv[1])))
