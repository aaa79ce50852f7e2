"""Canonical JSON, the converter, run-state bounds and the decision caps."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentRunError,
    AgentRunStateError,
    Message,
    TextContent,
    ToolCallContent,
    ToolResultContent,
    Usage,
    codec,
    resume_agent_run,
)
from prism_core.durable._state import MAX_STATE_DEPTH, MAX_STATE_PROPERTIES
from prism_core.durable._state_parse import parse_state
from prism_core.events import MessageFinishedEvent

from .durable_support import World
from .helpers import echo_tool, text_turn, tool_turn


def test_dumps_is_canonical() -> None:
    """Sorted keys, no whitespace, UTF-8, and no NaN."""
    assert codec.dumps({"b": 1, "a": [1, {"d": "é", "c": None}]}) == (
        '{"a":[1,{"c":null,"d":"é"}],"b":1}'.encode()
    )
    with pytest.raises(ValueError):
        codec.dumps({"x": float("nan")})


def test_messages_and_events_round_trip_through_the_converter() -> None:
    """unstructure then structure gives back equal frozen values, union blocks included."""
    message = Message("assistant", (TextContent("hi"), ToolCallContent("c1", "t", {"a": [1]})))
    tool = Message("tool", (ToolResultContent("c1", "t", {"ok": True}),))
    for value, cls in ((message, Message), (tool, Message), (Usage(1, 2, 3), Usage)):
        data = codec.unstructure(value)
        assert codec.loads(codec.dumps(data)) == data
        assert codec.structure(data, cls) == value
    event = MessageFinishedEvent(session_id="s", run_id="r", message=message)
    data = codec.unstructure(event)
    assert data["type"] == "message_finished"
    assert codec.structure(data, MessageFinishedEvent) == event


@pytest.mark.anyio
async def test_load_bounds_refuse_oversized_deep_or_wide_states() -> None:
    """A stored state over the 1 MiB hard cap, deeper than 32 or wider than 256 refuses."""
    world = World()
    agent = world.agent([tool_turn(("c1", "echo", {})), text_turn("x")], tools=[echo_tool()])
    result = await agent.create_session(id="s1").run(
        "go", run_state=world.run_state(interrupt_before_tool=True)
    )
    record = await world.checkpoints.load(AGENT_RUN_NAMESPACE, result.run_id)
    assert record is not None
    base = dict(record.value)
    deep: Any = "leaf"
    for _ in range(MAX_STATE_DEPTH + 1):
        deep = [deep]
    tampered = [
        {**base, "limits": {"pad": "x" * (1024 * 1024)}},
        {**base, "limits": {"deep": deep}},
        {**base, "limits": {f"k{i}": i for i in range(MAX_STATE_PROPERTIES + 1)}},
        {**base, "schema_version": 2},
        {**base, "status": "exploded"},
    ]
    version = record.version
    for value in tampered:
        with pytest.raises(AgentRunStateError):
            parse_state(value, max_bytes=1024 * 1024)
        version += 1
        await world.checkpoints.inner.save(
            AGENT_RUN_NAMESPACE, result.run_id, value, version=version
        )
        with pytest.raises(AgentRunStateError):
            await resume_agent_run(
                world.agent([text_turn("x")], tools=[echo_tool()]),
                {"run_id": result.run_id, "session_id": "s1"},
                {"expected_version": version, "decision": "approve"},
                **world.resume_options(),
            )


@pytest.mark.anyio
async def test_more_than_32_gated_calls_fail_the_run() -> None:
    """A turn asking for more decisions than a suspension may hold fails closed with the
    spec's code and message, "Pending decisions exceed 32 per run"."""
    world = World()
    calls = [(f"c{i}", "echo", {"i": i}) for i in range(33)]
    agent = world.agent(
        [tool_turn(*calls), text_turn("x")], tools=[echo_tool()], limits={"max_tool_calls": 100}
    )
    with pytest.raises(AgentRunError, match="Pending decisions exceed 32 per run") as caught:
        await agent.create_session(id="s1").run(
            "go", run_state=world.run_state(interrupt_before_tool=True)
        )
    assert caught.value.code == "ERR_PRISM_DECISION_LIMIT"
    assert world.checkpoints.saves == 0


@pytest.mark.anyio
async def test_builtin_pack_blocks_with_its_refusal_text_in_a_run() -> None:
    """A host installs prism_packs as a plugin; a session pack blocks a destructive command
    with the pack's model-visible refusal, and the tool never runs."""
    import prism_packs
    from prism_core import ToolDefinition, create_agent, create_mock_provider

    ran: list[str] = []
    shell = ToolDefinition("shell", lambda args, ctx: ran.append(args["command"]) or "ok")
    agent = create_agent(
        model={"provider": "mock", "model": "m"},
        provider=create_mock_provider(
            turns=[
                tool_turn(("c1", "shell", {"command": "rm -rf /srv/data"})),
                tool_turn(("c2", "shell", {"command": "ls -la"})),
                text_turn("done"),
            ]
        ),
        tools=[shell],
        plugins=[prism_packs.plugin],
    )
    session = agent.create_session(guardrail_packs=["destructive-commands"])
    assert session.guardrail_pack_refs[0]["id"] == "destructive-commands"
    sub = session.subscribe()
    await session.run("clean up")
    events = [e async for e in sub]
    blocked = [e for e in events if e.type == "tool_execution_blocked"]
    assert [(b.reason, b.error.message) for b in blocked] == [
        (
            "guardrail_blocked",
            "Blocked by guardrail rule pack:destructive-commands/no-recursive-force-delete: "
            "Recursive force deletes are not allowed",
        )
    ]
    assert "rm -rf" not in blocked[0].error.message
    assert ran == ["ls -la"]


@pytest.mark.anyio
async def test_fork_and_clone_get_their_own_pack_state() -> None:
    """A fork recompiles the session's packs: same refs, independent state."""
    import prism_packs
    from prism_core import create_agent, create_mock_provider

    agent = create_agent(
        model={"provider": "mock", "model": "m"},
        provider=create_mock_provider(text_turn("x")),
        plugins=[prism_packs.plugin],
    )
    session = agent.create_session(guardrail_packs=["validation-respect"])
    fork = session.fork()
    clone = await session.clone(id="copy")
    assert fork.guardrail_pack_refs == clone.guardrail_pack_refs == session.guardrail_pack_refs
    assert session.compiled_packs is not None
    assert fork.compiled_packs is not session.compiled_packs
    assert clone.compiled_packs is not session.compiled_packs


def test_json_size_bound_is_never_below_the_encoded_size() -> None:
    """The cheap bound used before each provider call is always at least the real size."""
    from prism_core import ThinkingContent, ToolResultContent
    from prism_core.codec import json_size_bound

    tricky = 'quote" back\\slash \x00\x1f ctrl é 漢字 😀 \u2028 end'
    values: list[Any] = [
        "",
        tricky,
        Message.user(tricky),
        Message(
            "assistant",
            (
                ThinkingContent(tricky, "sig"),
                TextContent(tricky * 3),
                ToolCallContent("c1", "t", {"a": [1, 2.5, None, True, {"k": tricky}], "b": {}}),
            ),
        ),
        Message("tool", (ToolResultContent("c1", "t", {"nested": [[["x"]]], 1: "int key"}),)),
        Message("tool", (ToolResultContent(tricky, tricky, tricky),)),
        Message("tool", (ToolResultContent("", "", ""),)),
        [Message.user("a"), Message.user(tricky)],
        {"k": [1e300, -0.0, 12345678901234567890]},
    ]
    from prism_core.content import message_size_bound

    for value in values:
        assert json_size_bound(value) >= len(codec.dumps(value)), value
        if isinstance(value, Message):
            assert message_size_bound(value) >= len(codec.dumps(value)), value


def _frozen_reference(value: Any) -> Any:
    """The copy a frozen value makes of its data, checked only by the general rules."""
    if isinstance(value, Mapping):
        return {str(k): _frozen_reference(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_frozen_reference(v) for v in value]
    return value


class _Text(str):
    pass


class _Items(list[Any]):
    pass


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        1.5,
        "text",
        _Text("sub"),
        [1, "a", None, [2, {"k": (3, 4)}]],
        (1, 2),
        _Items([1, (2,)]),
        {"a": 1, 2: "int key", "nested": {"t": (1, {"x": [True]})}},
        OrderedDict(b=[1], a={"c": None}),
        MappingProxyType({"p": (1,)}),
        {1, 2},
    ],
    ids=repr,
)
def test_frozen_data_is_copied_by_the_general_rules(value: Any) -> None:
    """Tool arguments and values are copied exactly as the general rules copy them: the same
    data, the same container types, no container shared with the caller."""
    call = ToolCallContent("c1", "probe", {"value": value})
    result = ToolResultContent("c1", "probe", value)
    expected = _frozen_reference(value)
    assert result.value == expected
    assert type(result.value) is type(expected)
    assert repr(result.value) == repr(expected)
    assert repr(call.arguments) == repr({"value": expected})
    if isinstance(value, list | tuple | Mapping):
        assert result.value is not value
        assert call.arguments["value"] is not value
