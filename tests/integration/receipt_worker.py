"""One worker process of the receipt crash test: starts a refund run that suspends for a
person's approval, or approves it (the refund then runs here), or continues it.

Run as ``python receipt_worker.py '<json args>'`` with ``step`` ``start``, ``approve`` or
``continue``. It prints ``{"ready": true, "pid": ...}`` once its SQLite stores are open,
``{"in_tool": pid}`` when the refund starts (with ``hang``, it then waits to be killed), and,
when it lives to the end, one JSON line: the run's status, or the in-doubt refusal (exit 3).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from prism_core import (
    AGENT_RUN_NAMESPACE,
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
from tests.effect_log import say

REVISION = "receipts-1"
SESSION = "refund-session"


def desk(sessions: Any, hang: bool) -> Any:
    class Provider:
        id = "mock"

        async def generate(self, request: ProviderRequest) -> Any:
            turn = sum(1 for m in request.messages if m.role == "assistant")
            if turn == 0:
                yield provider_tool_call(tool_call_content("r1", "refund", {"amount": 250}))
            else:
                yield provider_text_delta("refund handled")
            yield provider_done()

    def refund(args: dict[str, Any], context: Any) -> Any:
        say({"in_tool": os.getpid()})
        if hang:
            time.sleep(600)
        return {"refunded": args["amount"]}

    return create_agent(
        id="desk",
        model={"provider": "mock", "model": "demo"},
        provider=Provider(),
        tools=[ToolDefinition("refund", refund, needs_approval=True)],
        store=sessions,
    )


async def find_run(checkpoints: Any) -> Any:
    page = await checkpoints.list(AGENT_RUN_NAMESPACE)
    for record in page.records:
        if record.value.get("session_id") == SESSION:
            return record
    return None


async def main(args: dict[str, Any]) -> int:
    async with open_sql_stores(args["store"], table_prefix="receipts") as stores:
        checkpoints, sessions = stores
        agent = desk(sessions, bool(args.get("hang")))
        say({"ready": True, "pid": os.getpid()})
        if args["step"] == "start":
            result = await agent.create_session(id=SESSION).run(
                "refund order 7", run_state=RunStateOptions(checkpoints, REVISION)
            )
            say({"status": result.status, "run_id": result.run_id})
            return 0
        record = await find_run(checkpoints)
        ref = {"run_id": record.key, "session_id": SESSION}
        status = await load_agent_run_state(checkpoints, ref)
        assert status is not None
        resume: dict[str, Any] = {"expected_version": status.version}
        if args["step"] == "approve":
            resume.update(decision="approve", actor="alice")
        else:
            resume["decision"] = "continue"
            if args.get("resolutions"):
                resume.update(resolutions=args["resolutions"], actor="ops")
        try:
            result = await resume_agent_run(
                agent, ref, resume, checkpoints=checkpoints, definition_revision=REVISION
            )
        except AgentRunStateError as exc:
            if exc.code != "ERR_PRISM_TOOL_IN_DOUBT":
                raise
            say({"code": exc.code, "in_doubt": list(exc.in_doubt)})
            return 3
        say({"status": result.status, "run_id": result.run_id})
        return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, json.loads(sys.argv[1])))
