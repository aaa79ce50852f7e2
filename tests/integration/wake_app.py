"""The agent of the cross-process wake-up tests, and the process that records a decision.

``build_agent`` is a refund agent whose one tool needs approval and appends the PID of the
process that runs it to a log. Run as
``python wake_app.py '{"store": URL, "prefix": P, "log": PATH, "run_id": R, "version": V}'``
it opens the same stores, approves the run with ``decide_agent_run`` (nothing runs here) and
prints one JSON line: its PID and the run's status as recorded.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from prism_cli._demo_stores import open_demo_stores
from prism_core import (
    ProviderRequest,
    ToolDefinition,
    create_agent,
    decide_agent_run,
    provider_done,
    provider_text_delta,
    provider_tool_call,
    tool_call_content,
)
from tests.store_plugins import STORE_PLUGINS

REVISION = "wake-1"
AGENT_ID = "refunder"


def build_agent(sessions: Any, log: Path) -> Any:
    """A refund agent on ``sessions``: one approved ``refund`` call, then its answer."""

    class Provider:
        id = "mock"

        async def generate(self, request: ProviderRequest) -> Any:
            if any(m.role == "tool" for m in request.messages):
                yield provider_text_delta("refunded")
            else:
                args = {"order": "A-1"}
                yield provider_tool_call(tool_call_content("call-1", "refund", args))
            yield provider_done()

    def refund(args: dict[str, Any], context: Any) -> Any:
        with log.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"pid": os.getpid(), "order": args["order"]}) + "\n")
        return {"refunded": args["order"]}

    tool = ToolDefinition(
        "refund",
        refund,
        parameters={"type": "object", "properties": {"order": {"type": "string"}}},
        needs_approval=True,
    )
    return create_agent(
        id=AGENT_ID,
        model={"provider": "mock", "model": "demo"},
        provider=Provider(),
        tools=[tool],
        store=sessions,
    )


async def decide(args: dict[str, Any]) -> None:
    """Approve the run in this process, as an operator's CLI would."""
    checkpoints, sessions = open_demo_stores(args["store"], args["prefix"], STORE_PLUGINS)
    async with checkpoints, sessions:
        agent = build_agent(sessions, Path(args["log"]))
        status = await decide_agent_run(
            agent,
            {"run_id": args["run_id"]},
            {"expected_version": args["version"], "decision": "approve", "actor": "ana"},
            checkpoints=checkpoints,
            definition_revision=REVISION,
        )
        print(json.dumps({"pid": os.getpid(), "status": status.state.status}), flush=True)


if __name__ == "__main__":
    anyio.run(decide, json.loads(sys.argv[1]))
