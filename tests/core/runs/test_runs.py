"""Runs: event order, results, limits, prompts, metadata, redaction, policies, middleware, retry."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

from prism_core import (
    AgentRunError,
    ErrorInfo,
    InvalidOptionsError,
    Message,
    ProviderRequest,
    TextContent,
    ThinkingContent,
    ToolDefinition,
    create_agent,
    create_mock_provider,
    create_secret_redactor,
    provider_done,
    provider_error,
    provider_text_delta,
    provider_thinking_delta,
)

from ..helpers import MODEL, echo_tool, scripted_agent, text_turn, tool_turn, types

TEXT_ORDER = [
    "agent_started",
    "turn_started",
    "message_started",
    "message_delta",
    "message_finished",
    "turn_finished",
    "agent_finished",
]


@pytest.mark.anyio
async def test_text_turn_event_order_and_result() -> None:
    """A text-only turn emits the spec's seven events; the result carries text, usage and leaf."""
    agent = scripted_agent([text_turn("Hello", input_tokens=3, output_tokens=2)])
    session = agent.create_session(id="s1")
    sub = session.subscribe()
    result = await session.run("Hi")
    events = [e async for e in sub]
    assert types(events) == TEXT_ORDER
    assert {e.session_id for e in events} == {"s1"}
    assert {e.run_id for e in events} == {result.run_id}
    assert result.status == "succeeded"
    assert result.text == "Hello"
    assert result.content == (TextContent("Hello"),)
    assert result.message == Message("assistant", (TextContent("Hello"),))
    assert result.usage is not None
    assert result.usage.total_tokens == 5
    entries = await session.entries()
    assert result.leaf_id == entries[-1].id
    assert [e.message.role for e in entries if e.message] == ["user", "assistant"]


@pytest.mark.anyio
async def test_tool_turn_transcript_has_final_calls_not_deltas() -> None:
    """The store holds the assistant tool_call then the tool result, then the final answer."""
    agent = scripted_agent(
        [tool_turn(("c1", "echo", {"x": 1})), text_turn("done")], tools=[echo_tool()]
    )
    session = agent.create_session()
    await session.run("go")
    entries = await session.entries()
    roles = [e.message.role for e in entries if e.message]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert entries[1].message is not None
    assert entries[1].message.tool_calls[0].arguments == {"x": 1}
    assert entries[2].message is not None
    assert entries[2].message.content[0].type == "tool_result"


@pytest.mark.anyio
async def test_failed_run_raises_agent_run_error_with_result() -> None:
    """A provider error ends the run failed: error event, then AgentRunError with .result."""
    agent = scripted_agent([[provider_error(ErrorInfo("overloaded", code="busy"))]])
    session = agent.create_session()
    sub = session.subscribe()
    with pytest.raises(AgentRunError) as info:
        await session.run("x")
    events = [e async for e in sub]
    assert types(events)[-1] == "error"
    assert events[-1].error.message == "overloaded"
    assert info.value.result.status == "failed"
    assert info.value.result.error == ErrorInfo("overloaded", code="busy")
    assert info.value.code == "busy"


@pytest.mark.anyio
async def test_provider_exception_is_a_failed_run_not_a_crash() -> None:
    """A provider that raises mid-stream fails the run with the redacted message."""

    class Broken:
        id = "broken"

        async def generate(self, request: ProviderRequest) -> Any:
            yield provider_text_delta("partial")
            raise ConnectionError("socket closed")

    session = create_agent(model=MODEL, provider=Broken()).create_session()
    with pytest.raises(AgentRunError, match="socket closed") as info:
        await session.run("x")
    assert info.value.result.status == "failed"


@pytest.mark.anyio
async def test_invalid_run_options_fail_before_any_provider_work() -> None:
    """Unknown keys and malformed values raise InvalidOptionsError and call no provider."""
    provider = create_mock_provider(text_turn("x"))
    session = create_agent(model=MODEL, provider=provider).create_session()
    bad: list[dict[str, Any]] = [
        {"tool_nmes": []},
        {"tool_names": "echo"},
        {"limits": {"max_turns": -1}},
        {"limits": {"max_tokens": 1}},
        {"model": {"provider": "mock"}},
        {"metadata": ["x"]},
        {"retry": {"max_attempts": 0}},
        {"guardrails": {"inputs": []}},
        {"loop": "nope"},
    ]
    for options in bad:
        with pytest.raises((InvalidOptionsError, TypeError, ValueError)):
            await session.run("x", **options)
    with pytest.raises(InvalidOptionsError):
        await session.run(42)
    assert provider.requests == []
    assert not session.running
    assert (await session.run("fine")).status == "succeeded"


@pytest.mark.anyio
async def test_second_concurrent_run_is_rejected_not_queued() -> None:
    """While a run is active another run fails at once with ERR_PRISM_RUN_ACTIVE."""
    release = anyio.Event()

    async def wait(args: dict[str, Any], context: Any) -> str:
        await release.wait()
        return "ok"

    agent = scripted_agent(
        [tool_turn(("c1", "wait", {})), text_turn("done")], tools=[ToolDefinition("wait", wait)]
    )
    session = agent.create_session()
    outcome: dict[str, Any] = {}

    async def first() -> None:
        outcome["first"] = await session.run("one")

    async with anyio.create_task_group() as group:
        group.start_soon(first)
        while not session.running:
            await anyio.lowlevel.checkpoint()
        await anyio.sleep(0.01)
        with pytest.raises(AgentRunError) as info:
            await session.run("two")
        assert info.value.code == "ERR_PRISM_RUN_ACTIVE"
        release.set()
    assert outcome["first"].status == "succeeded"
    assert len(agent.provider.requests) == 2  # type: ignore[union-attr]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("limits", "axis"),
    [
        ({"max_turns": 1}, "max_turns"),
        ({"max_tool_rounds": 0}, "max_tool_rounds"),
        ({"max_tool_calls": 1}, "max_tool_calls"),
        ({"max_provider_attempts": 1}, "max_turns_or_attempts"),
        ({"max_total_tokens": 5}, "max_total_tokens"),
        ({"max_input_tokens": 3}, "max_input_tokens"),
        ({"max_output_tokens": 3}, "max_output_tokens"),
        ({"max_cost": 0.01}, "max_cost"),
        ({"max_request_bytes": 10}, "max_request_bytes"),
        ({"max_response_bytes": 3}, "max_response_bytes"),
    ],
)
async def test_each_limit_axis_breaches_once_with_the_limit(
    limits: dict[str, Any], axis: str
) -> None:
    """Crossing an axis emits one run_limit_exceeded, then budget_exhausted naming the axis,
    then error, and raises AgentRunError carrying it."""
    from prism_core import provider_tool_call, tool_call_content

    turn = [
        provider_text_delta("thinking it over"),
        provider_tool_call(tool_call_content("a", "echo", {})),
        provider_tool_call(tool_call_content("b", "echo", {})),
        provider_done({"input_tokens": 4, "output_tokens": 4, "cost": 0.02}),
    ]
    agent = scripted_agent([turn], tools=[echo_tool()])
    session = agent.create_session()
    sub = session.subscribe()
    with pytest.raises(AgentRunError) as info:
        await session.run("go", limits=limits)
    events = [e async for e in sub]
    breaches = [e for e in events if e.type == "run_limit_exceeded"]
    assert len(breaches) == 1
    expected = {"max_turns", "max_provider_attempts"} if axis == "max_turns_or_attempts" else {axis}
    assert breaches[0].limit.axis in expected
    assert info.value.result.limit == breaches[0].limit
    assert info.value.code == "ERR_PRISM_RUN_LIMIT"
    assert types(events)[-3:] == ["run_limit_exceeded", "budget_exhausted", "error"]
    assert events[-2].limit == breaches[0].limit.axis


@pytest.mark.anyio
async def test_wall_time_limit_cancels_the_step_in_flight() -> None:
    """max_wall_time_ms cancels a slow tool and fails the run with the wall-time axis."""
    cancelled: list[bool] = []

    async def slow(args: dict[str, Any], context: Any) -> str:
        try:
            await anyio.sleep(5)
        except anyio.get_cancelled_exc_class():
            cancelled.append(True)
            raise
        return "late"

    agent = scripted_agent(
        [tool_turn(("c1", "slow", {})), text_turn("x")], tools=[ToolDefinition("slow", slow)]
    )
    with anyio.fail_after(3):
        with pytest.raises(AgentRunError) as info:
            await agent.create_session().run("go", limits={"max_wall_time_ms": 50})
    assert info.value.result.limit is not None
    assert info.value.result.limit.axis == "max_wall_time_ms"
    assert cancelled == [True]


@pytest.mark.anyio
async def test_run_limits_only_narrow_and_none_disables_an_axis() -> None:
    """A run cannot widen an agent ceiling; None leaves the agent's ceiling in force."""
    agent = scripted_agent(
        [tool_turn(("c1", "echo", {}))] * 5, tools=[echo_tool()], limits={"max_turns": 2}
    )
    session = agent.create_session()
    for run_limits in ({"max_turns": 10}, {"max_turns": None}, None):
        with pytest.raises(AgentRunError) as info:
            await session.run("go", limits=run_limits)
        assert info.value.result.limit is not None
        assert info.value.result.limit.limit == 2
    unlimited = scripted_agent([text_turn("ok")], limits={"max_turns": None})
    assert (await unlimited.create_session().run("go")).status == "succeeded"
    with pytest.raises(ValueError, match="cannot be None"):
        create_agent(model=MODEL, limits={"max_request_bytes": None})
    with pytest.raises(ValueError, match="may not exceed"):
        create_agent(model=MODEL, limits={"max_response_bytes": 2**40})


@pytest.mark.anyio
async def test_model_override_appends_model_change_entry() -> None:
    """A run model different from the session's appends one model_change entry before input."""
    provider = create_mock_provider(text_turn("ok"))
    session = create_agent(model=MODEL, provider=provider).create_session()
    await session.run("first")
    await session.run("second", model={"provider": "mock", "model": "big"})
    await session.run("third", model={"provider": "mock", "model": "big"})
    kinds = [(e.kind, e.model.model if e.model else None) for e in await session.entries()]
    assert kinds.count(("model_change", "big")) == 1
    assert provider.requests[1].model.model == "big"
    assert provider.requests[0].model.model == "demo"


@pytest.mark.anyio
async def test_system_prompt_layers_compose_and_can_be_disabled() -> None:
    """Instructions, agent layers and run layers compose; system_prompt=False drops layers only."""
    provider = create_mock_provider(text_turn("ok"))
    agent = create_agent(
        model=MODEL,
        provider=provider,
        instructions="Base.",
        system_prompt=["Agent layer.", {"id": "x", "text": "Mapped layer."}],
    )
    session = agent.create_session()
    await session.run("a", system_prompt=["Run layer."])
    await session.run("b", system_prompt=False)
    assert provider.requests[0].system == "Base.\n\nAgent layer.\n\nMapped layer.\n\nRun layer."
    assert provider.requests[1].system == "Base."


@pytest.mark.anyio
async def test_metadata_merges_into_requests_and_tool_contexts() -> None:
    """Agent, session and run metadata merge (run wins) for provider requests and tools."""
    seen: list[dict[str, Any]] = []

    def probe(args: dict[str, Any], context: Any) -> str:
        seen.append(dict(context.metadata))
        return "ok"

    agent = scripted_agent(
        [tool_turn(("c1", "probe", {})), text_turn("ok")],
        tools=[ToolDefinition("probe", probe)],
        metadata={"a": 1, "b": 1},
    )
    session = agent.create_session(metadata={"b": 2, "c": 2})
    await session.run("x", metadata={"c": 3})
    expected = {"a": 1, "b": 2, "c": 3}
    assert seen == [expected]
    assert dict(agent.provider.requests[0].metadata) == expected  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_thinking_is_kept_on_the_assistant_message() -> None:
    """Thinking deltas become one thinking block before the text in history."""
    agent = scripted_agent(
        [
            [
                provider_thinking_delta("hmm ", "sig"),
                provider_thinking_delta("ok"),
                provider_text_delta("answer"),
                provider_done(),
            ]
        ]
    )
    session = agent.create_session()
    result = await session.run("q")
    assert result.content == (ThinkingContent("hmm ok", "sig"), TextContent("answer"))
    entries = await session.entries()
    assert entries[-1].message == result.message


@pytest.mark.anyio
async def test_thinking_level_and_provider_options_reach_the_request() -> None:
    """Run options win; session id and cache key are stamped when missing."""
    provider = create_mock_provider(text_turn("ok"))
    agent = create_agent(
        model=MODEL,
        provider=provider,
        thinking_level="low",
        provider_options={"temperature": 0.1, "cache_key": "custom"},
    )
    session = agent.create_session(id="sess")
    await session.run("x", thinking_level="high", provider_options={"temperature": 0.5})
    options = dict(provider.requests[0].options)
    assert options == {
        "temperature": 0.5,
        "cache_key": "custom",
        "thinking_level": "high",
        "session_id": "sess",
    }


@pytest.mark.anyio
async def test_redactor_covers_requests_events_and_entries() -> None:
    """Exact secrets never reach the provider, subscribers or the store."""
    secret = "hunter2-secret"
    provider = create_mock_provider(
        turns=[tool_turn(("c1", "echo", {"pw": secret})), text_turn(f"the key is {secret}")]
    )
    agent = create_agent(
        model=MODEL,
        provider=provider,
        tools=[echo_tool()],
        redactor=create_secret_redactor([secret]),
        instructions=f"never say {secret}",
    )
    session = agent.create_session()
    sub = session.subscribe()
    result = await session.run(f"my password is {secret}")
    events = [e async for e in sub]
    from prism_core import codec

    assert secret not in codec.dumps(events).decode()
    assert secret not in codec.dumps(await session.entries()).decode()
    for request in provider.requests:
        assert secret not in codec.dumps(list(request.messages)).decode()
        assert secret not in (request.system or "")
    assert result.text == "the key is [REDACTED]"


@pytest.mark.anyio
async def test_provider_request_policies_patch_options_and_redact_errors() -> None:
    """Policies patch options before generation and their secrets are redacted from errors."""

    def policy(request: ProviderRequest) -> dict[str, Any]:
        return {"options": {"api_key_ref": "vault:1"}, "secrets": ["tok-999"]}

    provider = create_mock_provider([provider_error(RuntimeError("denied for tok-999"))])
    agent = create_agent(model=MODEL, provider=provider, provider_request_policies=[policy])
    with pytest.raises(AgentRunError) as info:
        await agent.create_session().run("x")
    assert provider.requests[0].options["api_key_ref"] == "vault:1"
    assert info.value.result.error is not None
    assert info.value.result.error.message == "denied for [REDACTED]"


@pytest.mark.anyio
async def test_middleware_points_run_in_order() -> None:
    """session_start once, provider_request per turn, tool_call/tool_result per call."""
    calls: list[str] = []

    class Recorder:
        def session_start(self, ctx: Any) -> None:
            calls.append("session_start")

        async def provider_request(self, request: ProviderRequest, ctx: Any) -> ProviderRequest:
            calls.append("provider_request")
            return request

        def tool_call(self, call: Any, ctx: Any) -> Any:
            calls.append("tool_call")
            from prism_core import tool_call_content

            return tool_call_content(call.id, call.name, {"rewritten": True})

        def tool_result(self, result: Any, ctx: Any) -> Any:
            calls.append("tool_result")
            return None

        def session_shutdown(self, ctx: Any) -> None:
            calls.append("session_shutdown")

    log: list[Any] = []
    agent = scripted_agent(
        [tool_turn(("c1", "echo", {})), text_turn("ok")],
        tools=[echo_tool(log=log)],
        middleware=[Recorder()],
    )
    session = agent.create_session()
    await session.run("x")
    await session.close()
    await session.close()
    assert calls == [
        "session_start",
        "provider_request",
        "tool_call",
        "tool_result",
        "provider_request",
        "session_shutdown",
    ]
    assert log == [("echo", {"rewritten": True})]


@pytest.mark.anyio
async def test_retry_before_output_then_success() -> None:
    """A transient error before output is retried with retry_scheduled; attempts are counted."""
    attempts = {"n": 0}

    def events(request: ProviderRequest) -> list[Any]:
        attempts["n"] += 1
        if attempts["n"] < 3:
            return [provider_error(ErrorInfo("rate limited", code="rate"))]
        return text_turn("finally")

    agent = create_agent(
        model=MODEL,
        provider=create_mock_provider(events),
        retry={"max_attempts": 3, "base_delay_ms": 1},
    )
    session = agent.create_session()
    sub = session.subscribe()
    result = await session.run("x")
    scheduled = [e for e in [e async for e in sub] if e.type == "retry_scheduled"]
    assert result.text == "finally"
    assert [(e.attempt, e.delay_ms) for e in scheduled] == [(1, 1), (2, 2)]


@pytest.mark.anyio
async def test_no_retry_after_output_or_when_disabled() -> None:
    """Output already emitted, or retry=False for the run: the error fails the run."""
    after_output = [provider_text_delta("half"), provider_error(ErrorInfo("cut", code="x"))]
    agent = create_agent(
        model=MODEL,
        provider=create_mock_provider(after_output),
        retry={"max_attempts": 5, "base_delay_ms": 1},
    )
    with pytest.raises(AgentRunError):
        await agent.create_session().run("x")
    assert len(agent.provider.requests) == 1  # type: ignore[union-attr]
    before_output = create_mock_provider([provider_error(ErrorInfo("busy"))])
    agent2 = create_agent(model=MODEL, provider=before_output, retry={"base_delay_ms": 1})
    with pytest.raises(AgentRunError):
        await agent2.create_session().run("x", retry=False)
    assert len(before_output.requests) == 1


@pytest.mark.anyio
async def test_retry_middleware_can_stop_retrying() -> None:
    """retry middleware returning retry=False ends the run without retry_scheduled."""
    from prism_core import RetryDecision

    class Stop:
        def retry(self, decision: RetryDecision, ctx: Any) -> RetryDecision:
            return RetryDecision(retry=False)

    provider = create_mock_provider([provider_error(ErrorInfo("busy"))])
    agent = create_agent(
        model=MODEL, provider=provider, retry={"base_delay_ms": 1}, middleware=[Stop()]
    )
    session = agent.create_session()
    sub = session.subscribe()
    with pytest.raises(AgentRunError):
        await session.run("x")
    assert "retry_scheduled" not in types([e async for e in sub])
    assert len(provider.requests) == 1


@pytest.mark.anyio
async def test_retry_backoff_is_abort_aware() -> None:
    """Aborting during a long backoff ends the run promptly as aborted."""
    asked = anyio.Event()
    provider = create_mock_provider(
        [provider_error(ErrorInfo("busy"))], on_request=lambda request: asked.set()
    )
    agent = create_agent(
        model=MODEL, provider=provider, retry={"max_attempts": 5, "base_delay_ms": 60_000}
    )
    session = agent.create_session()
    results: list[Any] = []

    async def runner() -> None:
        try:
            await session.run("x")
        except AgentRunError as exc:
            results.append(exc.result)

    with anyio.fail_after(3):
        async with anyio.create_task_group() as group:
            group.start_soon(runner)
            await asked.wait()
            await anyio.sleep(0.01)
            assert session.abort("user cancelled")
    assert results[0].status == "aborted"
    assert results[0].abort_reason == "user cancelled"
