"""One worker process of a durable run whose tools come from the ledger MCP server over HTTP.

Run as ``python durable_worker.py '<json args>'``. Without ``run_id`` it starts the run (every
-turn checkpoints on SQLite) and prints ``{"run_id": …}`` once the run has started; with one it
continues that run (``decision: "continue"``, with ``resolutions`` when given) in a fresh
``mcp_tools`` block. It prints ``{"thinking": N}`` when the model starts turn ``think_at`` and
then thinks for ten minutes (the test kills it there), and at the end one JSON line: the final
status and text, or the in-doubt refusal (exit 3) with the call ids.

The model: ``append_entry("one")``, then ``slow_append("two", slow)``, then
``append_entry("three")``, then the answer.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio

from prism_core import (
    AgentRunStateError,
    ProviderRequest,
    RunStateOptions,
    create_agent,
    load_agent_run_state,
    provider_done,
    provider_text_delta,
    provider_tool_call,
    resume_agent_run,
    tool_call_content,
)
from prism_mcp import MCPServerHTTP, mcp_tools
from prism_store_sql import open_sql_stores

REVISION = "mcp-durable-1"
ANSWER = "The ledger has three new entries."


def say(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


class Model:
    """The scripted model, picking its turn from the conversation it is sent."""

    id = "mock"

    def __init__(self, think_at: int | None, slow: float) -> None:
        self.think_at = think_at
        self.script: list[tuple[str, str, dict[str, Any]] | None] = [
            ("c1", "append_entry", {"entry": "one"}),
            ("c2", "slow_append", {"entry": "two", "seconds": slow}),
            ("c3", "append_entry", {"entry": "three"}),
            None,
        ]

    async def generate(self, request: ProviderRequest) -> Any:
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn == self.think_at:
            say({"thinking": turn})
            await anyio.sleep(600)
        step = self.script[min(turn, len(self.script) - 1)]
        if step is None:
            yield provider_text_delta(ANSWER)
        else:
            yield provider_tool_call(tool_call_content(*step))
        yield provider_done()


async def main(args: dict[str, Any]) -> int:
    async with open_sql_stores(args["store"]) as stores:
        checkpoints, sessions = stores
        async with mcp_tools(MCPServerHTTP(args["url"], name="ledger")) as tools:
            agent = create_agent(
                id="ledger-keeper",
                model={"provider": "mock", "model": "demo"},
                provider=Model(args.get("think_at"), args.get("slow", 0.1)),
                tools=tools,
                store=sessions,
            )
            if args.get("run_id") is None:
                stream = agent.create_session(id=args["session"]).stream(
                    "Keep the ledger.",
                    run_state=RunStateOptions(
                        checkpoints, REVISION, checkpoint_policy="every-turn"
                    ),
                )
                async for event in stream:
                    if event.type == "agent_started":
                        say({"run_id": event.run_id})
                result = stream.result()
                assert result is not None
                say({"status": result.status, "text": result.text})
                return 0
            ref = {"run_id": args["run_id"], "session_id": args["session"]}
            status = await load_agent_run_state(checkpoints, ref)
            assert status is not None
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
                say({"code": exc.code, "in_doubt": list(exc.in_doubt)})
                return 3
            say({"status": result.status, "text": result.text})
            return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, json.loads(sys.argv[1])))
