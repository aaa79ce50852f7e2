"""The Anthropic provider over the real SDK and a loopback server: streams, tools, thinking,
usage, and what the server receives."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import (
    ModelConfig,
    ProviderDone,
    ProviderRequest,
    ProviderThinkingDelta,
    ProviderToolCallDelta,
    ThinkingContent,
    ToolCallContent,
    Usage,
)
from prism_provider_anthropic import create_anthropic_provider
from tests.fake_http import serve

from .support import API_KEY, agent_for, sent_key, stream_reply, weather_tool


async def collect(provider: Any, request: ProviderRequest) -> list[Any]:
    """Every event of one ``generate`` call."""
    return [event async for event in provider.generate(request)]


@pytest.mark.anyio
async def test_text_stream_and_what_the_server_received() -> None:
    """Text deltas become the reply; the request carries model, system, messages, max_tokens
    and the key, and Prism's own hints (session id, cache key) are not sent."""
    with serve(stream_reply("text")) as server:
        agent = agent_for(server.base_url, instructions="You are terse.")
        session = agent.create_session()
        events = [event async for event in session.stream("Say hello")]
    deltas = [e.delta.text for e in events if e.type == "message_delta"]
    assert deltas == ["Hello", ", world!"]
    finished = events[-1]
    assert finished.type == "agent_finished"
    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/v1/messages")
    assert sent_key(request.headers) == API_KEY
    assert request.headers["anthropic-version"]
    body = request.json()
    assert body["model"] == "claude-sonnet-4-6"
    assert body["stream"] is True
    assert body["max_tokens"] == 8192
    assert body["system"] == "You are terse."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Say hello"}]}
    ]
    assert "tools" not in body
    assert not {"session_id", "cache_key"} & set(body)


@pytest.mark.anyio
async def test_provider_options_pass_through_and_override_max_tokens() -> None:
    """Known Messages-API options are sent as given; max_tokens is overridable."""
    with serve(stream_reply("text")) as server:
        agent = agent_for(
            server.base_url,
            provider_options={"temperature": 0.2, "top_k": 5, "stop_sequences": ["END"]},
        )
        await agent.create_session().run(
            "hi", provider_options={"max_tokens": 256, "openai_only_hint": True}
        )
    body = server.requests[0].json()
    assert (body["temperature"], body["top_k"], body["stop_sequences"]) == (0.2, 5, ["END"])
    assert body["max_tokens"] == 256
    assert "openai_only_hint" not in body


@pytest.mark.anyio
async def test_parallel_tool_use_runs_both_tools_and_sends_results_back() -> None:
    """Two tool_use blocks stream as fragments, are assembled, run, and their results go back
    as tool_result blocks of one user message after the assistant's tool_use blocks."""
    log: list[Any] = []
    with serve(stream_reply("tool_use_parallel"), stream_reply("after_tools")) as server:
        agent = agent_for(server.base_url, tools=[weather_tool(log)])
        result = await agent.create_session().run("Weather in Paris and Tokyo?")
    assert result.status == "succeeded"
    assert result.text == "Paris is sunny; Tokyo is rainy."
    assert log == [{"city": "Paris"}, {"city": "Tokyo"}]
    first, second = (r.json() for r in server.requests)
    assert first["tools"] == [
        {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "input_schema": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        }
    ]
    user, assistant, results = second["messages"]
    assert user["role"] == "user"
    assert assistant == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Checking both cities."},
            {
                "type": "tool_use",
                "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                "name": "get_weather",
                "input": {"city": "Paris"},
            },
            {
                "type": "tool_use",
                "id": "toolu_01WpEhKrEdZQq5jcRRZ9Hm6s",
                "name": "get_weather",
                "input": {"city": "Tokyo"},
            },
        ],
    }
    assert results["role"] == "user"
    assert [(b["type"], b["tool_use_id"]) for b in results["content"]] == [
        ("tool_result", "toolu_01T1x1fJ34qAmk2tNTrN7Up6"),
        ("tool_result", "toolu_01WpEhKrEdZQq5jcRRZ9Hm6s"),
    ]
    assert '"sky": "sunny"' in results["content"][0]["content"]


@pytest.mark.anyio
async def test_tool_fragments_keep_the_block_index_and_the_finish_reason() -> None:
    """Fragments of each tool_use block share its content-block index; tool_use → tool_calls."""
    with serve(stream_reply("tool_use_parallel")) as server:
        provider = create_anthropic_provider(api_key=API_KEY, base_url=server.base_url)
        async with provider:
            events = await collect(
                provider,
                ProviderRequest(
                    model=ModelConfig("anthropic", "claude-sonnet-4-6"),
                    messages=(),
                ),
            )
    fragments = [e for e in events if isinstance(e, ProviderToolCallDelta)]
    assert [(f.index, f.id, f.name, f.arguments_text) for f in fragments] == [
        (1, "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", None),
        (1, None, None, '{"city": "Pa'),
        (1, None, None, 'ris"}'),
        (2, "toolu_01WpEhKrEdZQq5jcRRZ9Hm6s", "get_weather", None),
        (2, None, None, '{"ci'),
        (2, None, None, 'ty": "Tokyo"}'),
    ]
    done = events[-1]
    assert isinstance(done, ProviderDone)
    assert done.finish_reason == "tool_calls"
    assert done.usage == Usage(input_tokens=472, output_tokens=89, total_tokens=561)


@pytest.mark.anyio
async def test_truncated_tool_json_takes_the_invalid_json_path() -> None:
    """A tool_use cut off by max_tokens is not run: dispatch reports invalid_json_arguments
    and the model is told so in an error tool_result."""
    log: list[Any] = []
    with serve(stream_reply("truncated_json"), stream_reply("after_tools")) as server:
        agent = agent_for(server.base_url, tools=[weather_tool(log)])
        events = [e async for e in agent.create_session().stream("Weather?")]
    assert log == []
    assert any(e.type == "agent_finished" for e in events)
    tool_result = server.requests[1].json()["messages"][2]["content"][0]
    assert tool_result["tool_use_id"] == "toolu_01Trunc"
    assert tool_result["is_error"] is True
    assert "not a JSON object" in tool_result["content"]


@pytest.mark.anyio
async def test_thinking_streams_with_its_signature_and_is_sent_back_signed() -> None:
    """thinking_delta text and the signature_delta land on the assistant message; the next
    request carries that thinking block, signature included, ahead of the text."""
    with serve(stream_reply("thinking"), stream_reply("text")) as server:
        agent = agent_for(server.base_url)
        session = agent.create_session()
        events = [e async for e in session.stream("27 * 453?", thinking_level="medium")]
        await session.run("thanks")
    thinking = [e.delta.text for e in events if e.type == "message_delta"]
    assert thinking[:2] == ["27 * 453: 27 * 400 = 10800, ", "27 * 53 = 1431, total 12231."]
    message = next(e.message for e in events if e.type == "message_finished")
    block = message.content[0]
    assert isinstance(block, ThinkingContent)
    assert block.text == "27 * 453: 27 * 400 = 10800, 27 * 53 = 1431, total 12231."
    assert block.signature is not None
    assert block.signature.startswith("EqQBCgIYAhIM")
    first, second = (r.json() for r in server.requests)
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert first["max_tokens"] > 8192
    assert "thinking" not in second
    assistant = second["messages"][1]
    assert assistant["content"] == [
        {"type": "thinking", "thinking": block.text, "signature": block.signature},
        {"type": "text", "text": "27 * 453 = 12231"},
    ]


@pytest.mark.anyio
async def test_signature_arrives_as_a_thinking_event() -> None:
    """The signature_delta is a thinking event with empty text and the signature."""
    with serve(stream_reply("thinking")) as server:
        async with create_anthropic_provider(api_key=API_KEY, base_url=server.base_url) as p:
            events = await collect(
                p, ProviderRequest(model=ModelConfig("anthropic", "claude-sonnet-4-6"), messages=())
            )
    thinking = [e for e in events if isinstance(e, ProviderThinkingDelta)]
    assert [bool(e.text) for e in thinking] == [True, True, False]
    assert thinking[-1].signature is not None


@pytest.mark.anyio
async def test_usage_counts_cache_reads_and_writes() -> None:
    """Cache creation and cache read tokens reach Usage; input_tokens is the whole prompt."""
    with serve(stream_reply("cached")) as server:
        result = await agent_for(server.base_url).create_session().run("Is it in the manual?")
    assert result.usage == Usage(
        input_tokens=12 + 1500 + 3000,
        output_tokens=42,
        total_tokens=4512 + 42,
        cache_read_tokens=3000,
        cache_write_tokens=1500,
    )


@pytest.mark.anyio
async def test_no_arguments_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin answers for provider "anthropic" with a provider configured like the SDK:
    ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL from the environment."""
    from prism_core import create_agent
    from prism_provider_anthropic import plugin

    assert plugin.prism_provider(ModelConfig("openai", "gpt-4.1-mini")) is None
    with serve(stream_reply("text")) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        agent = create_agent(model="anthropic:claude-sonnet-4-6", plugins=[plugin])
        result = await agent.create_session().run("hi")
    assert result.text == "Hello, world!"
    assert sent_key(server.requests[0].headers) == "sk-ant-from-env"


@pytest.mark.anyio
async def test_a_host_client_is_used_without_sdk_retries() -> None:
    """A host-built AsyncAnthropic is used through a copy with max_retries=0, left open."""
    import anthropic

    with serve(stream_reply("text")) as server:
        client = anthropic.AsyncAnthropic(api_key=API_KEY, base_url=server.base_url)
        async with create_anthropic_provider(client=client) as provider:
            assert provider.client.max_retries == 0
            events = await collect(
                provider,
                ProviderRequest(model=ModelConfig("anthropic", "claude-sonnet-4-6"), messages=()),
            )
        assert client.is_closed() is False
        await client.close()
    assert isinstance(events[-1], ProviderDone)
    assert events[-1].finish_reason == "stop"


def test_history_conversion_rules() -> None:
    """Unsigned thinking is dropped; tool messages become user tool_result turns; same-role
    messages merge; system messages join the system prompt."""
    from prism_core import Message, TextContent, ToolResultContent
    from prism_core.content import ErrorInfo
    from prism_provider_anthropic import build_create_params

    history = (
        Message("system", (TextContent("Policy: be kind."),)),
        Message.user("Look it up"),
        Message(
            "assistant",
            (
                ThinkingContent("from another provider"),
                ToolCallContent("c1", "lookup", {"q": "x"}),
            ),
        ),
        Message("tool", (ToolResultContent("c1", "lookup", error=ErrorInfo("not found")),)),
        Message.user("and?"),
    )
    params = build_create_params(
        ProviderRequest(
            model=ModelConfig("anthropic", "claude-sonnet-4-6"),
            messages=history,
            system="Base.",
            options={"anthropic": {"betas_field": 1}, "thinking_level": "off"},
        )
    )
    assert params["system"] == "Base.\n\nPolicy: be kind."
    assert params["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Look it up"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c1", "name": "lookup", "input": {"q": "x"}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "c1",
                    "content": "not found",
                    "is_error": True,
                },
                {"type": "text", "text": "and?"},
            ],
        },
    ]
    assert params["extra_body"] == {"betas_field": 1}
    assert "thinking" not in params


@pytest.mark.anyio
async def test_withheld_thinking_keeps_its_signature_through_a_tool_loop() -> None:
    """Thinking shown as omitted (a signature, no text) before a tool call is carried back,
    signed, ahead of the tool_use block on the next request."""
    log: list[Any] = []
    with serve(stream_reply("thinking_omitted_tool"), stream_reply("after_tools")) as server:
        agent = agent_for(server.base_url, tools=[weather_tool(log)])
        result = await agent.create_session().run(
            "Weather in Paris?",
            provider_options={
                "thinking": {"type": "enabled", "budget_tokens": 2048, "display": "omitted"}
            },
        )
    assert result.status == "succeeded"
    assert log == [{"city": "Paris"}]
    first, second = (r.json() for r in server.requests)
    assert first["thinking"]["display"] == "omitted"
    assert first["max_tokens"] == 2048 + 8192
    assert second["messages"][1]["content"] == [
        {
            "type": "thinking",
            "thinking": "",
            "signature": "ErUBCkYIBxgCKkDomitted0sig+XyZ0ZqRbW2mYv1c9ZtN8sH3Qe7kLpA",
        },
        {
            "type": "tool_use",
            "id": "toolu_01OmitWx",
            "name": "get_weather",
            "input": {"city": "Paris"},
        },
    ]
