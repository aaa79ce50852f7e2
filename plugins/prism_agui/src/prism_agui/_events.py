"""Prism's run events as AG-UI events, in the order AG-UI requires.

One :class:`EventTranslator` follows one AG-UI run. Each assistant message gets an id of
its own; its text streams as ``TEXT_MESSAGE_START``/``CONTENT``/``END`` and its tool calls
as ``TOOL_CALL_START``/``ARGS``/``END`` under that id (``parentMessageId``), every one of
them closed when the message is complete, before any call runs and before the run ends on
a suspension. A call's result (or the reason it was blocked) is ``TOOL_CALL_RESULT``.
Thinking, turn, guardrail and retry events have no AG-UI counterpart and are not sent.

A sub-agent's events (``subagent_event``) are forwarded under the parent's run: each child
run is a ``STEP_STARTED``/``STEP_FINISHED`` pair named after it, its messages and tool calls
translated as the parent's are, its tool call ids prefixed with its run id (``<run>/<call>``)
so they never collide with the parent's; its own ending closes its step, never the run.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

import attrs
from ag_ui.core import (
    BaseEvent,
    Interrupt,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from prism_core import TextContent, ToolCallContent

__all__ = ("RUN_FAILED", "EventTranslator", "result_text")

#: The code of a failed run's ``RUN_ERROR`` when its error carries none.
RUN_FAILED = "ERR_PRISM_RUN_FAILED"
EVENTS_DROPPED = "ERR_PRISM_AGUI_EVENTS_DROPPED"


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def result_text(result: Any) -> str:
    """A tool result as the text of its ``TOOL_CALL_RESULT``: the error's message, a string
    value as it is, any other value as JSON."""
    error = getattr(result, "error", None)
    if error is not None:
        return str(error.message)
    value = getattr(result, "value", None)
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


@attrs.define
class _StreamedCall:
    """A tool call whose fragments are arriving: started once its id and name are known."""

    id: str | None = None
    name: str | None = None
    buffered: str = ""
    started: bool = False


@attrs.define
class EventTranslator:
    """Turns one run's Prism events into AG-UI events (see the module docstring)."""

    thread_id: str
    run_id: str
    message_id: str | None = None
    text_open: bool = False
    text_sent: bool = False
    streamed: dict[Any, _StreamedCall] = attrs.field(factory=dict)
    open_calls: list[str] = attrs.field(factory=list)
    #: The arguments of every call this run's messages made, by call id.
    arguments: dict[str, Any] = attrs.field(factory=dict)
    finished: bool = False
    #: What this translator's tool call ids are prefixed with (a sub-agent run's id).
    id_prefix: str = ""
    #: The translators of the sub-agent runs whose step is open, by child run id.
    children: dict[str, EventTranslator] = attrs.field(factory=dict)

    def translate(self, event: Any) -> list[BaseEvent]:
        """The AG-UI events for ``event`` (a suspension is :meth:`suspended`'s)."""
        kind = event.type
        if kind == "subagent_event":
            return self._child(event)
        if kind == "message_started":
            self._begin_message()
            return []
        if kind == "message_delta":
            return self._delta(event.delta)
        if kind == "message_finished":
            return self._message_finished(event.message)
        if kind == "tool_execution_finished":
            return [self._result(event.tool_call_id, result_text(event.result))]
        if kind == "tool_execution_blocked":
            return [self._result(event.tool_call_id, str(event.error.message))]
        if kind == "agent_finished":
            return self._end(RunFinishedSuccessOutcome())
        if kind == "agent_denied":
            return self._end(RunFinishedCancelledOutcome())
        if kind == "error":
            return self.error(str(event.error.message), event.error.code or RUN_FAILED)
        if kind == "event_subscriber_overflow":
            return self.error(
                "the run's events outran this stream and were dropped", EVENTS_DROPPED
            )
        return []

    def _child(self, event: Any) -> list[BaseEvent]:
        """A sub-agent's event, under this run (see the module docstring)."""
        child_id = str(event.child_run_id)
        inner = event.event
        events: list[BaseEvent] = []
        child = self.children.get(child_id)
        if child is None:
            child = EventTranslator(
                thread_id=self.thread_id, run_id=self.run_id, id_prefix=f"{child_id}/"
            )
            self.children[child_id] = child
            events.append(StepStartedEvent(step_name=f"sub-agent run {child_id}"))
        if inner.type in ("agent_finished", "agent_denied", "agent_suspended", "error"):
            events.extend(child._close_message())
            for grandchild in list(child.children):
                events.append(StepFinishedEvent(step_name=f"sub-agent run {grandchild}"))
            events.append(StepFinishedEvent(step_name=f"sub-agent run {child_id}"))
            del self.children[child_id]
            return events
        events.extend(child.translate(inner))
        return events

    def _id(self, call_id: str) -> str:
        return f"{self.id_prefix}{call_id}"

    def suspended(self, interrupts: Sequence[Interrupt]) -> list[BaseEvent]:
        """The end of a run that suspended: ``RUN_FINISHED`` with the interrupt outcome."""
        return self._end(RunFinishedInterruptOutcome(interrupts=list(interrupts)))

    def error(self, message: str, code: str) -> list[BaseEvent]:
        """The end of a failed or refused run: ``RUN_ERROR``."""
        self.finished = True
        return [RunErrorEvent(message=message, code=code)]

    def _end(self, outcome: Any) -> list[BaseEvent]:
        events = self._close_message()
        for child_id in list(self.children):
            events.extend(self.children.pop(child_id)._close_message())
            events.append(StepFinishedEvent(step_name=f"sub-agent run {child_id}"))
        events.append(
            RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome)
        )
        self.finished = True
        return events

    def _begin_message(self) -> str:
        if self.message_id is None:
            self.message_id = _new_id("msg")
            self.text_open = self.text_sent = False
            self.streamed = {}
        return self.message_id

    def _delta(self, delta: Any) -> list[BaseEvent]:
        message_id = self._begin_message()
        if delta.kind == "text" and delta.text:
            events: list[BaseEvent] = []
            if not self.text_open:
                events.append(TextMessageStartEvent(message_id=message_id, role="assistant"))
                self.text_open = self.text_sent = True
            events.append(TextMessageContentEvent(message_id=message_id, delta=delta.text))
            return events
        if delta.kind == "tool_call":
            return self._call_fragment(delta)
        return []

    def _call_fragment(self, delta: Any) -> list[BaseEvent]:
        call = self.streamed.setdefault(delta.index, _StreamedCall())
        call.id = call.id or delta.id
        call.name = call.name or delta.name
        call.buffered += delta.arguments_text or ""
        events: list[BaseEvent] = []
        if not call.started and call.id and call.name:
            events.append(self._start_call(call.id, call.name))
            call.started = True
        if call.started and call.buffered:
            assert call.id is not None
            events.append(ToolCallArgsEvent(tool_call_id=self._id(call.id), delta=call.buffered))
            call.buffered = ""
        return events

    def _start_call(self, call_id: str, name: str) -> ToolCallStartEvent:
        self.open_calls.append(self._id(call_id))
        return ToolCallStartEvent(
            tool_call_id=self._id(call_id), tool_call_name=name, parent_message_id=self.message_id
        )

    def _message_finished(self, message: Any) -> list[BaseEvent]:
        message_id = self._begin_message()
        events: list[BaseEvent] = []
        text = "".join(b.text for b in message.content if isinstance(b, TextContent))
        if text and not self.text_sent:
            # A provider that did not stream: the whole text at once.
            events.append(TextMessageStartEvent(message_id=message_id, role="assistant"))
            events.append(TextMessageContentEvent(message_id=message_id, delta=text))
            self.text_open = self.text_sent = True
        if self.text_open:
            events.append(TextMessageEndEvent(message_id=message_id))
            self.text_open = False
        started = {c.id for c in self.streamed.values() if c.started}
        for block in message.content:
            if not isinstance(block, ToolCallContent):
                continue
            self.arguments[block.id] = block.arguments
            if block.id not in started:
                events.append(self._start_call(block.id, block.name))
                arguments = json.dumps(block.arguments, ensure_ascii=False, default=str)
                events.append(ToolCallArgsEvent(tool_call_id=self._id(block.id), delta=arguments))
        events.extend(self._close_calls())
        self.message_id = None
        return events

    def _close_calls(self) -> list[BaseEvent]:
        events: list[BaseEvent] = [ToolCallEndEvent(tool_call_id=c) for c in self.open_calls]
        self.open_calls = []
        return events

    def _close_message(self) -> list[BaseEvent]:
        events: list[BaseEvent] = []
        if self.text_open and self.message_id is not None:
            events.append(TextMessageEndEvent(message_id=self.message_id))
            self.text_open = False
        events.extend(self._close_calls())
        self.message_id = None
        return events

    def _result(self, call_id: str, content: str) -> ToolCallResultEvent:
        return ToolCallResultEvent(
            message_id=_new_id("result"),
            tool_call_id=self._id(call_id),
            content=content,
            role="tool",
        )
