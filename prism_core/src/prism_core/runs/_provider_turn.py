"""One provider turn: stream the provider's answer, assemble tool calls, retry, and store it.

Owns the turn's streaming state, the mapping of provider events to ``message_*`` events
(buffered while output guardrails must see the message first), provider-error redaction and
retry, the output-guardrail stage, and appending the assistant message. It does not run tools
(``_tool_round``) and must not decide when a turn starts (``_execution``, ``_boundary``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from typing import Any

import anyio
import attrs

from ..codec import dumps
from ..content import ErrorInfo, Message, TextContent, ThinkingContent, ToolCallContent, Usage
from ..events import (
    AgentEvent,
    MessageDelta,
    MessageDeltaEvent,
    MessageFinishedEvent,
    MessageStartedEvent,
    RetryScheduledEvent,
)
from ..guardrails import first_decisive
from ..providers import (
    ProviderDone,
    ProviderError,
    ProviderRequest,
    ProviderTextDelta,
    ProviderThinkingDelta,
    ProviderToolCall,
    ProviderToolCallDelta,
    ProviderUsage,
    ToolCallAssembler,
)
from ..redaction import StreamRedaction, redact_value
from ..retry import RetryDecision
from ._counters import LimitBreached
from ._failures import RunFailure
from ._guarding import act_on_run_stage, decision_event, evaluate
from ._request import request_bytes
from ._state import RunState
from ._turn_policy import bounded_detail

__all__ = ("TurnState", "assistant_message", "finish_message", "stream_turn")

logger = logging.getLogger(__package__ or __name__)


@attrs.define
class TurnState:
    """What one provider turn has streamed so far."""

    text: str = ""
    thinking: str = ""
    signature: str | None = None
    usage: Usage | None = None
    started: bool = False
    emitted: bool = False
    interrupted: bool = False
    response_bytes: int = 0
    buffer: list[AgentEvent] = attrs.field(factory=list)
    assembler: ToolCallAssembler = attrs.field(factory=ToolCallAssembler)
    #: The redaction of each delta stream (text, thinking, each tool call's arguments).
    streams: dict[Any, StreamRedaction] = attrs.field(factory=dict)

    def reset(self) -> None:
        """Forget a failed attempt (nothing of it was emitted) before the retry."""
        self.text, self.thinking, self.signature, self.usage = "", "", None, None
        self.started, self.emitted, self.response_bytes = False, False, 0
        self.interrupted = False
        self.buffer.clear()
        self.assembler = ToolCallAssembler()
        self.streams.clear()

    def released(self, run: RunState, key: Any, piece: str) -> str | None:
        """What of ``piece`` the stream ``key`` may show now (see :class:`StreamRedaction`):
        ``piece`` itself without a redactor, ``None`` while a redactor holds it all back."""
        if run.plan.redactor is None:
            return piece
        stream = self.streams.get(key)
        if stream is None:
            stream = self.streams[key] = StreamRedaction(run.plan.redactor)
        return stream.feed(piece) or None


async def stream_turn(
    run: RunState, request: ProviderRequest, state: TurnState
) -> AsyncGenerator[AgentEvent, None]:
    """Stream ``request`` into ``state``, retrying a failed attempt the retry policy allows."""
    assert run.provider is not None
    attempt = 0
    buffering = bool(run.plan.guardrails.for_stage("output"))
    run.finish_reason = None
    while True:
        attempt += 1
        run.counters.provider_attempts += 1
        run.counters.charge(
            "max_provider_attempts", run.counters.provider_attempts, run.plan.limits
        )
        error: ErrorInfo | None = None
        stream = aiter(run.provider.generate(request))
        try:
            while True:
                # A fresh scope per event, so a soft interrupt cancels the provider only
                # and no scope is ever held across a yield.
                with anyio.CancelScope() as provider_scope:
                    run.provider_scope = provider_scope
                    try:
                        provider_event = await anext(stream, None)
                    finally:
                        run.provider_scope = None
                if provider_scope.cancelled_caught:
                    state.interrupted = True
                    break
                if provider_event is None:
                    break
                if isinstance(provider_event, ProviderError):
                    error = provider_event.error
                    break
                if isinstance(provider_event, ProviderDone):
                    run.finish_reason = _finish_reason(run, provider_event.finish_reason)
                    if provider_event.usage is not None:
                        state.usage = provider_event.usage
                    break
                for event in _on_provider_event(run, provider_event, state):
                    if buffering:
                        state.buffer.append(event)
                    else:
                        state.emitted = True
                        yield run.emit(event)
        except (RunFailure, LimitBreached):
            raise
        except Exception as exc:
            error = ErrorInfo(
                str(exc) or type(exc).__name__,
                code=getattr(exc, "code", None) or "provider_error",
                retryable=getattr(exc, "retryable", None),
            )
        finally:
            closer = getattr(stream, "aclose", None)
            if closer is not None:
                with anyio.CancelScope(shield=True):
                    await closer()
        if error is None:
            for event in _flush_deltas(run, state):
                if buffering:
                    state.buffer.append(event)
                else:
                    state.emitted = True
                    yield run.emit(event)
            return
        error = _redact_provider_error(run, error)
        decision = _retry_decision(run, attempt, error, state)
        if decision is not None:
            decision = await run.agent.middleware.run("retry", decision, run.mw_context("retry"))
        if decision is None or not decision.retry:
            raise RunFailure(attrs.evolve(error, code=error.code or "provider_error"))
        # The code only: a provider's message may quote the request or the key.
        logger.info(
            "run %s: provider attempt %d failed (%s); retrying in %d ms",
            run.run_id,
            attempt,
            error.code or "provider_error",
            decision.delay_ms,
            extra={
                "prism_run_id": run.run_id,
                "prism_attempt": attempt,
                "prism_delay_ms": decision.delay_ms,
                "prism_error_code": error.code or "provider_error",
            },
        )
        yield run.emit(
            RetryScheduledEvent(
                session_id=run.session_id,
                run_id=run.run_id,
                attempt=attempt,
                delay_ms=decision.delay_ms,
                error=error,
            )
        )
        await anyio.sleep(decision.delay_ms / 1000)
        state.reset()


def _retry_decision(
    run: RunState, attempt: int, error: ErrorInfo, state: TurnState
) -> RetryDecision | None:
    if run.plan.retry is None or state.emitted:
        return None
    return run.plan.retry.decide(attempt, error)


def _without_secrets(run: RunState, text: str) -> str:
    for secret in run.secrets:
        if secret:
            text = text.replace(secret, "[REDACTED]")
    return text


def _redact_provider_error(run: RunState, error: ErrorInfo) -> ErrorInfo:
    message = _without_secrets(run, error.message)
    return redact_value(attrs.evolve(error, message=message), run.plan.redactor)


def _finish_reason(run: RunState, reason: Any) -> str | None:
    # The provider's text reaches events, the result and the stored state: it is bounded
    # like ``stop_detail`` so a provider cannot smuggle a secret or bloat a checkpoint.
    if reason is None:
        return None
    text = reason if isinstance(reason, str) else str(reason)
    return bounded_detail(_without_secrets(run, text), run.plan.redactor)


def _on_provider_event(run: RunState, event: Any, state: TurnState) -> list[AgentEvent]:
    out: list[AgentEvent] = []
    if isinstance(event, ProviderUsage):
        state.usage = event.usage
        return out
    if not state.started:
        state.started = True
        out.append(MessageStartedEvent(session_id=run.session_id, run_id=run.run_id))
    if isinstance(event, ProviderTextDelta):
        state.text += event.text
        state.response_bytes += len(event.text.encode("utf-8"))
        text = state.released(run, "text", event.text)
        if text is not None:
            out.append(_text_delta(run, "text", text))
    elif isinstance(event, ProviderThinkingDelta):
        state.thinking += event.text
        state.signature = event.signature or state.signature
        state.response_bytes += len(event.text.encode("utf-8"))
        text = state.released(run, "thinking", event.text)
        if text is not None:
            out.append(_text_delta(run, "thinking", text))
    elif isinstance(event, ProviderToolCallDelta):
        state.assembler.add_delta(event)
        state.response_bytes += len((event.arguments_text or "").encode("utf-8"))
        arguments = event.arguments_text
        if arguments:
            arguments = state.released(run, ("tool_call", event.index), arguments)
        if run.plan.redactor is None or arguments or event.id is not None or event.name is not None:
            out.append(_tool_call_delta(run, event.index, event.id, event.name, arguments))
    elif isinstance(event, ProviderToolCall):
        # Measure the call as recorded: arguments that cannot encode (NaN, a lone surrogate)
        # were dropped there, and only that call is blocked.
        recorded = state.assembler.add_call(event.call)
        state.response_bytes += len(dumps(recorded.arguments))
    else:
        raise RunFailure(
            ErrorInfo(
                f"Provider emitted an unknown event {event!r}", code="ERR_PRISM_PROVIDER_EVENT"
            )
        )
    run.counters.charge("max_response_bytes", state.response_bytes, run.plan.limits)
    return out


def _text_delta(run: RunState, kind: Any, text: str) -> MessageDeltaEvent:
    return MessageDeltaEvent(
        session_id=run.session_id, run_id=run.run_id, delta=MessageDelta(kind=kind, text=text)
    )


def _tool_call_delta(
    run: RunState, index: int, id: str | None, name: str | None, arguments: str | None
) -> MessageDeltaEvent:
    return MessageDeltaEvent(
        session_id=run.session_id,
        run_id=run.run_id,
        delta=MessageDelta(
            kind="tool_call", index=index, id=id, name=name, arguments_text=arguments
        ),
    )


def _flush_deltas(run: RunState, state: TurnState) -> list[AgentEvent]:
    """The text each delta stream still held back, now that the attempt has ended."""
    out: list[AgentEvent] = []
    for key, stream in state.streams.items():
        rest = stream.flush()
        if not rest:
            continue
        if isinstance(key, tuple):
            out.append(_tool_call_delta(run, key[1], None, None, rest))
        else:
            out.append(_text_delta(run, key, rest))
    return out


def assistant_message(state: TurnState, calls: tuple[ToolCallContent, ...]) -> Message:
    """The assistant message a turn produced: thinking, text, then the tool calls."""
    content: list[Any] = []
    if state.thinking or state.signature:
        # A signed block with no visible text (reasoning the provider withheld) is kept:
        # the provider needs it back on the next turn.
        content.append(ThinkingContent(state.thinking, state.signature))
    if state.text or not calls:
        content.append(TextContent(state.text))
    content.extend(calls)
    return Message("assistant", tuple(content))


async def finish_message(run: RunState, message: Message, state: TurnState) -> list[AgentEvent]:
    """Check ``message`` with the output guardrails, release what was held, and store it."""
    events: list[AgentEvent] = []
    guards = run.plan.guardrails.for_stage("output")
    if guards:
        records = await evaluate(run, "output", guards, message)
        events.extend(run.emit(decision_event(run, record)) for record in records)
        act_on_run_stage(first_decisive(records), "output")
        # Allowed: release what was held back, so blocked content is never emitted.
        events.extend(run.emit(event) for event in state.buffer)
        state.buffer.clear()
    if not state.started:
        events.append(run.emit(MessageStartedEvent(session_id=run.session_id, run_id=run.run_id)))
    message = redact_value(message, run.plan.redactor)
    await run.session.transcript.append_message(message, run.run_id)
    run.last_message = message
    events.append(
        run.emit(
            MessageFinishedEvent(
                session_id=run.session_id,
                run_id=run.run_id,
                message=message,
                finish_reason=run.finish_reason,
            )
        )
    )
    if state.usage is not None and state.usage.input_tokens > 0:
        run.session.transcript.last_input = (state.usage.input_tokens, "reported")
    else:
        run.session.transcript.last_input = (max(1, request_bytes(run) // 4), "estimate")
    if state.usage is not None:
        run.counters.add_usage(state.usage, run.plan.limits)
    return events
