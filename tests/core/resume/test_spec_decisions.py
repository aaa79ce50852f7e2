"""Decisions and approvals as the spec words them: reasons, rejected results, ask rules, edits,
sticky scopes after an edit, elicitation functions, and the caps."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import (
    AgentDecisionError,
    ToolDefinition,
    resume_agent_run,
)

from ..durable_support import World
from ..helpers import echo_tool, text_turn, tool_turn

pytestmark = pytest.mark.anyio

ONE_CALL = [tool_turn(("c1", "echo", {"n": 1})), text_turn("done")]
TWO_CALLS = [tool_turn(("c1", "echo", {"n": 1}), ("c2", "echo", {"n": 2})), text_turn("done")]


def ref(result: Any) -> dict[str, str]:
    return {"run_id": result.run_id, "session_id": result.session_id}


async def suspend(world: World, turns: Any, **kw: Any) -> tuple[Any, Any, Any]:
    """A run on a fresh session that suspends before its tools."""
    tools = kw.pop("tools", [echo_tool()])
    packs = kw.pop("guardrail_packs", None)
    agent = world.agent(turns, tools=tools, **kw)
    session = agent.create_session(id="s1", guardrail_packs=packs)
    run_state = world.run_state(interrupt_before_tool=packs is None, persist_session_state=True)
    result = await session.run("go", run_state=run_state)
    assert result.status == "suspended"
    return agent, session, result


def decide(result: Any, *outcomes: dict[str, Any]) -> dict[str, Any]:
    decisions = result.interruption.pending_decisions
    return {
        "expected_version": result.run_state.version,
        "decisions": [
            {"approval_id": decision.approval_id, **outcome}
            for decision, outcome in zip(decisions, outcomes, strict=False)
        ],
    }


def tool_results(session_entries: list[Any]) -> dict[str, Any]:
    """Each stored tool result by call id."""
    found: dict[str, Any] = {}
    for entry in session_entries:
        if entry.message is None or entry.message.role != "tool":
            continue
        for block in entry.message.content:
            found[block.tool_call_id] = block
    return found


async def test_an_interruption_says_what_needs_approval() -> None:
    """One gated call: "Tool side effect requires approval" on the interruption and its
    decision; two: "2 tool side effects require approval", kind tool_approval, no single
    call named."""
    _, _, one = await suspend(World(), ONE_CALL)
    assert one.interruption.reason == "Tool side effect requires approval"
    assert one.interruption.tool_call_id == "c1"
    assert one.interruption.pending_decisions[0].reason == "Tool side effect requires approval"
    _, _, two = await suspend(World(), TWO_CALLS)
    interruption = two.interruption
    assert (interruption.kind, interruption.reason, interruption.tool_call_id) == (
        "tool_approval",
        "2 tool side effects require approval",
        None,
    )
    assert [d.reason for d in interruption.pending_decisions] == [
        "Tool side effect requires approval"
    ] * 2


async def test_a_partial_batch_says_how_many_requests_remain() -> None:
    """Deciding one of two re-suspends with "1 approval request(s) remain"."""
    world = World()
    agent, _, result = await suspend(world, TWO_CALLS)
    partial = await resume_agent_run(
        agent, ref(result), decide(result, {"outcome": "allow_once"}), **world.resume_options()
    )
    assert partial.status == "suspended"
    assert partial.interruption.reason == "1 approval request(s) remain"
    assert partial.interruption.tool_call_id == "c2"


async def test_a_rejected_call_answers_with_the_reason_or_approval_rejected() -> None:
    """reject_once with a reason: the call's result error is exactly that reason; without
    one: "Approval rejected"."""
    world, log = World(), []
    agent, session, result = await suspend(world, TWO_CALLS, tools=[echo_tool(log=log)])
    done = await resume_agent_run(
        agent,
        ref(result),
        decide(
            result,
            {"outcome": "reject_once", "reason": "not on a Friday"},
            {"outcome": "reject_once"},
        ),
        **world.resume_options(),
    )
    assert done.status == "succeeded"
    assert log == []
    results = tool_results(await session.store.list("s1"))
    assert (results["c1"].error.code, results["c1"].error.message) == (
        "approval_rejected",
        "not on a Friday",
    )
    assert results["c2"].error.message == "Approval rejected"


async def test_reject_for_run_answers_later_calls_with_its_reason_or_rejected_for_this_run() -> (
    None
):
    """A reject_for_run without a reason: the decided call reads "Approval rejected", a later
    call of the same scope "Rejected for this run", without a new suspension."""
    world, log = World(), []
    turns = [
        tool_turn(("c1", "echo", {"n": 1})),
        tool_turn(("c2", "echo", {"n": 1})),
        text_turn("done"),
    ]
    agent, session, result = await suspend(world, turns, tools=[echo_tool(log=log)])
    done = await resume_agent_run(
        agent, ref(result), decide(result, {"outcome": "reject_for_run"}), **world.resume_options()
    )
    assert done.status == "succeeded"
    results = tool_results(await session.store.list("s1"))
    assert results["c1"].error.message == "Approval rejected"
    assert results["c2"].error.message == "Rejected for this run"
    assert log == []

    world = World()
    agent, session, result = await suspend(world, turns)
    await resume_agent_run(
        agent,
        ref(result),
        decide(result, {"outcome": "reject_for_run", "reason": "frozen"}),
        **world.resume_options(),
    )
    results = tool_results(await session.store.list("s1"))
    assert (results["c1"].error.message, results["c2"].error.message) == ("frozen", "frozen")


ASK_PACK = {
    "id": "ops",
    "rules": [
        {
            "id": "ask-deploy",
            "tool": "deploy",
            "pattern": "prod",
            "action": "ask",
            "reason": "production deploy",
        }
    ],
}


def deploy_tool(log: list[Any]) -> ToolDefinition:
    return ToolDefinition(
        "deploy",
        lambda args, ctx: log.append(args) or "deployed",
        parameters={
            "type": "object",
            "properties": {"env": {"type": "string"}},
            "required": ["env"],
        },
    )


async def test_an_ask_rule_names_itself_and_its_decision_event_names_the_call() -> None:
    """The pending reason is "Approval required by guardrail rule pack:ops/ask-deploy:
    production deploy", with guardrail_rule; the ask's guardrail_decision names the call."""
    world, log = World(), []
    turns = [tool_turn(("c1", "deploy", {"env": "prod"})), text_turn("done")]
    agent = world.agent(turns, tools=[deploy_tool(log)])
    session = agent.create_session(id="s1", guardrail_packs=[ASK_PACK])
    events = [
        e
        async for e in session.stream("ship", run_state=world.run_state(persist_session_state=True))
    ]
    suspended = events[-1]
    assert suspended.type == "agent_suspended"
    (decision,) = suspended.interruption.pending_decisions
    assert decision.reason == (
        "Approval required by guardrail rule pack:ops/ask-deploy: production deploy"
    )
    assert decision.guardrail == "pack:ops/ask-deploy"
    assert dict(decision.guardrail_rule) == {"pack": "ops", "rule": "ask-deploy"}
    asked = [e for e in events if e.type == "guardrail_decision" and e.record.action == "interrupt"]
    assert [(e.tool_call_id, e.tool_name) for e in asked] == [("c1", "deploy")]
    assert log == []


async def test_a_refused_edit_names_the_rule_never_the_value() -> None:
    """An edit into the ask rule's pattern is refused: "Modified arguments blocked by
    guardrail rule pack:ops/ask-deploy: production deploy", not echoing the edited value; an
    edit failing the schema: "Modified arguments failed schema validation"."""
    world, log = World(), []
    turns = [tool_turn(("c1", "deploy", {"env": "prod"})), text_turn("done")]
    agent = world.agent(turns, tools=[deploy_tool(log)])
    session = agent.create_session(id="s1", guardrail_packs=[ASK_PACK])
    result = await session.run("ship", run_state=world.run_state(persist_session_state=True))
    edit = {"outcome": "allow_once", "modified_arguments": {"env": "prod-secret-cluster-9"}}
    with pytest.raises(AgentDecisionError) as caught:
        await resume_agent_run(agent, ref(result), decide(result, edit), **world.resume_options())
    message = str(caught.value)
    assert message == (
        "Modified arguments blocked by guardrail rule pack:ops/ask-deploy: production deploy"
    )
    assert "prod-secret-cluster-9" not in message
    assert caught.value.code == "ERR_PRISM_DECISION_INVALID"
    bad = {"outcome": "allow_once", "modified_arguments": {"env": 42}}
    with pytest.raises(AgentDecisionError) as caught:
        await resume_agent_run(agent, ref(result), decide(result, bad), **world.resume_options())
    assert str(caught.value) == "Modified arguments failed schema validation"
    assert "42" not in str(caught.value)
    assert log == []


async def test_allow_for_run_after_an_edit_sticks_by_tool_not_by_the_old_arguments() -> None:
    """allow_for_run with modified arguments: the edited call runs once as edited, and a later
    call of the same tool with other arguments does not suspend again."""
    world, log = World(), []
    turns = [
        tool_turn(("c1", "echo", {"n": 1})),
        tool_turn(("c2", "echo", {"n": 7})),
        text_turn("done"),
    ]
    agent, _, result = await suspend(world, turns, tools=[echo_tool(log=log)])
    done = await resume_agent_run(
        agent,
        ref(result),
        decide(result, {"outcome": "allow_for_run", "modified_arguments": {"n": 2}}),
        **world.resume_options(),
    )
    assert done.status == "succeeded"
    assert log == [("echo", {"n": 2}), ("echo", {"n": 7})]


def confirm(log: list[Any]) -> ToolDefinition:
    """An elicitation tool whose question depends on the call's arguments."""

    def elicitation(args: dict[str, Any]) -> Any:
        if args.get("broken"):
            raise ValueError("cannot phrase the question")

        def validate(answer: Any) -> None:
            if answer["amount"] > args["limit"]:
                raise ValueError("over the limit")

        return {
            "schema": {
                "type": "object",
                "properties": {"amount": {"type": "integer"}},
                "required": ["amount"],
            },
            "reason": f"How much may be refunded (at most {args['limit']})?",
            "validate": validate,
        }

    return ToolDefinition(
        "refund", lambda args, ctx: log.append(args) or "refunded", elicitation=elicitation
    )


async def test_an_elicitation_function_asks_per_call_and_checks_the_answer() -> None:
    """The function's schema and reason become the pending decision's; its validate refuses
    an answer the schema allows; a fitting answer is the call's result (the tool never
    runs)."""
    world, log = World(), []
    turns = [tool_turn(("c1", "refund", {"limit": 50})), text_turn("done")]
    agent = world.agent(turns, tools=[confirm(log)])
    result = await agent.create_session(id="s1").run("go", run_state=world.run_state())
    (decision,) = result.interruption.pending_decisions
    assert (decision.kind, decision.reason) == (
        "elicitation",
        "How much may be refunded (at most 50)?",
    )
    assert decision.elicitation_schema["required"] == ["amount"]
    too_much = {"outcome": "allow_once", "elicitation": {"amount": 80}}
    with pytest.raises(AgentDecisionError):
        await resume_agent_run(
            agent, ref(result), decide(result, too_much), **world.resume_options()
        )
    ok = {"outcome": "allow_once", "elicitation": {"amount": 20}}
    done = await resume_agent_run(agent, ref(result), decide(result, ok), **world.resume_options())
    assert done.status == "succeeded"
    assert log == []


async def test_an_elicitation_function_that_raises_falls_back_to_a_tool_approval() -> None:
    """A raising elicitation function makes the call an ordinary tool approval; approving it
    runs the tool."""
    world, log = World(), []
    turns = [tool_turn(("c1", "refund", {"limit": 5, "broken": True})), text_turn("done")]
    agent = world.agent(turns, tools=[confirm(log)])
    result = await agent.create_session(id="s1").run("go", run_state=world.run_state())
    (decision,) = result.interruption.pending_decisions
    assert (decision.kind, decision.reason, decision.elicitation_schema) == (
        "tool_approval",
        "Tool side effect requires approval",
        None,
    )
    done = await resume_agent_run(
        agent,
        ref(result),
        {"expected_version": result.run_state.version, "decision": "approve"},
        **world.resume_options(),
    )
    assert done.status == "succeeded"
    assert log == [{"limit": 5, "broken": True}]


async def test_a_sixty_fifth_sticky_decision_is_refused() -> None:
    """Sticky decisions are capped at 64 per run: a batch that would add the 65th fails with
    ERR_PRISM_DECISION_LIMIT, "Sticky decisions exceed 64 per run", and writes nothing."""
    world = World()
    turns = [
        tool_turn(*[(f"a{i}", "echo", {"i": i}) for i in range(32)]),
        tool_turn(*[(f"b{i}", "echo", {"i": 100 + i}) for i in range(32)]),
        tool_turn(("c0", "echo", {"i": 999})),
        text_turn("done"),
    ]
    agent, _, result = await suspend(world, turns, limits={"max_tool_calls": 100})
    for _ in range(2):
        everything = decide(result, *[{"outcome": "allow_for_run"}] * 32)
        result = await resume_agent_run(agent, ref(result), everything, **world.resume_options())
        assert result.status == "suspended"
    saves = world.checkpoints.saves
    with pytest.raises(AgentDecisionError) as caught:
        await resume_agent_run(
            agent,
            ref(result),
            decide(result, {"outcome": "allow_for_run"}),
            **world.resume_options(),
        )
    assert caught.value.code == "ERR_PRISM_DECISION_LIMIT"
    assert str(caught.value) == "Sticky decisions exceed 64 per run"
    assert world.checkpoints.saves == saves
