"""One worker process of the sub-agent crash test: starts or continues a lead run whose
``researcher`` sub-agent charges three line items; the test SIGKILLs it while the child runs.

Run as ``python subagent_worker.py '<json args>'``. It prints ``{"ready": true}`` once its
SQLite stores are open, ``{"applied": key, "call": id}`` each time the child's tool applies an
effect, and, when it lives to the end, one JSON line: the lead run's final status and text, or
the in-doubt refusal of its continue (exit 3).

EffectLog go to a host-side log keyed on ``context.idempotency_key`` (appended and fsynced), as
a payment system keys its charges. ``kind`` ``reconcile`` gives the tool a ``reconcile`` that
reads that log; ``plain`` gives it none, so a call cut short is in doubt until resolved.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio

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
from prism_store_sql import open_sql_stores

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.effect_log import EffectLog, say

REVISION = "subagent-crash-1"
SESSION = "lead-session"
#: The child's tool turns, one charge each.
CHARGES = 3


def researcher(effects: EffectLog, kind: str, think: float, work: float) -> Any:
    class Provider:
        id = "mock"

        async def generate(self, request: ProviderRequest) -> Any:
            turn = sum(1 for m in request.messages if m.role == "assistant")
            await anyio.sleep(think)
            if turn < CHARGES:
                call = tool_call_content(f"c{turn}", "charge", {"amount": 10 + turn})
                yield provider_tool_call(call)
            else:
                yield provider_text_delta("charged 10, 11 and 12")
            yield provider_done()

    def charge(args: dict[str, Any], context: Any) -> Any:
        value = {"charged": args["amount"]}
        effects.apply(context.idempotency_key, context.tool_call_id, value)
        say({"applied": context.idempotency_key, "call": context.tool_call_id})
        time.sleep(work)
        return value

    def reconcile(call: Any, context: Any) -> Any:
        earlier = effects.applied().get(context.idempotency_key)
        return earlier if earlier is not None else RECONCILE_NOT_STARTED

    tool = ToolDefinition("charge", charge, reconcile=reconcile if kind == "reconcile" else None)
    return create_agent(
        id="researcher",
        model={"provider": "mock", "model": "demo"},
        provider=Provider(),
        tools=[tool],
    )


def lead(sessions: Any, child: Any) -> Any:
    class Provider:
        id = "mock"

        async def generate(self, request: ProviderRequest) -> Any:
            turn = sum(1 for m in request.messages if m.role == "assistant")
            if turn == 0:
                call = tool_call_content("p1", "researcher", {"input": "charge the line items"})
                yield provider_tool_call(call)
            else:
                last = request.messages[-1].content[0]
                yield provider_text_delta(f"researcher said: {last.value}")
            yield provider_done()

    return create_agent(
        id="lead",
        model={"provider": "mock", "model": "demo"},
        provider=Provider(),
        tools=[child.as_tool()],
        store=sessions,
    )


async def find_lead(checkpoints: Any) -> Any:
    cursor = None
    while True:
        page = await checkpoints.list(AGENT_RUN_NAMESPACE, cursor=cursor)
        for record in page.records:
            if record.value.get("session_id") == SESSION:
                return record
        cursor = page.cursor
        if cursor is None:
            return None


async def main(args: dict[str, Any]) -> int:
    effects = EffectLog(args["effects"])
    async with open_sql_stores(args["store"], table_prefix=args["prefix"]) as stores:
        checkpoints, sessions = stores
        child = researcher(effects, args["kind"], args["think"], args["work"])
        agent = lead(sessions, child)
        say({"ready": True})
        record = await find_lead(checkpoints)
        if record is None:
            result = await agent.create_session(id=SESSION).run(
                "charge every line item",
                run_state=RunStateOptions(checkpoints, REVISION, checkpoint_policy="every-turn"),
            )
            say({"status": result.status, "text": result.text, "run_id": result.run_id})
            return 0
        ref = {"run_id": record.key, "session_id": SESSION}
        status = await load_agent_run_state(checkpoints, ref)
        assert status is not None
        if status.state.terminal:
            say({"status": status.state.status, "run_id": record.key})
            return 0
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
        say({"status": result.status, "text": result.text, "run_id": result.run_id})
        return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, json.loads(sys.argv[1])))
