"""Schemas from someone else cannot reach out or stall: a ``$ref`` is never fetched, and one
validation is bounded (a catastrophic ``pattern`` is refused with ``ERR_PRISM_TOOL_ARGUMENTS``
instead of holding the event loop)."""

from __future__ import annotations

import socket
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from prism_core import ToolDefinition, create_tool_registry, dispatch_tool_call
from prism_core.content import ToolCallContent
from prism_core.schema import ValidationTimeoutError, compile_json_schema
from prism_core.tools import ToolExecutionContext

#: Exponential backtracking for the standard engine: 2**40 paths before it gives up.
CATASTROPHIC = {
    "type": "object",
    "properties": {"name": {"type": "string", "pattern": "^(a|a)*$"}},
}
HOSTILE_VALUE = "a" * 40 + "!"


def test_a_remote_ref_is_never_fetched() -> None:
    """A listener on loopback records any connection: resolving the schema opens none, and
    the reference is reported as unresolvable."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.settimeout(0.2)
        port = listener.getsockname()[1]
        schema = {"type": "object", "properties": {"x": {"$ref": f"http://127.0.0.1:{port}/s"}}}
        problem = compile_json_schema(schema).problem({"x": 1})
        with pytest.raises(TimeoutError):
            listener.accept()
    assert problem == f"$: the schema reference 'http://127.0.0.1:{port}/s' cannot be resolved"


def test_a_catastrophic_pattern_is_cut_off() -> None:
    compiled = compile_json_schema(CATASTROPHIC)
    with pytest.raises(ValidationTimeoutError) as refused:
        compiled.problem({"name": HOSTILE_VALUE})
    assert refused.value.code == "ERR_PRISM_TOOL_ARGUMENTS"
    assert compiled.problem({"name": "aaaa"}) is None
    assert (
        compiled.problem({"name": "b"}) == "$.name: does not match the required pattern (pattern)"
    )


def test_pattern_properties_are_bounded_too() -> None:
    schema = {"type": "object", "patternProperties": {"^(a|a)*$": {"type": "integer"}}}
    with pytest.raises(ValidationTimeoutError):
        compile_json_schema(schema).problems({HOSTILE_VALUE: 1})
    assert compile_json_schema(schema).problems({"aa": "x"}) == ["$.aa: expected integer (type)"]


@pytest.mark.anyio
async def test_the_call_is_refused_and_the_event_loop_keeps_ticking() -> None:
    """Dispatching the call ends with a refusal carrying ``ERR_PRISM_TOOL_ARGUMENTS`` (the
    tool never runs), and a task running beside it ticks again right after."""
    ran: list[Any] = []
    tool = ToolDefinition("greet", lambda args, ctx: ran.append(args), parameters=CATASTROPHIC)
    registry = create_tool_registry([tool])
    context = ToolExecutionContext(session_id="s", run_id="r", tool_call_id="c1", tool_name="greet")
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            group.start_soon(ticker)
            await anyio.lowlevel.checkpoint()
            before = ticks
            result = await dispatch_tool_call(
                ToolCallContent("c1", "greet", {"name": HOSTILE_VALUE}),
                registry=registry,
                context=context,
            )
            while ticks <= before + 1:
                await anyio.lowlevel.checkpoint()
            group.cancel_scope.cancel()
    assert result.error is not None
    assert result.error.code == "ERR_PRISM_TOOL_ARGUMENTS"
    assert "longer than 100 ms" in result.error.message
    assert ran == []
