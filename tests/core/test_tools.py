"""Tools: the registry, fail-closed dispatch, validation, errors and progress."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

from prism_core import (
    ErrorInfo,
    PrismError,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    create_tool_registry,
    dispatch_tool_call,
    tool_call_content,
)

from .helpers import echo_tool, scripted_agent, text_turn, tool_turn, types


def ctx(call_id: str = "c1", name: str = "echo") -> ToolExecutionContext:
    """A tool context outside any run."""
    return ToolExecutionContext(session_id="s", run_id="r", tool_call_id=call_id, tool_name=name)


def test_registry_duplicate_policies() -> None:
    """replace keeps the newest, ignore keeps the first, error refuses."""
    first, second = echo_tool("t"), ToolDefinition("t", lambda a, c: 2)
    assert create_tool_registry([first, second]).get("t") is second
    assert create_tool_registry([first, second], duplicate="ignore").get("t") is first
    with pytest.raises(PrismError, match="already registered"):
        create_tool_registry([first, second], duplicate="error")
    with pytest.raises(ValueError, match="duplicate"):
        create_tool_registry(duplicate="sometimes")  # type: ignore[arg-type]


def test_tool_definition_validates_its_fields() -> None:
    """Empty names, non-callables and non-mapping schemas are refused at definition time."""
    with pytest.raises(ValueError, match="name"):
        ToolDefinition("", lambda a, c: 1)
    with pytest.raises(TypeError, match="callable"):
        ToolDefinition("x", "not callable")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="JSON-schema"):
        ToolDefinition("x", lambda a, c: 1, parameters=["nope"])  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_dispatch_runs_sync_and_async_tools_and_wraps_values() -> None:
    """Plain values are wrapped as ToolResult.value; ToolResult returns are kept."""

    async def slow(args: dict[str, Any], context: ToolExecutionContext) -> ToolResult:
        await anyio.lowlevel.checkpoint()
        return ToolResult(context.tool_call_id, "slow", value=args["n"] * 2)

    registry = create_tool_registry([echo_tool(), ToolDefinition("slow", slow)])
    echoed = await dispatch_tool_call(
        tool_call_content("c1", "echo", {"a": 1}), registry=registry, context=ctx()
    )
    assert echoed == ToolResult("c1", "echo", value={"echo": {"a": 1}})
    doubled = await dispatch_tool_call(
        tool_call_content("c2", "slow", {"n": 4}), registry=registry, context=ctx("c2", "slow")
    )
    assert doubled.value == 8


@pytest.mark.anyio
async def test_dispatch_fails_closed_before_side_effects() -> None:
    """Unknown, not-allowed, malformed, schema-invalid and host-rejected calls never execute."""
    ran: list[str] = []

    def execute(args: dict[str, Any], context: Any) -> str:
        ran.append("ran")
        return "ok"

    tool = ToolDefinition(
        "write",
        execute,
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "additionalProperties": False,
        },
    )
    registry = create_tool_registry([tool])

    async def code(call: Any, **kw: Any) -> str | None:
        result = await dispatch_tool_call(call, registry=registry, context=ctx(), **kw)
        assert result.error is not None
        return result.error.code

    assert await code(tool_call_content("c", "nope", {})) == "unknown_tool"
    assert await code(tool_call_content("c", "write", {"path": "a"}), tool_names=[]) == (
        "tool_not_allowed"
    )
    assert await code(tool_call_content("c", "write", {"path": "a"}), invalid_arguments=True) == (
        "invalid_json_arguments"
    )
    assert await code(tool_call_content("c", "write", {})) == "invalid_arguments"
    assert await code(tool_call_content("c", "write", {"path": 1})) == "invalid_arguments"
    assert await code(tool_call_content("c", "write", {"path": "a", "x": 1})) == "invalid_arguments"
    assert (
        await code(
            tool_call_content("c", "write", {"path": "/etc"}),
            validate=lambda call, tool, context: ErrorInfo("outside workspace"),
        )
        == "validation_failed"
    )
    assert ran == []
    ok = await dispatch_tool_call(
        tool_call_content("c", "write", {"path": "a"}),
        registry=registry,
        context=ctx(),
        validate=lambda call, tool, context: None,
    )
    assert ok.value == "ok"
    assert ran == ["ran"]


@pytest.mark.anyio
async def test_tool_exception_becomes_error_result() -> None:
    """A raising tool yields an error result with code tool_execution_error."""

    def boom(args: dict[str, Any], context: Any) -> Any:
        raise RuntimeError("disk full")

    result = await dispatch_tool_call(
        tool_call_content("c1", "boom", {}),
        registry=create_tool_registry([ToolDefinition("boom", boom)]),
        context=ctx(),
    )
    assert result.error == ErrorInfo("disk full", code="tool_execution_error")


@pytest.mark.anyio
async def test_non_json_tool_result_is_refused() -> None:
    """A tool returning something JSON cannot carry gets an error result."""
    result = await dispatch_tool_call(
        tool_call_content("c1", "odd", {}),
        registry=create_tool_registry([ToolDefinition("odd", lambda a, c: {1, 2})]),
        context=ctx(),
    )
    assert result.error is not None
    assert result.error.code == "tool_result_not_json"


@pytest.mark.anyio
async def test_run_dispatches_sequentially_with_events_and_results_next_turn() -> None:
    """Calls of one turn run in order; results reach the next provider turn in order."""
    order: list[str] = []

    async def slow(args: dict[str, Any], context: Any) -> str:
        order.append(f"start {args['n']}")
        await anyio.sleep(0.01)
        order.append(f"end {args['n']}")
        return str(args["n"])

    agent = scripted_agent(
        [tool_turn(("a", "slow", {"n": 1}), ("b", "slow", {"n": 2})), text_turn("ok")],
        tools=[ToolDefinition("slow", slow)],
    )
    events = [e async for e in agent.create_session().stream("go")]
    assert order == ["start 1", "end 1", "start 2", "end 2"]
    assert types(events) == [
        "agent_started",
        "turn_started",
        "message_started",
        "message_finished",
        "tool_execution_started",
        "tool_execution_finished",
        "tool_execution_started",
        "tool_execution_finished",
        "turn_finished",
        "turn_started",
        "message_started",
        "message_delta",
        "message_finished",
        "turn_finished",
        "agent_finished",
    ]
    provider = agent.provider
    second = provider.requests[1].messages  # type: ignore[union-attr]
    assert [m.role for m in second] == ["user", "assistant", "tool", "tool"]
    assert [m.content[0].value for m in second[2:]] == ["1", "2"]  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_tool_exception_in_a_run_emits_error_and_continues() -> None:
    """tool_execution_error plus an error result; the run goes on to the next turn."""

    def boom(args: dict[str, Any], context: Any) -> Any:
        raise ValueError("nope")

    agent = scripted_agent(
        [tool_turn(("c1", "boom", {})), text_turn("handled")], tools=[ToolDefinition("boom", boom)]
    )
    events = [e async for e in agent.create_session().stream("go")]
    kinds = types(events)
    assert kinds.index("tool_execution_error") < kinds.index("tool_execution_finished")
    error = next(e for e in events if e.type == "tool_execution_error")
    assert error.error.message == "nope"
    assert events[-1].type == "agent_finished"


@pytest.mark.anyio
async def test_tool_names_allow_list_per_run() -> None:
    """Omitted: every tool; empty: none offered and calls blocked; a list: only those."""
    log: list[Any] = []
    agent = scripted_agent(
        [tool_turn(("c1", "a", {})), text_turn("x")] * 3,
        tools=[echo_tool("a", log=log), echo_tool("b", log=log)],
    )
    session = agent.create_session()
    await session.run("all")
    assert log == [("a", {})]
    requests = agent.provider.requests  # type: ignore[union-attr]
    assert [t.name for t in requests[0].tools] == ["a", "b"]
    events = [e async for e in session.stream("none", tool_names=[])]
    assert [e.reason for e in events if e.type == "tool_execution_blocked"] == ["tool_not_allowed"]
    assert requests[-1].tools == ()
    await session.run("only b", tool_names=["b"])
    assert [t.name for t in requests[-1].tools] == ["b"]
    assert log == [("a", {})]


@pytest.mark.anyio
async def test_host_validator_blocks_dispatch() -> None:
    """The agent's validate hook sees call, tool and context; a message blocks the call."""
    seen: list[tuple[str, str, str]] = []

    def validate(call: Any, tool: ToolDefinition, context: ToolExecutionContext) -> str | None:
        seen.append((call.name, tool.name, context.tool_call_id))
        return "not today" if call.arguments.get("danger") else None

    log: list[Any] = []
    agent = scripted_agent(
        [tool_turn(("c1", "echo", {"danger": True}), ("c2", "echo", {})), text_turn("x")],
        tools=[echo_tool(log=log)],
        validate=validate,
    )
    events = [e async for e in agent.create_session().stream("go")]
    blocked = [e for e in events if e.type == "tool_execution_blocked"]
    assert [(b.tool_call_id, b.reason, b.error.message) for b in blocked] == [
        ("c1", "validation_failed", "not today")
    ]
    assert seen == [("echo", "echo", "c1"), ("echo", "echo", "c2")]
    assert log == [("echo", {})]


@pytest.mark.anyio
async def test_progress_events_come_between_started_and_finished() -> None:
    """report_progress emits tool_execution_progress for subscribers and the stream."""

    async def work(args: dict[str, Any], context: ToolExecutionContext) -> str:
        context.report_progress({"pct": 50})
        await anyio.lowlevel.checkpoint()
        context.report_progress({"pct": 100})
        return "done"

    agent = scripted_agent(
        [tool_turn(("c1", "work", {})), text_turn("ok")], tools=[ToolDefinition("work", work)]
    )
    session = agent.create_session()
    sub = session.subscribe()
    streamed = [e async for e in session.stream("go")]
    live = [e async for e in sub]
    for events in (streamed, live):
        kinds = [e.type for e in events if e.type.startswith("tool_execution")]
        assert kinds == [
            "tool_execution_started",
            "tool_execution_progress",
            "tool_execution_progress",
            "tool_execution_finished",
        ]
        progress = [e.progress for e in events if e.type == "tool_execution_progress"]
        assert progress == [{"pct": 50}, {"pct": 100}]


@pytest.mark.anyio
async def test_trust_then_permission_block_before_validation() -> None:
    """trust and permission policies refuse a call before schema checks and the side effect."""
    ran: list[str] = []
    registry = create_tool_registry([ToolDefinition("t", lambda a, c: ran.append("t") or 1)])
    call = tool_call_content("c1", "t", {})
    untrusted = await dispatch_tool_call(
        call, registry=registry, context=ctx(), trust=lambda c, t, x: "unsigned tool"
    )
    denied = await dispatch_tool_call(
        call, registry=registry, context=ctx(), permission=lambda c, t, x: ErrorInfo("not yours")
    )
    assert (untrusted.error.code, untrusted.error.message) == ("tool_untrusted", "unsigned tool")  # type: ignore[union-attr]
    assert (denied.error.code, denied.error.message) == ("permission_denied", "not yours")  # type: ignore[union-attr]
    assert ran == []
    ok = await dispatch_tool_call(
        call,
        registry=registry,
        context=ctx(),
        trust=lambda c, t, x: None,
        permission=lambda c, t, x: None,
    )
    assert ok.value == 1
    assert ran == ["t"]
