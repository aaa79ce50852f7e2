"""The host application the AG-UI tests serve under uvicorn, in a process of its own.

Two agents over one SQLite file (``PRISM_AGUI_TEST_DB``), each behind ``create_agui_app``:

- ``/billing``: every tool call waits for a person (``interrupt_before_tool``). Its model
  answers ``refund A-1 A-2`` with one ``refund`` call per order (after a sentence), and
  ``confirm`` with one ``confirm`` call (an elicitation: a person answers it).
- ``/assistant``: its tools run at once. Its model answers ``hello`` with streamed text,
  ``lookup A-1`` with a ``lookup`` call, ``slow`` with a ``wait`` call that waits a minute,
  ``research A-1`` with a call of its ``researcher`` sub-agent (which looks the order up
  and answers), and ``fail`` with a provider error.

After a tool round either model says ``Done:`` and what each call returned. Every real tool
effect is one JSON line ``[tool, arguments]`` in ``PRISM_AGUI_TEST_EFFECTS/<thread>.jsonl``,
so a test can count what ran on its thread, across server processes.

``x-tenant: T`` is the caller ``{"tenant_id": T}``; without it the caller is unknown (401),
and ``x-tenant: blocked`` is refused (403). ``PRISM_AGUI_TEST_DEFAULT_AUTH=1`` serves with
the default ``authorize`` instead.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Mount

from prism_agui import AccessDenied, create_agui_app
from prism_core import (
    ErrorInfo,
    ProviderRequest,
    ToolDefinition,
    create_agent,
    provider_done,
    provider_error,
    provider_text_delta,
    provider_tool_call,
    provider_tool_call_delta,
    tool_call_content,
)
from prism_store_sql import open_sql_stores

REVISION = "agui-tests-1"
EFFECTS = Path(os.environ["PRISM_AGUI_TEST_EFFECTS"])
DEFAULT_AUTH = os.environ.get("PRISM_AGUI_TEST_DEFAULT_AUTH") == "1"
ORDER_SCHEMA = {
    "type": "object",
    "properties": {"order": {"type": "string", "pattern": "^[A-Z]-[0-9]+$"}},
    "required": ["order"],
    "additionalProperties": False,
}
CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"approved_by": {"type": "string"}},
    "required": ["approved_by"],
}


def _record(context: Any, tool: str, arguments: Any) -> None:
    with (EFFECTS / f"{context.session_id}.jsonl").open("a", encoding="utf-8") as effects:
        effects.write(json.dumps([tool, arguments]) + "\n")


def refund(args: dict[str, Any], context: Any) -> dict[str, Any]:
    """Refund one order (a real effect)."""
    _record(context, "refund", args)
    return {"refunded": args["order"]}


def lookup(args: dict[str, Any], context: Any) -> dict[str, Any]:
    """Look an order up (recorded too: the tests count every call that ran)."""
    _record(context, "lookup", args)
    return {"order": args["order"], "status": "shipped"}


def confirm(args: dict[str, Any], context: Any) -> str:
    """Never runs: a person's answer resolves an elicitation call."""
    _record(context, "confirm", args)
    return "confirmed"


async def wait(args: dict[str, Any], context: Any) -> str:
    """Start, then wait (a minute, or ``seconds``) before finishing: a run the client leaves
    or the server is killed in meanwhile."""
    _record(context, "wait-started", args)
    await anyio.sleep(args.get("seconds", 60))
    _record(context, "wait-finished", args)
    return "waited"


class ScriptedModel:
    """A provider that answers from the conversation: the last user message picks the tool
    calls; tool results get a closing sentence. Call ids are unique per user message."""

    id = "mock"

    async def generate(self, request: ProviderRequest) -> AsyncIterator[Any]:
        last = request.messages[-1]
        if last.role == "tool":
            results = []
            for message in reversed(request.messages):
                if message.role != "tool":
                    break
                results[:0] = message.content
            parts = [
                f"{block.name} -> {json.dumps(block.value) if block.error is None else 'error'}"
                for block in results
            ]
            yield provider_text_delta("Done: ")
            yield provider_text_delta("; ".join(parts))
            yield provider_done()
            return
        turn = sum(1 for message in request.messages if message.role == "user")
        words = last.content[0].text.split()  # type: ignore[union-attr]
        command, rest = words[0], words[1:]
        if command == "hello":
            for piece in ("Hello", ", how can ", "I help?"):
                yield provider_text_delta(piece)
        elif command == "refund":
            yield provider_text_delta("Refunding now.")
            for index, order in enumerate(rest):
                call = tool_call_content(f"call-{turn}-{index}", "refund", {"order": order})
                yield provider_tool_call(call)
        elif command == "confirm":
            yield provider_tool_call(tool_call_content(f"call-{turn}-0", "confirm", {}))
        elif command == "lookup":
            # Streamed in fragments, as a provider streams a call's arguments.
            yield provider_tool_call_delta(0, id=f"call-{turn}-0", name="lookup")
            yield provider_tool_call_delta(0, arguments_text='{"order": ')
            yield provider_tool_call_delta(0, arguments_text=json.dumps(rest[0]) + "}")
        elif command == "research":
            call = tool_call_content(f"call-{turn}-0", "researcher", {"input": f"lookup {rest[0]}"})
            yield provider_tool_call(call)
        elif command == "slow":
            yield provider_tool_call(tool_call_content(f"call-{turn}-0", "wait", {}))
        elif command == "briefly":
            yield provider_tool_call(tool_call_content(f"call-{turn}-0", "wait", {"seconds": 2}))
        elif command == "fail":
            yield provider_error(ErrorInfo("the model is unavailable", code="model_down"))
            return
        yield provider_done()


def authorize(request: Request) -> dict[str, str] | None:
    """``x-tenant: T`` names tenant T; ``blocked`` may not use the agents."""
    tenant = request.headers.get("x-tenant")
    if tenant is None:
        return None
    if tenant == "blocked":
        raise AccessDenied("this caller may not use the agents")
    return {"tenant_id": tenant}


stores = open_sql_stores(os.environ["PRISM_AGUI_TEST_DB"])
checkpoints, sessions = stores

billing = create_agent(
    id="billing",
    model={"provider": "mock", "model": "scripted"},
    provider=ScriptedModel(),
    tools=[
        ToolDefinition("refund", refund, description="Refund an order", parameters=ORDER_SCHEMA),
        ToolDefinition(
            "confirm",
            confirm,
            description="Ask a manager to confirm",
            parameters={"type": "object"},
            elicitation=CONFIRM_SCHEMA,
        ),
    ],
    run_state={"interrupt_before_tool": True},
)
researcher = create_agent(
    id="researcher",
    model={"provider": "mock", "model": "scripted"},
    provider=ScriptedModel(),
    tools=[
        ToolDefinition("lookup", lookup, description="Look an order up", parameters=ORDER_SCHEMA),
    ],
)
assistant = create_agent(
    id="assistant",
    model={"provider": "mock", "model": "scripted"},
    provider=ScriptedModel(),
    tools=[
        ToolDefinition("lookup", lookup, description="Look an order up", parameters=ORDER_SCHEMA),
        ToolDefinition("wait", wait, description="Wait a while", parameters={"type": "object"}),
        researcher.as_tool(),
    ],
)


@asynccontextmanager
async def lifespan(_app: Starlette) -> AsyncIterator[None]:
    """Close the stores when the server stops."""
    try:
        yield
    finally:
        await stores.aclose()


def _served(agent: Any) -> Starlette:
    return create_agui_app(
        agent,
        definition_revision=REVISION,
        checkpoints=checkpoints,
        sessions=sessions,
        authorize=None if DEFAULT_AUTH else authorize,
    )


app = Starlette(
    routes=[Mount("/billing", _served(billing)), Mount("/assistant", _served(assistant))],
    lifespan=lifespan,
)
