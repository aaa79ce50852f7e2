"""The host application the A2A tests serve: ``uvicorn tests.a2a.app:app`` in a child process.

The ``billing`` agent runs on SQLite stores (``PRISM_A2A_TEST_DB``) and answers from the
conversation it is sent, so a new server process carries on where a killed one stopped:

- ``hello``: a plain answer in two text deltas, no tools;
- ``count``: how many user messages the conversation holds (the context's history);
- ``lookup ORDER``: one ``lookup`` call (ungated), then ``ORDER is open``;
- ``refund ORDER...``: one ``refund`` call of 150 per order in one turn (refunds over 100 wait
  for approval), then ``refunds settled: <results>``;
- ``refund-twice A B``: refund ``A``, then (after its result) refund ``B``, then the answer;
- ``lookup-refund ORDER``: look the order up (ungated), then refund it, then the answer;
- ``slow ORDER``: one ``slow`` call (ungated) that appends ``slow-started ORDER`` to the
  effects file, waits (at most a minute) for the file ``ORDER`` in ``PRISM_A2A_TEST_RELEASE``,
  then applies its effect to the effect log ``PRISM_A2A_TEST_EFFECT_LOG``; then ``ORDER is
  slow``;
- input that is JSON text (a task started with a data part): ``you sent <the input>``.

Every tool that really runs appends a line ``tool ORDER`` to ``PRISM_A2A_TEST_EFFECTS``, so
the tests count real side effects across processes. ``refund`` takes ``{"order": "X-123",
"amount": integer}``.

``PRISM_A2A_TEST_PUSH=off`` serves without push notifications; ``PRISM_A2A_TEST_AUTH=header``
serves with an ``authorize`` that reads the caller's tenant from
``X-Tenant`` (none: 401; ``blocked``: 403); ``PRISM_A2A_TEST_CARD=custom`` serves a card of
the host's own.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill

from prism_a2a import AccessDenied, create_a2a_app
from prism_core import (
    Guardrail,
    ProviderRequest,
    ToolDefinition,
    codec,
    create_agent,
    create_mock_provider,
    provider_done,
    provider_text_delta,
    provider_tool_call,
    tool_call_content,
)
from prism_store_sql import open_sql_stores
from tests.effect_log import EffectLog

from ._support import DESCRIPTION, INSTRUCTIONS

REVISION = "billing-1"
REFUND_SCHEMA = {
    "type": "object",
    "properties": {
        "order": {"type": "string", "pattern": "^[A-Z]-[0-9a-f]+$"},
        "amount": {"type": "integer", "minimum": 1},
    },
    "required": ["order", "amount"],
    "additionalProperties": False,
}
#: Refunds above this amount wait for a person's decision.
APPROVAL_LIMIT = 100
LOOKUP_SCHEMA = {
    "type": "object",
    "properties": {"order": {"type": "string"}},
    "required": ["order"],
    "additionalProperties": False,
}


def _effects() -> Path:
    return Path(os.environ["PRISM_A2A_TEST_EFFECTS"])


def _record(tool: str, order: str) -> None:
    with _effects().open("a", encoding="utf-8") as out:
        out.write(f"{tool} {order}\n")


def refund(args: dict[str, Any], context: Any) -> dict[str, Any]:
    """The gated side effect: refunds one order."""
    _record("refund", args["order"])
    return {"refunded": args["order"], "amount": args["amount"]}


def lookup(args: dict[str, Any], context: Any) -> dict[str, Any]:
    """An ungated read."""
    _record("lookup", args["order"])
    return {"order": args["order"], "state": "open"}


#: Longest a ``slow`` call waits for its release.
SLOW_WAIT_S = 60.0


async def slow(args: dict[str, Any], context: Any) -> dict[str, Any]:
    """A side effect that takes as long as the test wants: it starts, waits to be released,
    then applies its effect (once per call, in the effect log)."""
    _record("slow-started", args["order"])
    release = Path(os.environ["PRISM_A2A_TEST_RELEASE"]) / args["order"]
    deadline = time.monotonic() + SLOW_WAIT_S
    while True:
        if release.exists() or time.monotonic() > deadline:
            break
        await anyio.sleep(0.02)
    log = EffectLog(os.environ["PRISM_A2A_TEST_EFFECT_LOG"])
    log.apply(context.idempotency_key, context.tool_call_id, args["order"])
    return {"order": args["order"], "released": release.exists()}


def _results(messages: Any) -> list[Any]:
    """Each tool result of ``messages``: its value, or ``{"error": message}``."""
    return [
        codec.unstructure(block.value) if block.error is None else {"error": block.error.message}
        for message in messages
        if message.role == "tool"
        for block in message.content
    ]


def _refund(order: str) -> dict[str, Any]:
    return {"order": order, "amount": 150}


def script(request: ProviderRequest) -> list[Any]:
    """The model: the next turn's events, decided from the conversation so far."""
    users = [m for m in request.messages if m.role == "user"]
    said: str = users[-1].content[0].text  # type: ignore[union-attr]
    if said.startswith(("{", "[")):
        return [provider_text_delta(f"you sent {said}"), provider_done()]
    words = said.split()
    command, orders = words[0], words[1:]
    # Only this run's turns: the tool results after the last user message.
    last_user = max(i for i, m in enumerate(request.messages) if m.role == "user")
    results = _results(request.messages[last_user:])
    if command == "hello":
        return [provider_text_delta("hello "), provider_text_delta("back"), provider_done()]
    if command == "count":
        return [provider_text_delta(f"you said {len(users)} things"), provider_done()]
    if command == "slow" and not results:
        return [provider_tool_call(tool_call_content("s1", "slow", {"order": orders[0]}))]
    if command == "slow":
        return [provider_text_delta(f"{orders[0]} is slow"), provider_done()]
    if command == "lookup" and not results:
        return [provider_tool_call(tool_call_content("l1", "lookup", {"order": orders[0]}))]
    if command == "refund" and not results:
        calls = [
            provider_tool_call(tool_call_content(f"r{i}", "refund", _refund(order)))
            for i, order in enumerate(orders, start=1)
        ]
        return [*calls, provider_done()]
    if command == "refund-twice" and len(results) < 2:
        order = orders[len(results)]
        return [provider_tool_call(tool_call_content(f"t{len(results)}", "refund", _refund(order)))]
    if command == "lookup-refund" and len(results) < 2:
        if not results:
            call = tool_call_content("x0", "lookup", {"order": orders[0]})
        else:
            call = tool_call_content("x1", "refund", _refund(orders[0]))
        return [provider_tool_call(call)]
    if command == "lookup":
        return [provider_text_delta(f"{orders[0]} is open"), provider_done()]
    return [provider_text_delta(f"refunds settled: {json.dumps(results)}"), provider_done()]


def approve_refunds(context: Any) -> dict[str, str]:
    """A refund over ``APPROVAL_LIMIT`` waits for a person's decision (an edit to a larger
    amount is refused)."""
    if context.tool_name == "refund" and context.value.arguments["amount"] > APPROVAL_LIMIT:
        return {"action": "interrupt", "reason": "refunds over 100 need approval"}
    return {"action": "allow"}


def build_agent() -> Any:
    """The ``billing`` agent."""
    return create_agent(
        id="billing",
        name="Billing",
        description=DESCRIPTION,
        instructions=INSTRUCTIONS,
        model={"provider": "mock", "model": "demo"},
        provider=create_mock_provider(script),
        tools=[
            ToolDefinition(
                "refund", refund, description="Refund an order", parameters=REFUND_SCHEMA
            ),
            ToolDefinition(
                "lookup", lookup, description="Look an order up", parameters=LOOKUP_SCHEMA
            ),
            ToolDefinition("slow", slow, description="A slow effect", parameters=LOOKUP_SCHEMA),
        ],
        guardrails={"tool_input": [Guardrail("approve-refunds", "tool_input", approve_refunds)]},
    )


def tenant_header(request: Any) -> dict[str, str] | None:
    """The test ``authorize``: ``X-Tenant: t1`` is tenant t1."""
    tenant = request.headers.get("x-tenant")
    if tenant is None:
        return None
    if tenant == "blocked":
        raise AccessDenied("this caller may not use the agent")
    return {"tenant_id": tenant}


CUSTOM_CARD = AgentCard(
    name="Billing desk",
    description="Refunds, with a person approving each one.",
    version="7",
    supported_interfaces=[
        AgentInterface(
            url=os.environ.get("PRISM_A2A_TEST_URL", "http://127.0.0.1:8000/"),
            protocol_binding="JSONRPC",
            protocol_version="1.0",
        )
    ],
    capabilities=AgentCapabilities(streaming=True),
    default_input_modes=["text/plain"],
    default_output_modes=["text/plain"],
    skills=[
        AgentSkill(id="refunds", name="Refunds", description="Refund orders", tags=["billing"])
    ],
)

stores = open_sql_stores(f"sqlite:///{os.environ.get('PRISM_A2A_TEST_DB', 'a2a-test.db')}")
app = create_a2a_app(
    build_agent(),
    definition_revision=REVISION,
    checkpoints=stores.checkpoints,
    sessions=stores.sessions,
    url=os.environ.get("PRISM_A2A_TEST_URL", "http://127.0.0.1:8000/"),
    agent_card=CUSTOM_CARD if os.environ.get("PRISM_A2A_TEST_CARD") == "custom" else None,
    authorize=tenant_header if os.environ.get("PRISM_A2A_TEST_AUTH") == "header" else None,
    push_notifications=os.environ.get("PRISM_A2A_TEST_PUSH") != "off",
)
_serve = app.router.lifespan_context


@asynccontextmanager
async def _lifespan(served: Any) -> AsyncIterator[None]:
    try:
        async with _serve(served):  # the app's workers stop first...
            yield
    finally:
        await stores.aclose()  # ...then the stores they used close


app.router.lifespan_context = _lifespan
