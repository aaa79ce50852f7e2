"""The agent every face serves in the web tests, and what its tool records.

``billing`` waits before every tool call (its own ``run_state``: ``interrupt_before_tool``,
which each face keeps while hosting it on its stores). Its model answers ``refund ORDER`` with
one ``refund`` call and, after the call's result, ``Done``. Each refund that really runs
appends one JSON line to the effects file: the order, the run's starter
(``ToolExecutionContext.started_by``) and the approvals that let it run
(``ToolExecutionContext.approvals``: actor, channel, outcome), so a test sees who the tool was
told started and approved it, across server processes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from prism_core import (
    ProviderRequest,
    ToolDefinition,
    create_agent,
    provider_done,
    provider_text_delta,
    provider_tool_call,
    tool_call_content,
)

REVISION = "web-tests-1"
AGENT_ID = "billing"
ORDER_SCHEMA = {
    "type": "object",
    "properties": {"order": {"type": "string", "pattern": "^[A-Z]-[0-9a-f]+$"}},
    "required": ["order"],
    "additionalProperties": False,
}


class ScriptedModel:
    """``refund ORDER`` → one ``refund`` call; a tool result → ``Done``."""

    id = "mock"

    async def generate(self, request: ProviderRequest) -> AsyncIterator[Any]:
        last = request.messages[-1]
        if last.role == "tool":
            yield provider_text_delta("Done")
            yield provider_done()
            return
        turn = sum(1 for message in request.messages if message.role == "user")
        words = last.content[0].text.split()  # type: ignore[union-attr]
        if words[:1] == ["refund"] and len(words) == 2:
            call = tool_call_content(f"call-{turn}", "refund", {"order": words[1]})
            yield provider_tool_call(call)
        else:
            yield provider_text_delta("I refund orders: say refund ORDER")
        yield provider_done()


def read_effects(path: Path) -> list[dict[str, Any]]:
    """Every refund that ran, in order."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def billing(effects: Path) -> Any:
    """The ``billing`` agent, recording its refunds in ``effects``."""

    def refund(args: dict[str, Any], context: Any) -> dict[str, Any]:
        line = {
            "order": args["order"],
            "started_by": context.started_by,
            "approvals": [[r.actor, r.channel, r.outcome] for r in context.approvals],
        }
        with effects.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")
        return {"refunded": args["order"]}

    return create_agent(
        id=AGENT_ID,
        model={"provider": "mock", "model": "scripted"},
        provider=ScriptedModel(),
        tools=[
            ToolDefinition("refund", refund, description="Refund an order", parameters=ORDER_SCHEMA)
        ],
        run_state={"interrupt_before_tool": True},
    )
