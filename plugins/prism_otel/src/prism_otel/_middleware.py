"""The tracing middleware: OpenTelemetry spans for runs, provider turns and tool calls.

It is a plain Prism middleware object. Spans start and end on the run's own signals: the
``event`` observer point (every event a run emits, already redacted), ``provider_request``
and ``tool_call`` (where a provider turn and a tool call begin), ``checkpoint_metadata`` and
``checkpoint_written`` (durable writes), and ``session_shutdown`` (anything left open).

A run's span context travels in its checkpoint's sidecar metadata as a W3C ``traceparent``,
so a resume in another process links its span to the run's original span.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

import attrs
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from prism_core import CheckpointWrite, Message, MiddlewareContext, ModelConfig, ToolCallContent
from prism_core.codec import dumps
from prism_core.providers import ProviderRequest

from . import _names as n
from ._content import output_messages

__all__ = ("OtelMiddleware", "create_otel_middleware")

_PROPAGATOR = TraceContextTextMapPropagator()
_ENDINGS = ("agent_finished", "error", "agent_suspended", "agent_denied")


@attrs.define
class _RunSpans:
    """The open spans of one run in this process."""

    session_id: str
    agent_id: str | None
    agent_name: str | None
    agent_version: str | None
    agent_description: str | None
    model: ModelConfig | None
    started_ns: int
    parent: otel_context.Context
    span: Span | None = None
    chat: Span | None = None
    chat_end_ns: int | None = None
    tools: dict[str, Span] = attrs.field(factory=dict)


class OtelMiddleware:
    """Prism middleware that records runs as OpenTelemetry spans (GenAI conventions).

    ``record_content=False`` (the default) keeps message text, tool arguments and results out
    of every span; with ``True`` they are recorded as the run's subscribers see them, that is
    after the run's redactor.
    """

    def __init__(
        self, *, tracer_provider: TracerProvider | None = None, record_content: bool = False
    ) -> None:
        self._tracer = trace.get_tracer(n.TRACER_NAME, "0.1.0", tracer_provider=tracer_provider)
        self.record_content = record_content
        self._runs: dict[str, _RunSpans] = {}

    # -- middleware points -------------------------------------------------------------------

    def event(self, event: Any, context: MiddlewareContext) -> None:
        """Observe one emitted event (the ``event`` point)."""
        kind = getattr(event, "type", None)
        run_id = getattr(event, "run_id", None)
        if not isinstance(run_id, str):
            return
        if kind == "agent_started":
            self._runs[run_id] = _RunSpans(
                session_id=context.session_id,
                agent_id=context.agent_id,
                agent_name=context.agent_name,
                agent_version=context.agent_version,
                agent_description=context.agent_description,
                model=context.model,
                started_ns=time.time_ns(),
                parent=otel_context.get_current(),
            )
            return
        run = self._runs.get(run_id)
        if run is None:
            return
        span = self._run_span(run_id, run, resumed=event if kind == "agent_resumed" else None)
        handler = _HANDLERS.get(kind or "")
        if handler is not None:
            handler(self, run, span, event)
        if kind in _ENDINGS:
            self._end_run(run_id, run, span)

    def provider_request(self, request: ProviderRequest, context: MiddlewareContext) -> None:
        """Start the ``chat {model}`` span of a provider turn."""
        run = self._runs.get(context.run_id or "")
        if run is None:
            return
        parent = self._run_span(context.run_id or "", run)
        _end(run.chat, None)
        model = request.model.model
        run.chat = self._tracer.start_span(
            f"chat {model}",
            context=trace.set_span_in_context(parent),
            kind=SpanKind.CLIENT,
            attributes={
                n.OPERATION: "chat",
                n.PROVIDER_NAME: request.model.provider,
                n.REQUEST_MODEL: model,
                # A provider answers as a stream of events: every Prism turn streams.
                n.REQUEST_STREAM: True,
                n.CONVERSATION_ID: run.session_id,
                n.RUN_ID: context.run_id or "",
            },
        )
        run.chat_end_ns = None

    def tool_call(self, call: ToolCallContent, context: MiddlewareContext) -> None:
        """Start the ``execute_tool {tool}`` span of a tool call."""
        run = self._runs.get(context.run_id or "")
        if run is None:
            return
        parent = self._run_span(context.run_id or "", run)
        _end(run.tools.pop(call.id, None), None)
        attributes: dict[str, Any] = {
            n.OPERATION: "execute_tool",
            n.TOOL_NAME: call.name,
            n.TOOL_CALL_ID: call.id,
            n.TOOL_TYPE: "function",
            n.CONVERSATION_ID: run.session_id,
            n.RUN_ID: context.run_id or "",
        }
        if context.tool_description:
            attributes[n.TOOL_DESCRIPTION] = context.tool_description
        run.tools[call.id] = self._tracer.start_span(
            f"execute_tool {call.name}",
            context=trace.set_span_in_context(parent),
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        )

    def checkpoint_metadata(
        self, metadata: dict[str, str], context: MiddlewareContext
    ) -> dict[str, str] | None:
        """Carry the run span's ``traceparent`` in the checkpoint's sidecar metadata.

        The first span that writes it wins: a resumed run keeps pointing at the run's
        original span for as long as the sidecar keeps the key.
        """
        if "traceparent" in metadata:
            return None
        run = self._runs.get(context.run_id or "")
        if run is None or run.span is None:
            return None
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(run.span))
        if "traceparent" not in carrier:
            return None
        return {**metadata, **carrier}

    def checkpoint_written(self, write: CheckpointWrite, context: MiddlewareContext) -> None:
        """Record a checkpoint write as an event on the run's span."""
        run = self._runs.get(write.run_id)
        if run is None or run.span is None:
            return
        run.span.add_event(
            n.EVENT_CHECKPOINT,
            {
                "prism.checkpoint.version": write.version,
                "prism.checkpoint.status": write.status,
                "prism.checkpoint.bytes": write.bytes,
                "prism.checkpoint.duration_ms": write.duration_ms,
            },
        )

    def session_shutdown(self, context: MiddlewareContext) -> None:
        """End whatever spans the session's runs left open (a stream left early)."""
        for run_id, run in list(self._runs.items()):
            if run.session_id == context.session_id:
                span = self._run_span(run_id, run)
                span.set_attribute(n.RUN_STATUS, "abandoned")
                self._end_run(run_id, run, span)

    # -- spans -------------------------------------------------------------------------------

    def _run_span(self, run_id: str, run: _RunSpans, *, resumed: Any = None) -> Span:
        """The run's ``invoke_agent`` span, started (back-dated to ``agent_started``) on the
        first event after it, so a resume's span can carry its link from the start."""
        if run.span is not None:
            return run.span
        links: list[Link] = []
        if resumed is not None:
            origin = _origin(getattr(resumed, "checkpoint_metadata", None))
            if origin is not None:
                links.append(Link(origin, {"prism.link": "resumed_from"}))
        agent = run.agent_name or run.agent_id
        attributes: dict[str, Any] = {
            n.OPERATION: "invoke_agent",
            n.CONVERSATION_ID: run.session_id,
            n.RUN_ID: run_id,
        }
        if agent:
            attributes[n.AGENT_NAME] = agent
        if run.agent_id is not None:
            attributes[n.AGENT_ID] = run.agent_id
        if run.model is not None:
            attributes[n.PROVIDER_NAME] = run.model.provider
            attributes[n.REQUEST_MODEL] = run.model.model
        if run.agent_version is not None:
            attributes[n.AGENT_VERSION] = run.agent_version
        if run.agent_description:
            attributes[n.AGENT_DESCRIPTION] = run.agent_description
        run.span = self._tracer.start_span(
            f"invoke_agent {agent}" if agent else "invoke_agent",
            context=run.parent,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            links=links,
            start_time=run.started_ns,
        )
        return run.span

    def _end_run(self, run_id: str, run: _RunSpans, span: Span) -> None:
        _end(run.chat, run.chat_end_ns)
        run.chat = None
        for tool in run.tools.values():
            tool.set_attribute(n.TOOL_OUTCOME, "suspended")
            tool.end()
        run.tools.clear()
        span.end()
        self._runs.pop(run_id, None)

    # -- event handlers ----------------------------------------------------------------------

    def _on_resumed(self, run: _RunSpans, span: Span, event: Any) -> None:
        attributes: dict[str, Any] = {"prism.checkpoint.version": event.version}
        if event.decision is not None:
            attributes["prism.resume.decision"] = event.decision
        span.add_event(n.EVENT_RESUMED, attributes)

    def _on_message_finished(self, run: _RunSpans, span: Span, event: Any) -> None:
        if run.chat is None:
            return
        message: Message = event.message
        # The provider's own reason when it gave one; otherwise what the message shows.
        given = event.finish_reason or ("tool_calls" if message.tool_calls else "stop")
        reason = n.FINISH_REASONS.get(given, given)
        run.chat.set_attribute(n.RESPONSE_FINISH_REASONS, (reason,))
        if self.record_content:
            run.chat.set_attribute(n.OUTPUT_MESSAGES, output_messages(message, reason))
        run.chat_end_ns = time.time_ns()

    def _on_turn_finished(self, run: _RunSpans, span: Span, event: Any) -> None:
        if run.chat is None:
            return
        if event.usage is not None:
            run.chat.set_attribute(n.INPUT_TOKENS, event.usage.input_tokens)
            run.chat.set_attribute(n.OUTPUT_TOKENS, event.usage.output_tokens)
        _end(run.chat, run.chat_end_ns)
        run.chat = None

    def _on_retry(self, run: _RunSpans, span: Span, event: Any) -> None:
        target = run.chat or span
        target.add_event(
            n.EVENT_RETRY,
            {
                "prism.retry.attempt": event.attempt,
                "prism.retry.delay_ms": float(event.delay_ms),
                n.ERROR_TYPE: event.error.code or "provider_error",
            },
        )

    def _on_tool_started(self, run: _RunSpans, span: Span, event: Any) -> None:
        tool = run.tools.get(event.tool_call_id)
        if tool is not None and self.record_content:
            tool.set_attribute(n.TOOL_ARGUMENTS, _json(event.arguments))

    def _on_tool_finished(self, run: _RunSpans, span: Span, event: Any) -> None:
        tool = run.tools.pop(event.tool_call_id, None)
        if tool is None:
            return
        result = event.result
        if result.error is not None:
            tool.set_attribute(n.TOOL_OUTCOME, "error")
            tool.set_attribute(n.ERROR_TYPE, result.error.code or "tool_error")
            tool.set_status(Status(StatusCode.ERROR))
        else:
            tool.set_attribute(n.TOOL_OUTCOME, "success")
        if self.record_content:
            value = result.error.message if result.error is not None else result.value
            tool.set_attribute(n.TOOL_RESULT, _json(value))
        tool.end()

    def _on_tool_error(self, run: _RunSpans, span: Span, event: Any) -> None:
        tool = run.tools.pop(event.tool_call_id, None)
        if tool is None:
            return
        tool.set_attribute(n.TOOL_OUTCOME, "error")
        tool.set_attribute(n.ERROR_TYPE, event.error.code or "tool_error")
        tool.set_status(Status(StatusCode.ERROR))
        tool.end()

    def _on_tool_blocked(self, run: _RunSpans, span: Span, event: Any) -> None:
        tool = run.tools.pop(event.tool_call_id, None)
        if tool is None:
            return
        tool.set_attribute(n.TOOL_OUTCOME, "blocked")
        tool.set_attribute(n.ERROR_TYPE, event.reason)
        tool.end()

    def _on_guardrail(self, run: _RunSpans, span: Span, event: Any) -> None:
        record = event.record
        attributes: dict[str, Any] = {
            "prism.guardrail.name": record.guardrail,
            "prism.guardrail.stage": record.stage,
            "prism.guardrail.action": record.action,
        }
        if self.record_content and record.reason is not None:
            attributes["prism.guardrail.reason"] = record.reason
        span.add_event(n.EVENT_GUARDRAIL, attributes)

    def _on_suspended(self, run: _RunSpans, span: Span, event: Any) -> None:
        interruption = event.interruption
        attributes: dict[str, Any] = {"prism.checkpoint.version": event.version}
        kind = getattr(interruption, "kind", None)
        if isinstance(kind, str):
            attributes["prism.interruption.kind"] = kind
        pending = getattr(interruption, "pending_decisions", None)
        if pending is not None:
            attributes["prism.interruption.pending_decisions"] = len(pending)
        span.add_event(n.EVENT_SUSPENDED, attributes)
        span.set_attribute(n.RUN_STATUS, "suspended")

    def _on_finished(self, run: _RunSpans, span: Span, event: Any) -> None:
        span.set_attribute(n.RUN_STATUS, event.status)
        if event.usage is not None:
            span.set_attribute(n.INPUT_TOKENS, event.usage.input_tokens)
            span.set_attribute(n.OUTPUT_TOKENS, event.usage.output_tokens)

    def _on_error(self, run: _RunSpans, span: Span, event: Any) -> None:
        code = event.error.code or "error"
        span.set_attribute(n.RUN_STATUS, event.status)
        span.set_attribute(n.ERROR_TYPE, code)
        description = event.error.message if self.record_content else code
        for target in (run.chat, span):
            if target is not None:
                target.set_status(Status(StatusCode.ERROR, description))
        if run.chat is not None:
            run.chat.set_attribute(n.ERROR_TYPE, code)

    def _on_denied(self, run: _RunSpans, span: Span, event: Any) -> None:
        span.set_attribute(n.RUN_STATUS, "denied")


_HANDLERS: dict[str, Any] = {
    "agent_resumed": OtelMiddleware._on_resumed,
    "message_finished": OtelMiddleware._on_message_finished,
    "turn_finished": OtelMiddleware._on_turn_finished,
    "retry_scheduled": OtelMiddleware._on_retry,
    "tool_execution_started": OtelMiddleware._on_tool_started,
    "tool_execution_finished": OtelMiddleware._on_tool_finished,
    "tool_execution_error": OtelMiddleware._on_tool_error,
    "tool_execution_blocked": OtelMiddleware._on_tool_blocked,
    "guardrail_decision": OtelMiddleware._on_guardrail,
    "agent_suspended": OtelMiddleware._on_suspended,
    "agent_finished": OtelMiddleware._on_finished,
    "error": OtelMiddleware._on_error,
    "agent_denied": OtelMiddleware._on_denied,
}


def _end(span: Span | None, end_ns: int | None) -> None:
    if span is not None:
        span.end(end_time=end_ns)


def _json(value: Any) -> str:
    try:
        return dumps(value).decode("utf-8")
    except (TypeError, ValueError):
        return repr(value)


def _origin(metadata: Mapping[str, str] | None) -> trace.SpanContext | None:
    """The span context a checkpoint's sidecar ``traceparent`` names, if valid."""
    if not metadata or "traceparent" not in metadata:
        return None
    extracted = _PROPAGATOR.extract(dict(metadata))
    span_context = trace.get_current_span(extracted).get_span_context()
    return span_context if span_context.is_valid else None


def create_otel_middleware(
    *, tracer_provider: TracerProvider | None = None, record_content: bool | None = None
) -> OtelMiddleware:
    """Tracing middleware for ``create_agent(middleware=[...])``.

    ``tracer_provider`` defaults to the global one (``opentelemetry.trace``).
    ``record_content=None`` reads ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``
    (``true`` opts in); contents are recorded only after the run's redactor.
    """
    if record_content is None:
        record_content = os.environ.get(n.CONTENT_ENV, "").strip().lower() == "true"
    return OtelMiddleware(tracer_provider=tracer_provider, record_content=record_content)
