"""Every gate of a host tool applies to an MCP tool before its call leaves the process.

The ledger server (built with the official SDK, over Streamable HTTP on loopback) logs each
call it receives, so "never reached the server" is checked on the server's side.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from prism_core import (
    Guardrail,
    RunStateOptions,
    create_memory_checkpoint_store,
    create_memory_session_store,
    load_agent_run_state,
    resume_agent_run,
)
from prism_mcp import mcp_tools

from .conftest import HttpLedger
from .support import agent_on, calls, context, of_type, received, says, stream

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """asyncio only: under trio the SDK's Streamable HTTP client leaves its SSE async
    generators to the garbage collector (a ResourceWarning per request)."""
    return "asyncio"


REVISION = "mcp-gates-1"
APPEND = [calls(("c1", "append_entry", {"entry": "invoice-7"})), says("Appended.")]


def _appends(ledger: HttpLedger) -> list[dict[str, Any]]:
    return [entry for entry in ledger.entries() if entry["tool"] == "append_entry"]


async def test_headers_reach_the_server(http_ledger: HttpLedger) -> None:
    """``MCPServerHTTP(headers=...)`` sends them with every request."""
    server = http_ledger.server(headers={"X-Prism-Tenant": "acme"})
    async with mcp_tools(server) as tools:
        (header,) = [t for t in tools if t.name == "request_header"]
        value = await header.execute({"header": "X-Prism-Tenant"}, context("request_header"))
    assert value == "acme"


async def test_each_call_carries_its_idempotency_key(http_ledger: HttpLedger) -> None:
    """The call's ``idempotency_key`` rides the request's ``_meta``, for servers that dedupe."""
    async with mcp_tools(http_ledger.server()) as tools:
        (append,) = [t for t in tools if t.name == "append_entry"]
        call = context("append_entry", call_id="c9", run_id="run-7")
        assert await append.execute({"entry": "a"}, call) == "appended a"
    assert [e["key"] for e in _appends(http_ledger)] == [call.idempotency_key]


async def test_arguments_failing_the_schema_never_reach_the_server(
    http_ledger: HttpLedger,
) -> None:
    """The server's ``inputSchema`` is checked in the process: a bad call is blocked."""
    turns = [calls(("c1", "append_entry", {"entry": 7})), says("It was refused.")]
    async with mcp_tools(http_ledger.server()) as tools:
        events = await stream(agent_on(tools, turns).create_session(), "append")
    (blocked,) = of_type(events, "tool_execution_blocked")
    assert blocked.reason == "invalid_arguments"
    assert events[-1].type == "agent_finished"
    assert http_ledger.entries() == []


async def test_a_guardrail_block_never_reaches_the_server(http_ledger: HttpLedger) -> None:
    """A tool-input guardrail that blocks: the call is refused before it is sent."""
    guard = Guardrail("no-ledger", "tool_input", lambda ctx: {"action": "block", "reason": "no"})
    async with mcp_tools(http_ledger.server()) as tools:
        agent = agent_on(tools, APPEND, guardrails={"tool_input": [guard]})
        events = await stream(agent.create_session(), "append")
    (blocked,) = of_type(events, "tool_execution_blocked")
    assert blocked.reason == "guardrail_blocked"
    assert http_ledger.entries() == []


async def test_interrupt_before_tool_holds_the_call_until_approved(
    http_ledger: HttpLedger,
) -> None:
    """A durable run suspends before the MCP call; the server sees it only after the
    approval, once, with the key of that call of that run."""
    checkpoints, sessions = create_memory_checkpoint_store(), create_memory_session_store()
    async with mcp_tools(http_ledger.server()) as tools:
        agent = agent_on(tools, APPEND, store=sessions)
        result = await agent.create_session().run(
            "append",
            run_state=RunStateOptions(checkpoints, REVISION, interrupt_before_tool=True),
        )
        assert result.status == "suspended"
        (pending,) = result.interruption.pending_decisions
        assert (pending.kind, pending.scope.tool_name) == ("tool_approval", "append_entry")
        assert http_ledger.entries() == []
        resumed = await resume_agent_run(
            agent,
            {"run_id": result.run_id, "session_id": result.session_id},
            {"expected_version": result.run_state.version, "decision": "approve"},
            checkpoints=checkpoints,
            definition_revision=REVISION,
        )
    assert (resumed.status, resumed.text) == ("succeeded", "Appended.")
    expected = context("append_entry", call_id="c1", run_id=result.run_id).idempotency_key
    assert [(e["entry"], e["key"]) for e in _appends(http_ledger)] == [("invoice-7", expected)]


async def test_a_pack_ask_rule_holds_the_call_and_a_denial_never_sends_it(
    http_ledger: HttpLedger,
) -> None:
    """A guardrail pack's ``ask`` rule gates the MCP tool; denying ends the run unsent."""
    checkpoints, sessions = create_memory_checkpoint_store(), create_memory_session_store()
    rule = {"id": "ask-append", "tool": "append_entry", "pattern": ".", "action": "ask"}
    async with mcp_tools(http_ledger.server()) as tools:
        agent = agent_on(tools, APPEND, store=sessions)
        session = agent.create_session(guardrail_packs=[{"id": "ledger", "rules": [rule]}])
        result = await session.run("append", run_state=RunStateOptions(checkpoints, REVISION))
        assert result.status == "suspended"
        (pending,) = result.interruption.pending_decisions
        assert pending.guardrail == "pack:ledger/ask-append"
        denied = await resume_agent_run(
            agent,
            {"run_id": result.run_id, "session_id": result.session_id},
            {"expected_version": result.run_state.version, "decision": "deny"},
            checkpoints=checkpoints,
            definition_revision=REVISION,
        )
    assert denied.status == "denied"
    assert http_ledger.entries() == []


async def test_a_side_effect_is_marked_dispatched_before_the_server_sees_it(
    http_ledger: HttpLedger,
) -> None:
    """While the server holds each call, the run's record already says so for the side
    effect (``dispatched``, in doubt should the worker die) and not for the read-only call."""
    checkpoints, sessions = create_memory_checkpoint_store(), create_memory_session_store()
    turns = [
        calls(("c1", "slow_count", {"seconds": 1})),
        calls(("c2", "slow_append", {"entry": "e", "seconds": 1})),
        says("Counted and appended."),
    ]
    seen: dict[str, dict[str, str]] = {}

    async def record_while_held(ref: dict[str, str]) -> None:
        for tool, call_id in (("slow_count", "c1"), ("slow_append", "c2")):
            await received(http_ledger.entries, tool)
            status = await load_agent_run_state(checkpoints, ref)
            assert status is not None
            seen[call_id] = {c.tool_call_id: c.status for c in status.state.pending_calls}

    async with mcp_tools(http_ledger.server()) as tools:
        session = agent_on(tools, turns, store=sessions).create_session(id="held")
        policy = RunStateOptions(checkpoints, REVISION, checkpoint_policy="every-turn")
        async with anyio.create_task_group() as group:
            run = session.stream("count, then append", run_state=policy)
            events = []
            async for event in run:
                events.append(event)
                if event.type == "agent_started":
                    group.start_soon(
                        record_while_held, {"run_id": event.run_id, "session_id": "held"}
                    )
    assert events[-1].type == "agent_finished"
    assert "c1" not in seen["c1"]
    assert seen["c2"] == {"c2": "dispatched"}
