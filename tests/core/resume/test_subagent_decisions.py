"""Nested decisions: a child run's suspension suspends its durable parent with one nested
pending decision per child decision; deciding it through every resume entry point resumes
the child, then the parent; ``deny`` runs nothing of the child; refusals write nothing."""

from __future__ import annotations

import re
from typing import Any

import pytest

from prism_core import (
    AgentDecisionError,
    AgentRunStateError,
    SubAgentEvent,
    create_agent_run_lifecycle,
    load_agent_run_state,
    nested_approval_id,
    resume_agent_run,
    resume_agent_run_stream,
)

from ..durable_support import REVISION
from ..helpers import text_turn, tool_turn
from ..subagent_support import ASK, Team, child_of, delegate_turn


def asking_team(**kw: Any) -> Team:
    """A team whose child asks a human before its ``lookup``."""
    team = Team(**kw)
    team.child_config = {"guardrails": [ASK], **team.child_config}
    return team


async def suspend(team: Team, **run: Any) -> Any:
    result = (
        await team.lead()
        .create_session(id="s1")
        .run("what is x?", run_state=team.world.run_state(**run))
    )
    assert result.status == "suspended"
    return result


def ref(result: Any) -> dict[str, str]:
    return {"run_id": result.run_id, "session_id": "s1"}


@pytest.mark.anyio
async def test_a_child_suspension_suspends_the_parent_with_nested_decisions() -> None:
    """One nested pending decision per child decision: ``approval_id`` is
    ``nested_approval_id(parent, child approval)`` ("sub_" + 64 hex), kind and scope the
    child's, held on the parent's call; the child is suspended on the same store; nothing of
    the child's tool ran."""
    team = asking_team()
    result = await suspend(team)
    child = await team.child_status(result.run_id)
    assert child is not None
    assert child.state.status == "suspended"
    assert child.state.session_id != "s1"
    [mine] = child.state.interruption.pending_decisions
    [nested] = result.interruption.pending_decisions
    assert re.fullmatch(r"sub_[0-9a-f]{64}", nested.approval_id)
    assert nested.approval_id == nested_approval_id(result.run_id, mine.approval_id)
    assert (nested.kind, nested.scope, nested.reason) == (mine.kind, mine.scope, mine.reason)
    assert nested.scope is not None
    assert nested.scope.identity == "researcher/lookup"
    assert nested.tool_call_id == "p1"
    parent = await load_agent_run_state(team.world.checkpoints, ref(result))
    assert parent is not None
    [pending] = parent.state.pending_calls
    assert (pending.tool_call_id, pending.child_run_id) == ("p1", child_of(result.run_id))
    assert team.log == []


def test_nested_approval_ids_are_deterministic_and_distinct() -> None:
    first = nested_approval_id("run_a", "appr_1")
    assert first == nested_approval_id("run_a", "appr_1")
    assert first != nested_approval_id("run_b", "appr_1")
    assert first != nested_approval_id("run_a", "appr_2")


async def _approve_with_function(team: Team, result: Any, decision: dict[str, Any]) -> Any:
    return await resume_agent_run(
        team.lead(),
        ref(result),
        {"expected_version": result.run_state.version, **decision},
        checkpoints=team.world.checkpoints,
        definition_revision=REVISION,
    )


async def _approve_with_stream(team: Team, result: Any, decision: dict[str, Any]) -> Any:
    stream = resume_agent_run_stream(
        team.lead(),
        ref(result),
        {"expected_version": result.run_state.version, **decision},
        checkpoints=team.world.checkpoints,
        definition_revision=REVISION,
    )
    events = [event async for event in stream]
    team.streamed = events  # type: ignore[attr-defined]
    return stream.result


def _lifecycle(team: Team) -> Any:
    return create_agent_run_lifecycle(
        checkpoints=team.world.checkpoints,
        resolve_agent=lambda agent_id: (team.lead(), REVISION),
    )


async def _approve_with_lifecycle(team: Team, result: Any, decision: dict[str, Any]) -> Any:
    return await _lifecycle(team).resume(
        ref(result), {"expected_version": result.run_state.version, **decision}
    )


async def _approve_with_lifecycle_stream(team: Team, result: Any, decision: dict[str, Any]) -> Any:
    stream = _lifecycle(team).resume_stream(
        ref(result), {"expected_version": result.run_state.version, **decision}
    )
    events = [event async for event in stream]
    team.streamed = events  # type: ignore[attr-defined]
    return stream.result


ENTRY_POINTS = {
    "resume_agent_run": _approve_with_function,
    "resume_agent_run_stream": _approve_with_stream,
    "lifecycle.resume": _approve_with_lifecycle,
    "lifecycle.resume_stream": _approve_with_lifecycle_stream,
}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
@pytest.mark.parametrize("how", ["approve", "batch"])
@pytest.mark.anyio
async def test_the_nested_decision_resolves_through_every_entry_point(entry: str, how: str) -> None:
    """Deciding the nested decision resumes the child with it (its tool runs once, in the
    child run), then the parent, which finishes with the child's answer; both records end
    succeeded."""
    team = asking_team()
    result = await suspend(team)
    [nested] = result.interruption.pending_decisions
    decision: dict[str, Any] = (
        {"decision": "approve"}
        if how == "approve"
        else {"decisions": [{"approval_id": nested.approval_id, "outcome": "allow_once"}]}
    )
    resumed = await ENTRY_POINTS[entry](team, result, decision)
    assert resumed is not None
    assert resumed.status == "succeeded"
    assert resumed.text == "the answer is 42"
    assert team.log == [("lookup", {"q": "x"}, child_of(result.run_id))]
    child = await team.child_status(result.run_id)
    assert child is not None
    assert child.state.status == "succeeded"
    parent = await load_agent_run_state(team.world.checkpoints, ref(result))
    assert parent is not None
    assert parent.state.status == "succeeded"
    if entry.endswith("stream"):
        wrapped = [e for e in team.streamed if isinstance(e, SubAgentEvent)]  # type: ignore[attr-defined]
        inner = [e.event.type for e in wrapped]
        assert inner[:2] == ["agent_started", "agent_resumed"]
        assert "tool_execution_finished" in inner
        assert {e.child_run_id for e in wrapped} == {child_of(result.run_id)}


@pytest.mark.anyio
async def test_on_session_subscribers_see_the_resumed_child() -> None:
    """The parent's ``on_session`` seam: a subscription made there receives the child's
    resumed events wrapped, before the parent's own end."""
    team = asking_team()
    result = await suspend(team)
    subscriptions: list[Any] = []
    await resume_agent_run(
        team.lead(),
        ref(result),
        {"expected_version": result.run_state.version, "decision": "approve"},
        checkpoints=team.world.checkpoints,
        definition_revision=REVISION,
        on_session=lambda session: subscriptions.append(session.subscribe()),
    )
    [subscription] = subscriptions
    seen = [event async for event in subscription]
    inner = [e.event.type for e in seen if isinstance(e, SubAgentEvent)]
    assert inner[:2] == ["agent_started", "agent_resumed"]
    assert seen[-1].type == "agent_finished"
    assert seen[-1].run_id == result.run_id


@pytest.mark.anyio
async def test_a_rejected_nested_decision_reaches_the_child_as_a_rejection() -> None:
    """``reject_once``: the child's call is answered as rejected (its tool never runs), the
    child goes on to its answer and so does the parent."""
    team = asking_team()
    result = await suspend(team)
    [nested] = result.interruption.pending_decisions
    resumed = await _approve_with_function(
        team,
        result,
        {
            "decisions": [
                {"approval_id": nested.approval_id, "outcome": "reject_once", "reason": "no"}
            ]
        },
    )
    assert resumed.status == "succeeded"
    assert team.log == []
    child = await team.child_status(result.run_id)
    assert child is not None
    assert child.state.status == "succeeded"


@pytest.mark.anyio
async def test_deny_runs_nothing_of_the_child() -> None:
    """``deny`` of the parent: the child is denied first (its tool never runs), then the
    parent; a subscriber sees the child's ``agent_denied`` wrapped, then the parent's."""
    team = asking_team()
    result = await suspend(team)
    subscriptions: list[Any] = []
    denied = await resume_agent_run(
        team.lead(),
        ref(result),
        {"expected_version": result.run_state.version, "decision": "deny"},
        checkpoints=team.world.checkpoints,
        definition_revision=REVISION,
        on_session=lambda session: subscriptions.append(session.subscribe()),
    )
    assert denied.status == "denied"
    child = await team.child_status(result.run_id)
    assert child is not None
    assert child.state.status == "denied"
    assert team.log == []
    seen = [event async for event in subscriptions[0]]
    assert [e.type for e in seen] == ["subagent_event", "agent_denied"]
    assert seen[0].event.type == "agent_denied"
    assert seen[0].child_run_id == child_of(result.run_id)


@pytest.mark.anyio
async def test_an_invalid_nested_decision_is_refused_before_anything_is_written() -> None:
    """Edited arguments the child's tool schema refuses, an unknown approval id: refused with
    ``AgentDecisionError``, both records byte for byte as they were, nothing ran."""
    from ..subagent_support import lookup_tool

    team = asking_team()
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    team.child_config["tools"] = [lookup_tool(team.log, parameters=schema)]
    result = await suspend(team)
    [nested] = result.interruption.pending_decisions
    before = (
        await team.world.checkpoints.raw(result.run_id),
        await team.world.checkpoints.raw(child_of(result.run_id)),
    )
    bad_edit = {
        "approval_id": nested.approval_id,
        "outcome": "allow_once",
        "modified_arguments": {"q": 7},
    }
    for decisions in ([bad_edit], [{"approval_id": "sub_" + "0" * 64, "outcome": "allow_once"}]):
        with pytest.raises(AgentDecisionError):
            await _approve_with_function(team, result, {"decisions": decisions})
    after = (
        await team.world.checkpoints.raw(result.run_id),
        await team.world.checkpoints.raw(child_of(result.run_id)),
    )
    assert after == before
    assert team.log == []


@pytest.mark.anyio
async def test_an_edit_the_child_accepts_runs_with_the_edited_arguments() -> None:
    team = asking_team()
    result = await suspend(team)
    [nested] = result.interruption.pending_decisions
    edit = {
        "approval_id": nested.approval_id,
        "outcome": "allow_once",
        "modified_arguments": {"q": "y"},
    }
    resumed = await _approve_with_function(team, result, {"decisions": [edit]})
    assert resumed.status == "succeeded"
    assert team.log == [("lookup", {"q": "y"}, child_of(result.run_id))]


@pytest.mark.anyio
async def test_part_of_one_childs_decisions_is_refused() -> None:
    """A child holding two decisions: deciding one of them is refused
    (``ERR_PRISM_DECISION_SCOPE``), nothing written; deciding both resumes it."""
    team = asking_team(
        child_turns=[
            tool_turn(("k1", "lookup", {"q": "a"}), ("k2", "lookup", {"q": "b"})),
            text_turn("a and b"),
        ]
    )
    result = await suspend(team)
    first, second = result.interruption.pending_decisions
    before = await team.world.checkpoints.raw(result.run_id)
    with pytest.raises(AgentDecisionError) as caught:
        await _approve_with_function(
            team,
            result,
            {"decisions": [{"approval_id": first.approval_id, "outcome": "allow_once"}]},
        )
    assert caught.value.code == "ERR_PRISM_DECISION_SCOPE"
    assert await team.world.checkpoints.raw(result.run_id) == before
    both = [
        {"approval_id": first.approval_id, "outcome": "allow_once"},
        {"approval_id": second.approval_id, "outcome": "reject_once"},
    ]
    resumed = await _approve_with_function(team, result, {"decisions": both})
    assert resumed.status == "succeeded"
    assert [entry[1] for entry in team.log] == [{"q": "a"}]


@pytest.mark.anyio
async def test_a_child_decided_in_a_partial_batch_waits_in_the_parents_checkpoint() -> None:
    """Two sub-agent calls in one round, each child asking: deciding one child re-suspends
    the parent with the other's decision; the first child has not run yet (it resumes with
    the parent); deciding the second then runs both, once each."""
    team = asking_team(
        lead_turns=[
            tool_turn(("p1", "researcher", {"input": "a"}), ("p2", "researcher", {"input": "b"})),
            text_turn("both done"),
        ]
    )
    result = await suspend(team)
    one, two = result.interruption.pending_decisions
    assert (one.tool_call_id, two.tool_call_id) == ("p1", "p2")
    partial = await _approve_with_function(
        team, result, {"decisions": [{"approval_id": one.approval_id, "outcome": "allow_once"}]}
    )
    assert partial.status == "suspended"
    assert [d.approval_id for d in partial.interruption.pending_decisions] == [two.approval_id]
    assert team.log == []
    parent = await load_agent_run_state(team.world.checkpoints, ref(result))
    assert parent is not None
    decided = {c.tool_call_id: c for c in parent.state.pending_calls}
    assert decided["p1"].status == "approved"
    assert decided["p1"].child_resume is not None
    assert decided["p2"].status == "pending"
    final = await resume_agent_run(
        team.lead(),
        ref(result),
        {
            "expected_version": partial.run_state.version,
            "decisions": [{"approval_id": two.approval_id, "outcome": "allow_once"}],
        },
        checkpoints=team.world.checkpoints,
        definition_revision=REVISION,
    )
    assert final.status == "succeeded"
    runs = sorted(entry[2] for entry in team.log)
    assert runs == sorted([child_of(result.run_id, "p1"), child_of(result.run_id, "p2")])


@pytest.mark.anyio
async def test_a_grandchild_decision_reaches_the_top_and_resolves_down() -> None:
    """lead → middle → researcher (asking): the lead's decision id nests twice; approving it
    at the top resumes the researcher, then the middle agent, then the lead."""
    from prism_core import create_agent

    from ..durable_support import by_history
    from ..helpers import MODEL

    team = asking_team()
    middle = create_agent(
        id="middle",
        model=MODEL,
        provider=by_history([delegate_turn("m1", "find x"), text_turn("middle: 42")]),
        tools=[team.child().as_tool()],
    )
    lead = team.world.agent(
        [tool_turn(("p1", "middle", {"input": "ask"})), text_turn("lead: 42")],
        id="lead",
        tools=[middle.as_tool()],
    )
    result = await lead.create_session(id="s1").run("go", run_state=team.world.run_state())
    assert result.status == "suspended"
    middle_run = child_of(result.run_id)
    leaf_run = child_of(middle_run, "m1")
    leaf = await load_agent_run_state(team.world.checkpoints, {"run_id": leaf_run})
    assert leaf is not None
    [own] = leaf.state.interruption.pending_decisions
    [top] = result.interruption.pending_decisions
    expected = nested_approval_id(result.run_id, nested_approval_id(middle_run, own.approval_id))
    assert top.approval_id == expected
    assert top.scope == own.scope
    resumed = await resume_agent_run(
        lead,
        ref(result),
        {"expected_version": result.run_state.version, "decision": "approve"},
        checkpoints=team.world.checkpoints,
        definition_revision=REVISION,
    )
    assert resumed.text == "lead: 42"
    assert team.log == [("lookup", {"q": "x"}, leaf_run)]
    for run_id in (middle_run, leaf_run):
        status = await load_agent_run_state(team.world.checkpoints, {"run_id": run_id})
        assert status is not None
        assert status.state.status == "succeeded"


@pytest.mark.anyio
async def test_a_stale_parent_decision_is_refused() -> None:
    """A second approval at the old version is refused and runs nothing again."""
    team = asking_team()
    result = await suspend(team)
    await _approve_with_function(team, result, {"decision": "approve"})
    with pytest.raises(AgentRunStateError):
        await _approve_with_function(team, result, {"decision": "approve"})
    assert len(team.log) == 1


@pytest.mark.anyio
async def test_the_child_lives_in_the_parents_owner_scope() -> None:
    """A parent under an owner scope: its child's record is in the same scope (absent to
    anyone else), and the nested decision resolves through a resume in that scope."""
    team = asking_team()
    owner = {"tenant": "acme"}
    result = await suspend(team, ownership=owner)
    child_ref = {"run_id": child_of(result.run_id)}
    assert await load_agent_run_state(team.world.checkpoints, child_ref) is None
    assert await load_agent_run_state(team.world.checkpoints, child_ref, ownership=owner)
    resumed = await resume_agent_run(
        team.lead(),
        ref(result),
        {"expected_version": result.run_state.version, "decision": "approve"},
        checkpoints=team.world.checkpoints,
        definition_revision=REVISION,
        ownership=owner,
    )
    assert resumed.status == "succeeded"
    child = await load_agent_run_state(team.world.checkpoints, child_ref, ownership=owner)
    assert child is not None
    assert child.state.status == "succeeded"


def _allow_all(context: Any) -> Any:
    return {"action": "allow"}


@pytest.mark.parametrize("decision", ["approve", "deny"])
@pytest.mark.anyio
async def test_a_parent_with_tool_guards_decides_its_child(decision: str) -> None:
    """The parent's tool guards ride the child's checkpoint as the child's own run guards;
    resuming or denying the child through the parent hands them over again."""
    from prism_core import Guardrail

    team = asking_team(lead_config={"guardrails": [Guardrail("audit", "tool_input", _allow_all)]})
    result = await suspend(team)
    child = await team.child_status(result.run_id)
    assert child is not None
    assert [row.name for row in child.state.run_guardrails] == ["audit"]
    resumed = await _approve_with_function(team, result, {"decision": decision})
    expected = "succeeded" if decision == "approve" else "denied"
    assert resumed.status == expected
    child = await team.child_status(result.run_id)
    assert child is not None
    assert child.state.status == expected
    assert len(team.log) == (1 if decision == "approve" else 0)


@pytest.mark.anyio
async def test_a_childs_input_guardrail_decision_is_nested_too() -> None:
    """The child's input guard asks about the task: the parent holds an ``input_guardrail``
    decision (no scope) on its call; approving it lets the child take the task."""
    from prism_core import Guardrail

    def ask_about_input(context: Any) -> Any:
        return {"action": "interrupt", "reason": "a human reads every task first"}

    team = Team(
        child_turns=[text_turn("x is 42")],
        child_config={"guardrails": [Guardrail("read-task", "input", ask_about_input)]},
    )
    result = await suspend(team)
    [nested] = result.interruption.pending_decisions
    assert nested.kind == "input_guardrail"
    assert nested.scope is None
    assert nested.tool_call_id == "p1"
    assert nested.reason == "a human reads every task first"
    resumed = await _approve_with_function(team, result, {"decision": "approve"})
    assert resumed.status == "succeeded"
    assert resumed.text == "the answer is 42"


@pytest.mark.anyio
async def test_a_childs_elicitation_is_answered_at_the_parent() -> None:
    """The child's elicitation tool: the parent's nested decision carries its schema; an
    answer given at the parent is the child's tool result."""
    from prism_core import ToolDefinition

    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    asked = ToolDefinition("ask_city", lambda args, context: None, elicitation=schema)
    team = Team(
        child_turns=[tool_turn(("k1", "ask_city", {})), text_turn("the city is known")],
        child_config={"tools": [asked]},
    )
    result = await suspend(team)
    [nested] = result.interruption.pending_decisions
    assert nested.kind == "elicitation"
    assert nested.elicitation_schema == schema
    with pytest.raises(AgentDecisionError):
        await _approve_with_function(team, result, {"decision": "approve"})
    answer = {
        "approval_id": nested.approval_id,
        "outcome": "allow_once",
        "elicitation": {"city": "Oslo"},
    }
    resumed = await _approve_with_function(team, result, {"decisions": [answer]})
    assert resumed.status == "succeeded"
    child = await team.child_status(result.run_id)
    assert child is not None
    assert child.state.status == "succeeded"
    from prism_core.durable import child_session_id

    entries = await team.world.sessions.list(child_session_id(result.run_id, "p1"))
    values = [
        block.value
        for entry in entries
        if entry.message is not None and entry.message.role == "tool"
        for block in entry.message.content
    ]
    assert values == [{"city": "Oslo"}]
