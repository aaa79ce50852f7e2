"""The run state's direct JSON path equals the cattrs converter, value and type alike."""

from __future__ import annotations

import json
from typing import Any

import pytest

from prism_core.codec import converter, dumps
from prism_core.content import (
    ErrorInfo,
    Message,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolResultContent,
    Usage,
)
from prism_core.durable._state import (
    _RECORDS,
    AgentRunState,
    DecisionRecord,
    DecisionScope,
    Interruption,
    LoopStateRecord,
    PendingCall,
    PendingDecision,
    ResolutionRecord,
    RunCountersState,
    SessionStateRecord,
    SkillBody,
    StickyDecision,
    state_to_json,
)
from prism_core.durable._state_codec import structure_exact, unstructure_known
from prism_core.durable._state_parse import parse_state
from prism_core.errors import AgentRunStateError


def structure_state(data: Any) -> AgentRunState | None:
    return structure_exact(data, AgentRunState)


def unstructure_state(state: AgentRunState) -> Any:
    return unstructure_known(state, _RECORDS)


SCOPE = DecisionScope(
    tool_name="deploy", effect_kind="write", identity="a/deploy", arguments_hash="h"
)


def _rich() -> AgentRunState:
    return AgentRunState(
        status="suspended",
        run_id="run-1",
        session_id="s-1",
        agent_id="agent",
        definition_revision="rev",
        fingerprint="f" * 64,
        leaf_id="entry_1",
        counters=RunCountersState(
            turns=3,
            provider_attempts=4,
            tool_rounds=2,
            tool_calls=5,
            usage=Usage(10, 20, 30, 1, 2, 3, cost=0.5, currency="USD"),
            stop_continuations=2,
        ),
        limits={"max_turns": 9, "max_cost": 1.5, "cost_currency": None},
        wall_deadline=1700000000.25,
        checkpoint_policy="every-turn",
        interrupt_before_tool=True,
        max_state_bytes=262144,
        interruption=Interruption(
            kind="tool_approval",
            reason="needs a human",
            tool_call_id="c1",
            guardrail="g",
            pending_decisions=(
                PendingDecision(
                    approval_id="ap1",
                    kind="elicitation",
                    reason="why",
                    guardrail="g",
                    elicitation_schema={"type": "object", "required": ["a"]},
                    scope=SCOPE,
                    tool_call_id="c1",
                ),
                PendingDecision(
                    approval_id="ap2",
                    kind="tool_approval",
                    approvers=2,
                    approved_by=("alice",),
                    pending_since=1700000000.0,
                    expires_at=1700014400.0,
                ),
            ),
        ),
        pending_calls=(
            PendingCall(
                tool_call_id="c1",
                name="deploy",
                arguments_hash="h",
                status="resolved",
                approval_id="ap1",
                reason="r",
                modified_arguments={"env": "prod", "n": [1, 2]},
                answer={"ok": True},
                resolution="completed",
                result={"nested": [1, {"x": None}], "f": 2.5},
            ),
            PendingCall(tool_call_id="c2", name="noop", arguments_hash="h2", status="pending"),
            PendingCall(
                tool_call_id="c3",
                name="pay",
                arguments_hash="h3",
                status="dispatched",
                dispatched_by="host-1:42",
            ),
        ),
        pending_input=(
            Message.user("more"),
            Message(
                "assistant",
                (
                    ThinkingContent("t", signature="s"),
                    TextContent("x"),
                    ToolCallContent("c9", "probe", {"step": 1}),
                ),
            ),
            Message(
                "tool",
                (
                    ToolResultContent("c9", "probe", "text"),
                    ToolResultContent("c8", "probe", None, ErrorInfo("boom", "E", True, 5.0)),
                ),
            ),
        ),
        sticky_decisions=(StickyDecision(scope=SCOPE, outcome="allow_for_run", reason="ok"),),
        loop_state=LoopStateRecord(name="plan", revision="1", snapshot={"step": [1, "two"]}),
        tool_names=("deploy", "noop"),
        session_state=SessionStateRecord(
            loaded_skill_names=("a",),
            loaded_skill_bodies=(SkillBody(name="a", instructions="do a"),),
            guardrail_packs={"packs": [{"id": "p"}], "state": {}},
        ),
        error=ErrorInfo("failed once", code="ERR", retryable=False, retry_after_ms=None),
        stop_reason="x",
        stop_detail="y",
        resolutions=(
            ResolutionRecord(tool_call_id="c1", outcome="completed", source="operator", at=1.5),
        ),
        audit=(
            DecisionRecord(
                approval_id="ap1",
                tool_call_id="c1",
                tool_name="deploy",
                outcome="allow_once",
                actor="ops",
                reason="looks right",
                arguments_hash="h",
                decided_at=1700000000.5,
                version=3,
            ),
            DecisionRecord(
                approval_id=None,
                tool_call_id="c2",
                tool_name=None,
                outcome="not_started",
                decided_at=1700000001.0,
                version=4,
            ),
        ),
        fingerprint_parts={"model": "0" * 16, "tool:deploy": "1" * 16},
        lease_ms=30000,
        lease_expires_at=1700000000000,
        approval_timeout_ms=14_400_000,
    )


def _minimal() -> AgentRunState:
    return AgentRunState(
        status="running",
        run_id="r",
        session_id="s",
        agent_id="a",
        definition_revision="d",
        fingerprint="f",
        leaf_id=None,
    )


def _same_types(left: Any, right: Any, path: str = "state") -> None:
    assert type(left) is type(right), path
    if isinstance(left, dict):
        assert list(left) == list(right), path
        for key in left:
            _same_types(left[key], right[key], f"{path}.{key}")
    elif isinstance(left, list | tuple):
        assert len(left) == len(right), path
        for index, (a, b) in enumerate(zip(left, right, strict=True)):
            _same_types(a, b, f"{path}[{index}]")
    else:
        assert left == right, path


@pytest.mark.parametrize("state", [_rich(), _minimal()], ids=["rich", "minimal"])
def test_unstructure_equals_the_converter(state: AgentRunState) -> None:
    """Same keys in the same order, lists for tuples, equal leaves of equal types."""
    _same_types(unstructure_state(state), converter().unstructure(state))
    expected = {
        k: v
        for k, v in converter().unstructure(state).items()
        if v is not None
        or k
        not in (
            "checkpoint_policy",
            "stop_reason",
            "stop_detail",
            "lease_ms",
            "lease_expires_at",
            "run_guardrails",
            "output_schema",
            "output",
            "fingerprint_parts",
            "started_by",
            "approval_timeout_ms",
            "parent_run_id",
        )
    }
    if not expected["audit"]:
        del expected["audit"]
    if not expected["audit_omitted"]:
        del expected["audit_omitted"]
    if not expected["notify"]:
        del expected["notify"]
    for key in ("stop_continuations", "output_retries"):
        if not getattr(state.counters, key):
            del expected["counters"][key]
    for call in expected["pending_calls"]:
        for key in ("child_run_id", "child_resume", "dispatched_by"):
            if call[key] is None:
                del call[key]
    for decision in (expected.get("interruption") or {}).get("pending_decisions", ()):
        for key in ("guardrail_rule", "approvers", "approved_by", "pending_since", "expires_at"):
            if decision[key] is None:
                del decision[key]
    session_state = expected.get("session_state")
    if session_state is not None and session_state["attention_sticky"] is None:
        del session_state["attention_sticky"]
    assert dumps(state_to_json(state)) == dumps(expected)


@pytest.mark.parametrize("state", [_rich(), _minimal()], ids=["rich", "minimal"])
def test_structure_equals_the_converter(state: AgentRunState) -> None:
    """The stored JSON comes back equal to the converter's result and to the state."""
    data = json.loads(dumps(state_to_json(state)))
    direct = structure_state(data)
    assert direct is not None
    expected = converter().structure(json.loads(dumps(state_to_json(state))), AgentRunState)
    assert direct == expected == state
    assert repr(direct) == repr(expected)
    assert parse_state(data, max_bytes=1 << 20) == state


def _data(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(dumps(state_to_json(_rich())))
    data.update(changes)
    return data


@pytest.mark.parametrize(
    "data",
    [
        _data(max_state_bytes=True),
        _data(wall_deadline="soon"),
        _data(tool_names="deploy"),
        _data(status="paused"),
        _data(interrupt_before_tool=1),
        _data(counters={"turns": 1.0}),
        _data(pending_calls=[{"tool_call_id": "c"}]),
        _data(pending_input=[{"role": "user", "content": "text"}]),
        "not an object",
    ],
)
def test_anything_inexact_is_declined(data: Any) -> None:
    """Values the converter would coerce or refuse are left to the converter."""
    assert structure_state(data) is None


def test_an_integer_for_a_float_is_taken_as_the_converter_takes_it() -> None:
    """JSON's one number type: ``wall_deadline: 5`` reads as ``5.0`` on both paths."""
    data = _data(wall_deadline=5)
    direct = structure_state(data)
    assert direct is not None
    assert type(direct.wall_deadline) is float
    assert direct == converter().structure(_data(wall_deadline=5), AgentRunState)


def test_extra_keys_are_ignored_like_the_converter() -> None:
    """Unknown keys in nested records change nothing, as with the converter."""
    counters = {"turns": 2, "provider_attempts": 2, "tool_rounds": 1, "tool_calls": 1, "x": 1}
    data = _data(counters=counters)
    direct = structure_state(data)
    assert direct == converter().structure(_data(counters=dict(counters)), AgentRunState)


def test_a_message_the_converter_would_coerce_leaves_the_state_to_it() -> None:
    """A stored message the direct decoder does not take goes through the converter; when
    that coerces anything (an integer error code becomes text), the whole state is left to
    the converter's path, whose round-trip check refuses it, naming the field."""
    tool = {
        "role": "tool",
        "content": [
            {
                "type": "tool_result",
                "tool_call_id": "c8",
                "name": "probe",
                "value": None,
                "error": {"message": "boom", "code": 5, "retryable": None, "retry_after_ms": None},
            }
        ],
    }
    data = _data(pending_input=[tool])
    assert structure_state(data) is None
    with pytest.raises(AgentRunStateError, match=r"pending_input\[0\].*code.*wrong type"):
        parse_state(_data(pending_input=[tool]), max_bytes=1 << 20)


@pytest.mark.parametrize(
    "cls",
    sorted(
        {
            *_RECORDS,
            ErrorInfo,
            Message,
            TextContent,
            ThinkingContent,
            ToolCallContent,
            ToolResultContent,
            Usage,
        },
        key=lambda cls: cls.__name__,
    ),
    ids=lambda cls: cls.__name__,
)
def test_field_types_are_the_evaluated_annotations(cls: type[Any]) -> None:
    """The field types the direct path reads (the common annotation forms built from their
    names, the rest evaluated) are exactly what ``typing.get_type_hints`` gives."""
    import typing

    import attrs

    from prism_core.durable._state_codec import field_types

    hints = typing.get_type_hints(cls)
    assert field_types(cls) == {field.name: hints[field.name] for field in attrs.fields(cls)}
