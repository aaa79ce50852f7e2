"""Typed output through the official SDK: the schema as a forced tool on the wire, its input
turned back into the answer, validated into ``result.output``."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from prism_core import create_agent
from prism_provider_anthropic import create_anthropic_provider
from tests.fake_http import Reply, serve, sse_frames

from .support import API_KEY, MODEL, weather_tool


@attrs.frozen
class Weather:
    """The weather in one city."""

    city: str
    sky: str


def _frame(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


def message(blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]], stop_reason: str) -> Reply:
    """One streamed message of ``blocks`` (each a content block start and its deltas)."""
    start = {
        "id": "msg_01Typed",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 90, "output_tokens": 1},
    }
    text = _frame("message_start", {"type": "message_start", "message": start})
    for index, (block, deltas) in enumerate(blocks):
        text += _frame(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": block},
        )
        for delta in deltas:
            text += _frame(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        text += _frame("content_block_stop", {"type": "content_block_stop", "index": index})
    text += _frame(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": 20},
        },
    )
    text += _frame("message_stop", {"type": "message_stop"})
    return Reply(chunks=sse_frames(text))


def tool_use(call_id: str, name: str, *parts: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
    return block, [{"type": "input_json_delta", "partial_json": part} for part in parts]


def agent_on(base_url: str, **config: Any) -> Any:
    provider = create_anthropic_provider(
        api_key=API_KEY, base_url=base_url, reuse_connections=False
    )
    return create_agent(model=MODEL, provider=provider, **config)


@pytest.mark.anyio
async def test_the_schema_is_a_forced_tool_whose_input_is_the_output() -> None:
    """Without tools of its own the agent forces the output tool by name; the streamed input
    is the answer: ``result.output`` is the instance and the text is its JSON."""
    reply = message(
        [tool_use("toolu_out", "final_output", '{"city": "Paris", ', '"sky": "sun"}')], "tool_use"
    )
    with serve(reply) as server:
        result = await agent_on(server.base_url, output_type=Weather).create_session().run("Paris?")
    assert result.status == "succeeded"
    assert result.output == Weather("Paris", "sun")
    assert json.loads(result.text) == {"city": "Paris", "sky": "sun"}
    # A natural end: the spec leaves the stop reason and detail to deliberate stops.
    assert (result.stop_reason, result.stop_detail) == (None, None)
    body = server.requests[0].json()
    assert body["tool_choice"] == {"type": "tool", "name": "final_output"}
    [tool] = body["tools"]
    assert tool["name"] == "final_output"
    assert tool["input_schema"] == {
        "type": "object",
        "description": "The weather in one city.",
        "properties": {"city": {"type": "string"}, "sky": {"type": "string"}},
        "required": ["city", "sky"],
        "additionalProperties": False,
    }


@pytest.mark.anyio
async def test_with_tools_the_model_must_call_one_and_answers_through_the_output_tool() -> None:
    """``tool_choice: any``: the real tool runs first, then the output tool answers; an invalid
    answer goes back with its problems before the valid one."""
    log: list[Any] = []
    replies = (
        message([tool_use("toolu_w", "get_weather", '{"city": "Paris"}')], "tool_use"),
        message([tool_use("toolu_o1", "final_output", '{"city": "Paris"}')], "tool_use"),
        message(
            [tool_use("toolu_o2", "final_output", '{"city": "Paris", "sky": "sunny"}')], "tool_use"
        ),
    )
    with serve(*replies) as server:
        agent = agent_on(server.base_url, tools=[weather_tool(log)], output_type=Weather)
        result = await agent.create_session().run("Weather in Paris?")
    assert log == [{"city": "Paris"}]
    assert result.output == Weather("Paris", "sunny")
    bodies = [request.json() for request in server.requests]
    assert [body["tool_choice"] for body in bodies] == [{"type": "any"}] * 3
    assert [t["name"] for t in bodies[0]["tools"]] == ["get_weather", "final_output"]
    retry = bodies[2]["messages"][-1]
    assert retry["role"] == "user"
    texts = [block["text"] for block in retry["content"] if block["type"] == "text"]
    assert any("missing required property 'sky'" in text for text in texts)
    # The earlier answer went back as the assistant's text, not as a tool call.
    answered = bodies[2]["messages"][-2]
    assert answered["role"] == "assistant"
    assert answered["content"] == [{"type": "text", "text": '{"city": "Paris"}'}]


@pytest.mark.anyio
async def test_a_tool_of_the_same_name_moves_the_output_tool_aside() -> None:
    reply = message(
        [tool_use("toolu_out", "final_output_2", '{"city": "Rome", "sky": "sun"}')], "tool_use"
    )
    clash = attrs.evolve(weather_tool([]), name="final_output")
    with serve(reply) as server:
        agent = agent_on(server.base_url, tools=[clash], output_type=Weather)
        result = await agent.create_session().run("Rome?")
    assert result.output == Weather("Rome", "sun")
    assert [t["name"] for t in server.requests[0].json()["tools"]] == [
        "final_output",
        "final_output_2",
    ]


@pytest.mark.anyio
async def test_with_thinking_the_choice_is_auto_and_a_host_tool_choice_wins() -> None:
    answer = message(
        [tool_use("toolu_out", "final_output", '{"city": "Oslo", "sky": "snow"}')], "tool_use"
    )
    with serve(answer, answer) as server:
        thinking = agent_on(server.base_url, output_type=Weather, thinking_level="low")
        await thinking.create_session().run("Oslo?")
        chosen = agent_on(
            server.base_url,
            output_type=Weather,
            provider_options={"tool_choice": {"type": "any"}},
        )
        await chosen.create_session().run("Oslo?")
    first, second = (request.json() for request in server.requests)
    assert first["tool_choice"] == {"type": "auto"}
    assert first["thinking"]["type"] == "enabled"
    assert second["tool_choice"] == {"type": "any"}


@pytest.mark.anyio
async def test_without_output_type_nothing_is_added() -> None:
    reply = message(
        [({"type": "text", "text": ""}, [{"type": "text_delta", "text": "Hi."}])], "end_turn"
    )
    with serve(reply) as server:
        await agent_on(server.base_url).create_session().run("Hello")
    body = server.requests[0].json()
    assert "tools" not in body
    assert "tool_choice" not in body
