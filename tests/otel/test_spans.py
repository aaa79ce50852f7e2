"""Spans of one run: names, parents, GenAI attributes, contents only when opted in, failures."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from prism_core import (
    AgentRunError,
    ErrorInfo,
    Guardrail,
    ToolDefinition,
    create_secret_redactor,
    provider_done,
    provider_error,
    provider_text_delta,
)
from prism_otel import create_otel_middleware
from tests.core.helpers import echo_tool, scripted_agent, text_turn, tool_turn

from ._support import events, everything_recorded, named, one, traced

SECRET = "hunter2-password"


def tool_then_answer(**config: Any) -> Any:
    """An agent that calls ``echo`` with a secret argument, then answers."""
    return scripted_agent(
        [
            tool_turn(("call_1", "echo", {"text": f"my password is {SECRET}"})),
            text_turn(f"done with {SECRET}", input_tokens=12, output_tokens=5),
        ],
        name="helper",
        tools=[echo_tool(description="Echo the text back")],
        **config,
    )


@pytest.mark.anyio
async def test_a_run_is_one_invoke_agent_span_with_chat_and_tool_spans_under_it() -> None:
    """``invoke_agent`` is the parent of each ``chat`` and ``execute_tool`` span, with the
    GenAI attributes, token usage and finish reasons."""
    provider, exporter = traced()
    agent = tool_then_answer(middleware=[create_otel_middleware(tracer_provider=provider)])
    result = await agent.create_session(id="s1").run("go")
    assert result.status == "succeeded"

    spans = exporter.get_finished_spans()
    assert sorted(s.name for s in spans) == [
        "chat demo",
        "chat demo",
        "execute_tool echo",
        "invoke_agent helper",
    ]
    run = one(spans, "invoke_agent helper")
    assert run.parent is None
    assert run.kind is SpanKind.INTERNAL
    assert run.attributes is not None
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.agent.name"] == "helper"
    # Required on an agent span: the provider; conditionally required: the model.
    assert run.attributes["gen_ai.provider.name"] == "mock"
    assert run.attributes["gen_ai.request.model"] == "demo"
    # A run without ``run_state`` has no definition revision, so no agent version.
    assert "gen_ai.agent.version" not in run.attributes
    assert run.attributes["gen_ai.conversation.id"] == "s1"
    assert run.attributes["prism.run.id"] == result.run_id
    assert run.attributes["prism.run.status"] == "succeeded"
    assert run.attributes["gen_ai.usage.input_tokens"] == 12
    assert run.status.status_code is StatusCode.UNSET

    first, second = named(spans, "chat demo")
    tool = one(spans, "execute_tool echo")
    for child in (first, second, tool):
        assert child.parent is not None
        assert child.parent.span_id == run.context.span_id
        assert child.context.trace_id == run.context.trace_id
    assert first.kind is SpanKind.CLIENT
    assert first.attributes is not None
    assert second.attributes is not None
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.request.model"] == "demo"
    assert first.attributes["gen_ai.provider.name"] == "mock"
    # Set if and only if the request streams: a provider turn always does.
    assert first.attributes["gen_ai.request.stream"] is True
    assert second.attributes["gen_ai.request.stream"] is True
    # The conventions' well-known value is ``tool_call`` (Prism's own is ``tool_calls``).
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_call",)
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert second.attributes["gen_ai.usage.input_tokens"] == 12
    assert second.attributes["gen_ai.usage.output_tokens"] == 5
    # The chat span ends with the model's message, before the tool it asked for runs.
    assert first.end_time is not None
    assert tool.start_time is not None
    assert first.end_time <= tool.start_time
    assert tool.attributes is not None
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "echo"
    assert tool.attributes["gen_ai.tool.call.id"] == "call_1"
    assert tool.attributes["gen_ai.tool.description"] == "Echo the text back"
    assert tool.attributes["prism.tool.outcome"] == "success"
    assert run.start_time is not None
    assert run.end_time is not None
    assert run.start_time <= first.start_time  # type: ignore[operator]
    assert run.end_time >= second.end_time  # type: ignore[operator]


@pytest.mark.anyio
async def test_no_message_text_arguments_or_results_are_recorded_by_default() -> None:
    """Without the opt-in, neither the prompt's answer, the tool's arguments nor its result
    appear anywhere in the spans."""
    provider, exporter = traced()
    agent = tool_then_answer(middleware=[create_otel_middleware(tracer_provider=provider)])
    await agent.create_session().run("go")

    recorded = everything_recorded(exporter.get_finished_spans())
    assert SECRET not in recorded
    assert "password" not in recorded
    assert "gen_ai.tool.call.arguments" not in recorded
    assert "gen_ai.tool.call.result" not in recorded
    assert "gen_ai.output.messages" not in recorded


@pytest.mark.anyio
async def test_opted_in_contents_are_recorded_after_the_runs_redactor() -> None:
    """``record_content=True`` records arguments, results and output messages, redacted."""
    provider, exporter = traced()
    agent = tool_then_answer(
        middleware=[create_otel_middleware(tracer_provider=provider, record_content=True)],
        redactor=create_secret_redactor([SECRET]),
    )
    await agent.create_session().run("go")

    spans = exporter.get_finished_spans()
    recorded = everything_recorded(spans)
    assert SECRET not in recorded
    tool = one(spans, "execute_tool echo")
    assert tool.attributes is not None
    assert tool.attributes["gen_ai.tool.call.arguments"] == ('{"text":"my password is [REDACTED]"}')
    assert "[REDACTED]" in str(tool.attributes["gen_ai.tool.call.result"])
    _, answer = named(spans, "chat demo")
    assert answer.attributes is not None
    assert answer.attributes["gen_ai.output.messages"] == (
        '[{"finish_reason":"stop","parts":[{"content":"done with [REDACTED]","type":"text"}],'
        '"role":"assistant"}]'
    )


@pytest.mark.anyio
async def test_the_content_opt_in_reads_the_genai_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``record_content=None`` follows ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    assert create_otel_middleware().record_content is True
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "false")
    assert create_otel_middleware().record_content is False
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
    assert create_otel_middleware().record_content is False


@pytest.mark.anyio
async def test_a_failed_run_marks_its_span_and_the_chat_span_as_errors() -> None:
    """A provider error fails the run: both spans get an ERROR status and ``error.type``; the
    error message (which may quote content) is not the status description."""
    provider, exporter = traced()
    agent = scripted_agent(
        [[provider_error(ErrorInfo(f"upstream said {SECRET}", code="overloaded"))]],
        name="helper",
        middleware=[create_otel_middleware(tracer_provider=provider)],
    )
    with pytest.raises(AgentRunError):
        await agent.create_session().run("go")

    spans = exporter.get_finished_spans()
    run = one(spans, "invoke_agent helper")
    chat = one(spans, "chat demo")
    for span in (run, chat):
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == "overloaded"
        assert span.attributes is not None
        assert span.attributes["error.type"] == "overloaded"
    assert run.attributes is not None
    assert run.attributes["prism.run.status"] == "failed"
    assert SECRET not in everything_recorded(spans)


@pytest.mark.anyio
async def test_a_tool_that_raises_ends_its_span_as_an_error() -> None:
    """The run continues after a raising tool; its span says ``error`` with an error type."""

    def explode(args: dict[str, Any], context: Any) -> Any:
        raise RuntimeError("disk full")

    provider, exporter = traced()
    agent = scripted_agent(
        [tool_turn(("call_9", "explode", {})), text_turn("sorry")],
        name="helper",
        tools=[ToolDefinition("explode", explode)],
        middleware=[create_otel_middleware(tracer_provider=provider)],
    )
    result = await agent.create_session().run("go")
    assert result.status == "succeeded"
    tool = one(exporter.get_finished_spans(), "execute_tool explode")
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.attributes is not None
    assert tool.attributes["prism.tool.outcome"] == "error"
    assert tool.attributes["error.type"]


@pytest.mark.anyio
async def test_guardrail_decisions_and_blocked_calls_are_recorded() -> None:
    """A blocking tool-input guard: a ``prism.guardrail.decision`` event on the run span and
    a tool span whose outcome is ``blocked``; the guard's reason stays out by default."""
    guard = Guardrail(
        "no-echo",
        "tool_input",
        lambda context: {"action": "block", "reason": f"saw {SECRET}"},
    )
    provider, exporter = traced()
    agent = tool_then_answer(
        guardrails={"tool_input": [guard]},
        middleware=[create_otel_middleware(tracer_provider=provider)],
    )
    await agent.create_session().run("go")

    spans = exporter.get_finished_spans()
    run = one(spans, "invoke_agent helper")
    (decision,) = events(run, "prism.guardrail.decision")
    assert decision == {
        "prism.guardrail.name": "no-echo",
        "prism.guardrail.stage": "tool_input",
        "prism.guardrail.action": "block",
    }
    tool = one(spans, "execute_tool echo")
    assert tool.attributes is not None
    assert tool.attributes["prism.tool.outcome"] == "blocked"
    assert SECRET not in everything_recorded(spans)


@pytest.mark.anyio
async def test_a_run_inside_a_host_span_is_its_child() -> None:
    """The run's span joins the trace that is current where the host runs it."""
    provider, exporter = traced()
    agent = tool_then_answer(middleware=[create_otel_middleware(tracer_provider=provider)])
    tracer = provider.get_tracer("host")
    with tracer.start_as_current_span("handle request") as host:
        await agent.create_session().run("go")
    run = one(exporter.get_finished_spans(), "invoke_agent helper")
    assert run.parent is not None
    assert run.parent.span_id == host.get_span_context().span_id


@pytest.mark.anyio
async def test_a_stream_left_early_still_ends_the_runs_spans() -> None:
    """Leaving the stream aborts the run: its span ends with status ``aborted``, and no
    span stays open."""
    provider, exporter = traced()
    agent = tool_then_answer(middleware=[create_otel_middleware(tracer_provider=provider)])
    session = agent.create_session()
    async for event in session.stream("go"):
        if event.type == "turn_started":
            break
    await session.close()
    spans = exporter.get_finished_spans()
    run = one(spans, "invoke_agent helper")
    assert run.attributes is not None
    assert run.attributes["prism.run.status"] == "aborted"
    assert run.status.status_code is StatusCode.ERROR
    for span in spans:
        assert span.end_time is not None


def test_the_plugin_is_installed_and_gives_each_agent_its_tracing_middleware() -> None:
    """``prism_otel.plugin`` is declared under the ``prism`` entry-point group, and an agent
    composed with it carries one tracing middleware of its own."""
    from importlib.metadata import entry_points

    import prism_otel
    from prism_otel import OtelMiddleware

    (declared,) = [e for e in entry_points(group="prism") if e.value == "prism_otel:plugin"]
    assert declared.load() is prism_otel.plugin
    first = scripted_agent([text_turn("hi")], plugins=[prism_otel.plugin])
    second = scripted_agent([text_turn("hi")], plugins=[prism_otel.plugin])
    mine = [m for m in first.middleware._items if isinstance(m, OtelMiddleware)]
    theirs = [m for m in second.middleware._items if isinstance(m, OtelMiddleware)]
    assert len(mine) == 1
    assert len(theirs) == 1
    assert mine[0] is not theirs[0]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("given", "reported"),
    [
        ("length", "length"),
        ("stop", "stop"),
        ("tool_calls", "tool_call"),
        ("content_filter", "content_filter"),
        # Not one of the well-known values: reported as the provider gave it.
        ("pause", "pause"),
    ],
)
async def test_the_provider_finish_reason_is_reported_in_the_conventions_values(
    given: str, reported: str
) -> None:
    """A provider's own finish reason reaches ``message_finished`` as Prism's value and the
    span as the conventions' (``stop``, ``length``, ``content_filter``, ``tool_call``,
    ``error``; any other value passes through)."""
    provider, exporter = traced()
    agent = scripted_agent(
        [[provider_text_delta("cut sho"), provider_done(finish_reason=given)]],
        name="helper",
        middleware=[create_otel_middleware(tracer_provider=provider, record_content=True)],
    )
    session = agent.create_session()
    finished = [e async for e in session.stream("go") if e.type == "message_finished"]
    assert [e.finish_reason for e in finished] == [given]
    chat = one(exporter.get_finished_spans(), "chat demo")
    assert chat.attributes is not None
    assert chat.attributes["gen_ai.response.finish_reasons"] == (reported,)
    (message,) = json.loads(str(chat.attributes["gen_ai.output.messages"]))
    assert message["finish_reason"] == reported


@pytest.mark.anyio
async def test_an_agent_without_a_name_is_invoke_agent_and_its_description_is_recorded() -> None:
    """Without a name (or id) the span is ``invoke_agent`` with no ``gen_ai.agent.name``; an
    agent's description is ``gen_ai.agent.description``; a tool without a description has no
    ``gen_ai.tool.description``."""
    provider, exporter = traced()
    agent = scripted_agent(
        [tool_turn(("call_1", "echo", {"text": "hi"})), text_turn("done")],
        description="Answers questions",
        tools=[echo_tool()],
        middleware=[create_otel_middleware(tracer_provider=provider)],
    )
    await agent.create_session().run("go")
    spans = exporter.get_finished_spans()
    run = one(spans, "invoke_agent")
    assert run.attributes is not None
    assert "gen_ai.agent.name" not in run.attributes
    assert run.attributes["gen_ai.agent.description"] == "Answers questions"
    assert run.attributes["gen_ai.provider.name"] == "mock"
    tool = one(spans, "execute_tool echo")
    assert tool.attributes is not None
    assert "gen_ai.tool.description" not in tool.attributes


@pytest.mark.anyio
async def test_a_runs_model_override_is_the_agent_spans_request_model() -> None:
    """``gen_ai.request.model`` on the agent span is the model the run asked for."""
    provider, exporter = traced()
    agent = scripted_agent(
        [text_turn("done")],
        name="helper",
        middleware=[create_otel_middleware(tracer_provider=provider)],
    )
    await agent.create_session().run("go", model={"provider": "mock", "model": "bigger"})
    spans = exporter.get_finished_spans()
    run = one(spans, "invoke_agent helper")
    assert run.attributes is not None
    assert run.attributes["gen_ai.request.model"] == "bigger"
    chat = one(spans, "chat bigger")
    assert chat.attributes is not None
    assert chat.attributes["gen_ai.request.model"] == "bigger"
