"""Providers: event helpers, the mock provider, tool-call assembly and provider resolution."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import (
    AgentRunError,
    ErrorInfo,
    ModelConfig,
    ProviderToolCallDelta,
    ToolCallAssembler,
    Usage,
    create_agent,
    create_mock_provider,
    provider_done,
    provider_error,
    provider_text_delta,
    provider_tool_call_delta,
    provider_usage,
    tool_call_content,
)
from prism_core.hookspecs import hookimpl

from .helpers import MODEL, echo_tool, scripted_agent, text_turn, types


def test_event_helpers_build_normalized_events() -> None:
    """Helpers produce typed events; usage mappings are coerced and totals derived."""
    assert provider_text_delta("hi").type == "text_delta"
    done = provider_done({"input_tokens": 2, "output_tokens": 3})
    assert done.usage == Usage(input_tokens=2, output_tokens=3, total_tokens=5)
    assert provider_usage(Usage(total_tokens=1)).usage.total_tokens == 1
    call = tool_call_content("c1", "echo", {"a": 1})
    assert (call.id, call.name, call.arguments, call.type) == ("c1", "echo", {"a": 1}, "tool_call")


def test_provider_error_redacts_secrets() -> None:
    """provider_error replaces each given secret in the message."""
    event = provider_error(RuntimeError("bad key sk-123 here"), secrets=["sk-123"])
    assert event.error.message == "bad key [REDACTED] here"
    assert provider_error(ErrorInfo("x", code="rate")).error.code == "rate"


def test_assembler_joins_fragments_by_index() -> None:
    """Fragments sharing an index become one call; id and name come from the first carrying them."""
    assembler = ToolCallAssembler()
    assembler.add_delta(ProviderToolCallDelta(0, id="c1", name="echo", arguments_text='{"te'))
    assembler.add_delta(ProviderToolCallDelta(1, id="c2", name="sum", arguments_text='{"a":'))
    assembler.add_delta(ProviderToolCallDelta(0, arguments_text='xt": "hi"}'))
    assembler.add_delta(ProviderToolCallDelta(1, arguments_text="1}"))
    calls = assembler.finish()
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("c1", "echo", {"text": "hi"}),
        ("c2", "sum", {"a": 1}),
    ]
    assert assembler.invalid_ids == set()


def test_assembler_marks_malformed_json_without_raising() -> None:
    """Malformed or non-object argument JSON is kept as an invalid call, never an exception."""
    assembler = ToolCallAssembler()
    assembler.add_delta(ProviderToolCallDelta(0, id="bad", name="echo", arguments_text="{nope"))
    assembler.add_delta(ProviderToolCallDelta(1, id="list", name="echo", arguments_text="[1]"))
    assembler.add_delta(ProviderToolCallDelta(2, id="empty", name="echo"))
    calls = assembler.finish()
    assert [c.arguments for c in calls] == [{}, {}, {}]
    assert assembler.invalid_ids == {"bad", "list"}


@pytest.mark.anyio
async def test_streamed_fragments_are_dispatched_as_complete_calls() -> None:
    """A run reassembles deltas, dispatches the call, and streams the fragments as deltas."""
    log: list[Any] = []
    agent = scripted_agent(
        [
            [
                provider_tool_call_delta(0, id="c1", name="echo"),
                provider_tool_call_delta(0, arguments_text='{"text":'),
                provider_tool_call_delta(0, arguments_text='"hi"}'),
                provider_done(),
            ],
            text_turn("done"),
        ],
        tools=[echo_tool(log=log)],
    )
    events = [e async for e in agent.create_session().stream("go")]
    assert log == [("echo", {"text": "hi"})]
    deltas = [e.delta for e in events if e.type == "message_delta"]
    assert [d.kind for d in deltas] == ["tool_call", "tool_call", "tool_call", "text"]
    finished = next(e for e in events if e.type == "message_finished")
    assert finished.message.tool_calls == (tool_call_content("c1", "echo", {"text": "hi"}),)


@pytest.mark.anyio
async def test_malformed_arguments_block_the_call_and_the_turn_continues() -> None:
    """invalid_json_arguments is a blocked call, not a failed run; the tool never runs."""
    log: list[Any] = []
    agent = scripted_agent(
        [
            [
                provider_tool_call_delta(0, id="c1", name="echo", arguments_text="{oops"),
                provider_done(),
            ],
            text_turn("recovered"),
        ],
        tools=[echo_tool(log=log)],
    )
    session = agent.create_session()
    events = [e async for e in session.stream("go")]
    blocked = [e for e in events if e.type == "tool_execution_blocked"]
    assert [b.reason for b in blocked] == ["invalid_json_arguments"]
    assert log == []
    assert events[-1].type == "agent_finished"
    assert events[-1].text == "recovered"


@pytest.mark.anyio
async def test_mock_provider_replays_and_records_requests() -> None:
    """The mock replays ``events`` on every turn and records each request."""
    provider = create_mock_provider(text_turn("same"))
    agent = create_agent(model=MODEL, provider=provider)
    session = agent.create_session()
    assert (await session.run("one")).text == "same"
    assert (await session.run("two")).text == "same"
    assert len(provider.requests) == 2
    assert [m.text for m in provider.requests[1].messages] == ["one", "same", "two"]


@pytest.mark.anyio
async def test_provider_wins_over_provider_source() -> None:
    """An agent's provider is used even when a provider_source is configured."""
    calls: list[ModelConfig] = []

    def source(model: ModelConfig) -> Any:
        calls.append(model)
        return create_mock_provider(text_turn("from source"))

    agent = create_agent(
        model=MODEL, provider=create_mock_provider(text_turn("direct")), provider_source=source
    )
    assert (await agent.create_session().run("x")).text == "direct"
    assert calls == []


@pytest.mark.anyio
async def test_provider_source_resolves_per_run_and_run_source_wins() -> None:
    """provider_source (sync or async) resolves from the model; the run's source wins."""

    async def agent_source(model: ModelConfig) -> Any:
        return create_mock_provider(text_turn(f"agent:{model.model}"))

    def run_source(model: ModelConfig) -> Any:
        return create_mock_provider(text_turn("run"))

    agent = create_agent(model=MODEL, provider_source=agent_source)
    session = agent.create_session()
    assert (await session.run("x")).text == "agent:demo"
    assert (await session.run("x", provider_source=run_source)).text == "run"


@pytest.mark.anyio
async def test_plugin_provider_resolves_by_model_provider() -> None:
    """A plugin's prism_provider answers when the agent has neither provider nor source."""

    class MockPlugin:
        @hookimpl
        def prism_provider(self, model: ModelConfig) -> Any:
            if model.provider == "mock":
                return create_mock_provider(text_turn("plugin"))
            return None

    agent = create_agent(model=MODEL, plugins=[MockPlugin()])
    assert (await agent.create_session().run("x")).text == "plugin"


@pytest.mark.anyio
async def test_unknown_provider_fails_before_any_provider_call() -> None:
    """No provider: the run emits error and raises, and no source returned a provider."""
    asked: list[str] = []

    def source(model: ModelConfig) -> Any:
        asked.append(model.provider)
        return None

    agent = create_agent(model={"provider": "nope", "model": "m"}, provider_source=source)
    session = agent.create_session()
    sub = session.subscribe()
    with pytest.raises(AgentRunError) as info:
        await session.run("x")
    events = [e async for e in sub]
    assert types(events) == ["agent_started", "error"]
    assert info.value.code == "ERR_PRISM_PROVIDER_NOT_FOUND"
    assert info.value.result.status == "failed"
    assert "nope/m" in str(info.value)
    assert asked == ["nope"]
    assert await session.entries() == []
