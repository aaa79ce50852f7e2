"""The event translation on its own, for the shapes the host app's provider does not stream:
a message that arrives whole, a call whose id comes after its first fragment, a run that ends
while a message is open, a denied run, and the decision mapping's refusals."""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import ResumeEntry

from prism_agui._decisions import decisions_for
from prism_agui._events import EventTranslator
from prism_core import (
    AgentDecisionError,
    AgentDeniedEvent,
    AgentFinishedEvent,
    Message,
    MessageDelta,
    MessageDeltaEvent,
    MessageFinishedEvent,
    MessageStartedEvent,
    TextContent,
    ToolCallContent,
)

IDS = {"session_id": "s", "run_id": "r"}


def _types(events: list[Any]) -> list[str]:
    return [event.type.value for event in events]


def _run(translator: EventTranslator, *prism_events: Any) -> list[Any]:
    out: list[Any] = []
    for event in prism_events:
        out.extend(translator.translate(event))
    return out


def test_a_message_that_arrives_whole_is_sent_whole() -> None:
    message = Message(
        "assistant",
        (TextContent("Checking."), ToolCallContent("c1", "lookup", {"order": "A-1"})),
    )
    events = _run(
        EventTranslator("t", "run"),
        MessageStartedEvent(**IDS),
        MessageFinishedEvent(**IDS, message=message),
        AgentFinishedEvent(**IDS),
    )
    assert _types(events) == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]
    assert events[1].delta == "Checking."
    assert events[3].parent_message_id == events[0].message_id
    assert events[4].delta == '{"order": "A-1"}'


def test_a_call_starts_once_its_id_and_name_are_known_and_keeps_every_fragment() -> None:
    fragments = [
        MessageDelta(kind="tool_call", index=0, arguments_text='{"or'),
        MessageDelta(kind="tool_call", index=0, id="c1"),
        MessageDelta(kind="tool_call", index=0, name="lookup", arguments_text='der": '),
        MessageDelta(kind="tool_call", index=0, arguments_text='"A-1"}'),
    ]
    final = Message("assistant", (ToolCallContent("c1", "lookup", {"order": "A-1"}),))
    events = _run(
        EventTranslator("t", "run"),
        MessageStartedEvent(**IDS),
        *(MessageDeltaEvent(**IDS, delta=d) for d in fragments),
        MessageFinishedEvent(**IDS, message=final),
    )
    assert _types(events) == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
    ]
    assert (events[0].tool_call_id, events[0].tool_call_name) == ("c1", "lookup")
    assert "".join(e.delta for e in events[1:3]) == '{"order": "A-1"}'


def test_a_run_that_ends_mid_message_closes_what_is_open_first() -> None:
    translator = EventTranslator("t", "run")
    events = _run(
        translator,
        MessageStartedEvent(**IDS),
        MessageDeltaEvent(**IDS, delta=MessageDelta(kind="text", text="Hi")),
        MessageDeltaEvent(**IDS, delta=MessageDelta(kind="tool_call", index=0, id="c", name="x")),
        AgentDeniedEvent(**IDS, version=3),
    )
    assert _types(events) == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TOOL_CALL_START",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]
    assert events[-1].outcome.type == "cancelled"
    assert translator.finished


def _entry(interrupt_id: str, **fields: Any) -> ResumeEntry:
    return ResumeEntry(interrupt_id=interrupt_id, **fields)


@pytest.mark.parametrize(
    "payload",
    [
        None,
        "yes",
        {},
        {"approved": "true"},
        {"approved": True, "arguments": ["A-1"]},
        {"approved": False, "arguments": {"order": "B-1"}},
        {"approved": True, "reason": 7},
        {"approved": True, "outcome": "allow_for_run"},
        {"approved": True, "resolutions": []},
    ],
)
def test_a_payload_that_is_not_an_approval_is_refused(payload: Any) -> None:
    entry = _entry("appr_1", status="resolved", payload=payload)
    with pytest.raises(AgentDecisionError) as refused:
        decisions_for([entry], {"appr_1": "tool_approval"})
    assert refused.value.code == "ERR_PRISM_DECISION_INVALID"


def test_resume_entries_map_to_once_only_decisions() -> None:
    entries = [
        _entry("a", status="resolved", payload={"approved": True}),
        _entry("b", status="resolved", payload={"approved": True, "arguments": {"order": "B"}}),
        _entry("c", status="resolved", payload={"approved": False, "reason": "no"}),
        _entry("d", status="cancelled"),
        _entry("e", status="resolved", payload={"approved_by": "Ana"}),
    ]
    kinds = {"a": "tool_approval", "b": "tool_approval", "c": "tool_approval", "e": "elicitation"}
    assert decisions_for(entries, kinds) == [
        {"approval_id": "a", "outcome": "allow_once"},
        {"approval_id": "b", "outcome": "allow_once", "modified_arguments": {"order": "B"}},
        {"approval_id": "c", "outcome": "reject_once", "reason": "no"},
        {"approval_id": "d", "outcome": "reject_once", "reason": "cancelled by the user"},
        {"approval_id": "e", "outcome": "allow_once", "elicitation": {"approved_by": "Ana"}},
    ]
