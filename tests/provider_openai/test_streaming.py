"""Streamed Chat Completions through the real SDK: text, tool calls, reasoning, usage, options."""

from __future__ import annotations

import json
from typing import Any

import pytest

from prism_core import ThinkingContent, create_agent
from tests.fake_http import serve

from ._support import (
    ADD_SCHEMA,
    API_KEY,
    MODEL,
    SDK_STREAM_FINALISER,
    add_tool,
    provider_for,
    replay,
    types,
)

pytestmark = [pytest.mark.anyio, SDK_STREAM_FINALISER]


async def test_plain_text_streams_and_the_server_gets_the_request() -> None:
    """Text deltas stream in order; the server receives model, messages, auth and usage opt-in."""
    with serve(replay("plain_text")) as server:
        agent = create_agent(model=MODEL, provider=provider_for(server), instructions="Be brief.")
        session = agent.create_session()
        stream = session.stream("What is the capital of France?")
        events = [event async for event in stream]
    result = stream.result
    assert result is not None
    assert result.status == "succeeded"
    assert result.text == "The capital of France is Paris."
    deltas = [e.delta.text for e in events if e.type == "message_delta"]
    assert deltas == ["The", " capital", " of", " France", " is", " Paris", "."]
    assert result.usage is not None
    assert (result.usage.input_tokens, result.usage.output_tokens) == (24, 8)
    assert result.usage.total_tokens == 32
    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    body = request.json()
    assert body["model"] == "gpt-4.1-mini"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is the capital of France?"},
    ]
    assert "tools" not in body


async def test_parallel_tool_calls_are_assembled_run_and_answered() -> None:
    """Interleaved argument fragments of two calls assemble; both run; results go back."""
    log: list[tuple[str, dict[str, Any]]] = []
    with serve(replay("parallel_tool_calls"), replay("tool_result_answer")) as server:
        agent = create_agent(model=MODEL, provider=provider_for(server), tools=[add_tool(log)])
        result = await agent.create_session().run("What are 2 + 3 and 40 + 2?")
    assert result.status == "succeeded"
    assert result.text == "2 + 3 = 5 and 40 + 2 = 42."
    first, second = "call_Wm1qXh2dSg4PZ8yT0kRbNcJe", "call_7pLfE3vQyK9sBa2nUo5GdTrC"
    assert log == [(first, {"a": 2, "b": 3}), (second, {"a": 40, "b": 2})]
    turn_one, turn_two = (r.json() for r in server.requests)
    assert turn_one["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "add",
                "description": "Add two numbers.",
                "parameters": ADD_SCHEMA,
            },
        }
    ]
    user, assistant, result_one, result_two = turn_two["messages"]
    assert user == {"role": "user", "content": "What are 2 + 3 and 40 + 2?"}
    assert assistant["role"] == "assistant"
    assert assistant["content"] is None
    calls = [(c["id"], c["function"]["name"], c["type"]) for c in assistant["tool_calls"]]
    assert calls == [(first, "add", "function"), (second, "add", "function")]
    assert [json.loads(c["function"]["arguments"]) for c in assistant["tool_calls"]] == [
        {"a": 2, "b": 3},
        {"a": 40, "b": 2},
    ]
    assert result_one == {"role": "tool", "tool_call_id": first, "content": '{"sum": 5}'}
    assert result_two == {"role": "tool", "tool_call_id": second, "content": '{"sum": 42}'}
    assert result.usage is not None
    assert result.usage.input_tokens == 91 + 160
    assert result.usage.cache_read_tokens == 128


async def test_tool_call_fragments_reach_the_event_stream() -> None:
    """Each streamed fragment is a ``tool_call`` delta carrying the call's index."""
    with serve(replay("parallel_tool_calls"), replay("tool_result_answer")) as server:
        agent = create_agent(model=MODEL, provider=provider_for(server), tools=[add_tool()])
        events = [e async for e in agent.create_session().stream("sums")]
    fragments = [
        (e.delta.index, e.delta.arguments_text)
        for e in events
        if e.type == "message_delta" and e.delta.kind == "tool_call"
    ]
    assert [index for index, _ in fragments] == [0, 0, 1, 0, 1, 0, 1]
    joined = {0: "", 1: ""}
    for index, text in fragments:
        joined[index] += text or ""
    assert json.loads(joined[0]) == {"a": 2, "b": 3}
    assert json.loads(joined[1]) == {"a": 40, "b": 2}


async def test_reasoning_content_becomes_thinking_and_is_dropped_by_default() -> None:
    """``reasoning_content`` streams as thinking, is kept in history, and is carried forward
    only when ``preserve_thinking`` is set."""
    with serve(replay("reasoning_content"), replay("plain_text"), replay("plain_text")) as server:
        agent = create_agent(model="openai:deepseek-reasoner", provider=provider_for(server))
        session = agent.create_session()
        events = [e async for e in session.stream("What is 17 * 3?")]
        await session.run("And the capital of France?")
        await session.run("Again?", provider_options={"preserve_thinking": True})
    thinking = [
        e.delta.text for e in events if e.type == "message_delta" and e.delta.kind == "thinking"
    ]
    assert thinking == ["The user asks for 17 * 3.", " 17 * 3 = 51."]
    (finished,) = [e for e in events if e.type == "message_finished"]
    assert finished.message.content[0] == ThinkingContent("The user asks for 17 * 3. 17 * 3 = 51.")
    assert finished.message.text == "17 \u00d7 3 = 51."
    (done,) = [e for e in events if e.type == "agent_finished"]
    usage = done.usage
    assert (usage.input_tokens, usage.cache_read_tokens) == (2006, 1920)
    assert (usage.output_tokens, usage.reasoning_tokens) == (300, 192)
    plain = server.requests[1].json()["messages"][1]
    assert plain == {"role": "assistant", "content": "17 \u00d7 3 = 51."}
    carried = server.requests[2].json()["messages"][1]
    assert carried == {
        "role": "assistant",
        "content": "17 \u00d7 3 = 51.",
        "reasoning_content": "The user asks for 17 * 3. 17 * 3 = 51.",
    }


async def test_thinking_is_carried_when_the_provider_is_built_to_preserve_it() -> None:
    """``create_openai_provider(preserve_thinking=True)`` carries thinking on every turn."""
    with serve(replay("reasoning_content"), replay("plain_text")) as server:
        provider = provider_for(server, preserve_thinking=True)
        session = create_agent(model="openai:deepseek-reasoner", provider=provider).create_session()
        await session.run("What is 17 * 3?")
        await session.run("And the capital of France?")
    carried = server.requests[1].json()["messages"][1]
    assert carried["reasoning_content"] == "The user asks for 17 * 3. 17 * 3 = 51."


async def test_invalid_json_arguments_are_blocked_and_reported_to_the_model() -> None:
    """Truncated arguments never run the tool: the call is blocked as invalid JSON."""
    log: list[tuple[str, dict[str, Any]]] = []
    with serve(replay("invalid_tool_arguments"), replay("plain_text")) as server:
        agent = create_agent(model=MODEL, provider=provider_for(server), tools=[add_tool(log)])
        events = [e async for e in agent.create_session().stream("Add 2 and something")]
    assert log == []
    (blocked,) = [e for e in events if e.type == "tool_execution_blocked"]
    assert blocked.reason == "invalid_json_arguments"
    assert blocked.tool_call_id == "call_Qa8sD2fG4hJ6kL0zX1cV3bNm"
    tool_message = server.requests[1].json()["messages"][2]
    assert tool_message["role"] == "tool"
    assert tool_message["tool_call_id"] == "call_Qa8sD2fG4hJ6kL0zX1cV3bNm"
    assert json.loads(tool_message["content"])["code"] == "invalid_json_arguments"
    assert types(events)[-1] == "agent_finished"


async def test_request_options_pass_through_and_prism_options_stay_home() -> None:
    """Sampling options, ``extra_body`` and headers reach the server; Prism's own keys do not."""
    options = {
        "temperature": 0.2,
        "max_completion_tokens": 64,
        "seed": 7,
        "extra_body": {"top_k": 5},
        "extra_headers": {"x-trace-id": "trace-1"},
        "anthropic_only_hint": True,
    }
    with serve(replay("plain_text")) as server:
        agent = create_agent(model=MODEL, provider=provider_for(server))
        await agent.create_session().run("hi", provider_options=options, thinking_level="low")
    (request,) = server.requests
    body = request.json()
    assert body["temperature"] == 0.2
    assert body["max_completion_tokens"] == 64
    assert body["seed"] == 7
    assert body["top_k"] == 5
    assert body["reasoning_effort"] == "low"
    for prism_key in ("session_id", "cache_key", "thinking_level", "anthropic_only_hint"):
        assert prism_key not in body
    assert request.headers["x-trace-id"] == "trace-1"


async def test_developer_role_for_the_system_prompt() -> None:
    """``system_role="developer"`` sends the system prompt as a developer message."""
    with serve(replay("plain_text")) as server:
        agent = create_agent(
            model=MODEL,
            provider=provider_for(server),
            instructions="Answer in French.",
            provider_options={"system_role": "developer"},
        )
        await agent.create_session().run("hi")
    messages = server.requests[0].json()["messages"]
    assert messages[0] == {"role": "developer", "content": "Answer in French."}


async def test_an_answer_cut_by_the_token_limit_reports_length() -> None:
    """``finish_reason: length`` ends the turn with what arrived and reports ``length`` on
    message_finished; the run ended on its own, so agent_finished and the result carry no
    stop."""
    with serve(replay("length_cut")) as server:
        agent = create_agent(model=MODEL, provider=provider_for(server))
        stream = agent.create_session().stream(
            "Describe Prism.", provider_options={"max_completion_tokens": 8}
        )
        events = [event async for event in stream]
    result = stream.result
    assert result is not None
    assert (result.status, result.text) == (
        "succeeded",
        "Prism's kernel runs provider turns, dispatches",
    )
    assert (result.stop_reason, result.stop_detail) == (None, None)
    (finished,) = [e for e in events if e.type == "message_finished"]
    assert finished.finish_reason == "length"
    assert events[-1].type == "agent_finished"
    assert events[-1].finish_reason is None
    assert result.usage is not None
    assert result.usage.output_tokens == 8
    assert server.requests[0].json()["max_completion_tokens"] == 8


async def test_stop_and_tool_calls_finish_reasons_are_reported() -> None:
    """A tool turn finishes with ``tool_calls``, the answer after it with ``stop``."""
    with serve(replay("parallel_tool_calls"), replay("tool_result_answer")) as server:
        agent = create_agent(model=MODEL, provider=provider_for(server), tools=[add_tool()])
        events = [e async for e in agent.create_session().stream("What are 2 + 3 and 40 + 2?")]
    reasons = [e.finish_reason for e in events if e.type == "message_finished"]
    assert reasons == ["tool_calls", "stop"]
    # A natural end: agent_finished carries no finish reason of its own.
    assert events[-1].finish_reason is None
