"""Durable interruption: suspension, decisions, resume, write counts and event sequences."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentDecisionError,
    AgentLoopStateError,
    AgentRunError,
    AgentRunStateError,
    Guardrail,
    RunStateOptions,
    ToolDefinition,
    agent_fingerprint,
    create_secret_redactor,
    load_agent_run_state,
    resume_agent_run,
    resume_agent_run_stream,
)
from prism_core.durable import arguments_hash

from ..durable_support import REVISION, World
from ..helpers import echo_tool, text_turn, tool_turn, types

TWO_CALLS = [tool_turn(("c1", "echo", {"n": 1}), ("c2", "echo", {"n": 2})), text_turn("done")]


async def suspended(
    world: World, turns: Any = TWO_CALLS, log: list[Any] | None = None, **run_state: Any
) -> tuple[Any, Any]:
    """Run until the first suspension; return (agent, result)."""
    run_state.setdefault("interrupt_before_tool", True)
    agent = world.agent(turns, tools=[echo_tool(log=log)])
    result = await agent.create_session(id="s1").run(
        "investigate", run_state=world.run_state(**run_state)
    )
    assert result.status == "suspended"
    return agent, result


def ref(result: Any) -> dict[str, str]:
    """The run reference of ``result``."""
    return {"run_id": result.run_id, "session_id": result.session_id}


def ids(result: Any) -> list[str]:
    """The approval ids of a suspended result."""
    return [d.approval_id for d in result.interruption.pending_decisions]


@pytest.mark.anyio
async def test_one_suspension_per_turn_with_one_decision_per_gated_call() -> None:
    """Two gated calls of one turn make one suspension, one write, and no side effect."""
    world, log = World(), []
    _agent, result = await suspended(world, log=log)
    assert log == []
    assert world.checkpoints.saves == 1
    assert result.run_state.version == 1
    decisions = result.interruption.pending_decisions
    assert [d.kind for d in decisions] == ["tool_approval", "tool_approval"]
    assert [d.scope.tool_name for d in decisions] == ["echo", "echo"]
    assert decisions[0].scope.arguments_hash == arguments_hash({"n": 1})
    assert decisions[0].scope.identity == "investigator/echo"
    record = await world.checkpoints.load(AGENT_RUN_NAMESPACE, result.run_id)
    assert record is not None
    value = record.value
    assert value["schema_version"] == 1
    assert value["status"] == "suspended"
    assert value["leaf_id"] == result.leaf_id
    assert "checkpoint_policy" not in value
    assert '"n":1' not in str(value).replace(" ", "")  # arguments never ride the decisions
    assert {
        "counters",
        "interruption",
        "pending_calls",
        "sticky_decisions",
        "loop_state",
        "tool_names",
        "session_state",
        "agent_id",
        "session_id",
        "run_id",
    } <= set(value)


@pytest.mark.anyio
async def test_ungated_calls_still_run_in_a_suspended_turn() -> None:
    """Only gated calls wait: an elicitation tool suspends while a plain tool runs."""
    world, log = World(), []
    ask = ToolDefinition(
        "ask_user", lambda a, c: "unused", elicitation={"type": "object", "required": ["answer"]}
    )
    agent = world.agent(
        [tool_turn(("c1", "echo", {"n": 1}), ("c2", "ask_user", {"q": "why?"})), text_turn("ok")],
        tools=[echo_tool(log=log), ask],
    )
    result = await agent.create_session(id="s1").run("go", run_state=world.run_state())
    assert result.status == "suspended"
    assert log == [("echo", {"n": 1})]
    (decision,) = result.interruption.pending_decisions
    assert decision.kind == "elicitation"
    assert decision.elicitation_schema == {"type": "object", "required": ["answer"]}
    answered = await resume_agent_run(
        world.agent([text_turn("thanks")], tools=[echo_tool(log=log), ask]),
        ref(result),
        {
            "expected_version": 1,
            "decisions": [
                {
                    "approval_id": decision.approval_id,
                    "outcome": "allow_once",
                    "elicitation": {"answer": "load"},
                }
            ],
        },
        **world.resume_options(),
    )
    assert answered.status == "succeeded"
    assert log == [("echo", {"n": 1})]


@pytest.mark.anyio
async def test_approve_resume_event_sequence_and_write_counts() -> None:
    """Approve: agent_started, agent_resumed, the run, agent_finished; writes = claim + one
    dispatched mark per approved call + terminal."""
    world, log = World(), []
    _, result = await suspended(world, log=log)
    world.checkpoints.saves = 0
    other = world.agent(TWO_CALLS, tools=[echo_tool(log=log)])
    stream = resume_agent_run_stream(
        other,
        ref(result),
        {"expected_version": 1, "decision": "approve"},
        **world.resume_options(),
    )
    events = [e async for e in stream]
    kinds = types(events)
    assert kinds[:2] == ["agent_started", "agent_resumed"]
    assert kinds[-1] == "agent_finished"
    assert kinds.count("tool_execution_started") == 2
    assert events[1].version == 2
    assert log == [("echo", {"n": 1}), ("echo", {"n": 2})]
    assert world.checkpoints.saves == 1 + 2 + 1
    status = await load_agent_run_state(world.checkpoints, ref(result))
    assert status is not None
    assert status.state.status == "succeeded"
    assert status.version == 5
    assert status.state.sticky_decisions == ()
    assert stream.result is not None
    assert stream.result.text == "done"


@pytest.mark.anyio
async def test_deny_writes_terminal_denied_and_emits_only_agent_denied() -> None:
    """deny: one write, status denied, only agent_denied, no tool."""
    world, log = World(), []
    _, result = await suspended(world, log=log)
    world.checkpoints.saves = 0
    stream = resume_agent_run_stream(
        world.agent(TWO_CALLS, tools=[echo_tool(log=log)]),
        ref(result),
        {"expected_version": 1, "decision": "deny"},
        **world.resume_options(),
    )
    assert types([e async for e in stream]) == ["agent_denied"]
    assert stream.result is not None
    assert stream.result.status == "denied"
    assert world.checkpoints.saves == 1
    assert log == []
    status = await load_agent_run_state(world.checkpoints, ref(result))
    assert status is not None
    assert status.state.status == "denied"


@pytest.mark.anyio
async def test_batch_outcomes_reject_and_sticky_allow() -> None:
    """reject_once answers with approval_rejected; allow_for_run lets later identical calls
    through without a new suspension."""
    world, log = World(), []
    same = ("c1", "echo", {"n": 1})
    turns = [
        tool_turn(same, ("c2", "echo", {"n": 2})),
        tool_turn(("c3", "echo", {"n": 1})),
        text_turn("done"),
    ]
    _, result = await suspended(world, turns=turns, log=log)
    first, second = ids(result)
    agent = world.agent(turns, tools=[echo_tool(log=log)])
    session_events: list[Any] = []

    def watch(session: Any) -> None:
        session_events.append(session.subscribe())

    done = await resume_agent_run(
        agent,
        ref(result),
        {
            "expected_version": 1,
            "decisions": [
                {"approval_id": first, "outcome": "allow_for_run"},
                {"approval_id": second, "outcome": "reject_once", "reason": "not that one"},
            ],
        },
        on_session=watch,
        **world.resume_options(),
    )
    assert done.status == "succeeded"
    assert log == [("echo", {"n": 1}), ("echo", {"n": 1})]
    events = [e async for e in session_events[0]]
    rejected = [e for e in events if e.type == "tool_execution_blocked"]
    assert [(e.reason, e.error.code) for e in rejected] == [
        ("approval_rejected", "approval_rejected")
    ]
    assert "not that one" in rejected[0].error.message
    assert "agent_suspended" not in types(events)


@pytest.mark.anyio
async def test_reject_for_run_blocks_later_identical_calls() -> None:
    """reject_for_run answers later calls of the same scope without asking again."""
    world, log = World(), []
    turns = [
        tool_turn(("c1", "echo", {"n": 1})),
        tool_turn(("c2", "echo", {"n": 1})),
        text_turn("done"),
    ]
    _, result = await suspended(world, turns=turns, log=log)
    (only,) = ids(result)
    done = await resume_agent_run(
        world.agent(turns, tools=[echo_tool(log=log)]),
        ref(result),
        {"expected_version": 1, "decisions": [{"approval_id": only, "outcome": "reject_for_run"}]},
        **world.resume_options(),
    )
    assert done.status == "succeeded"
    assert log == []


@pytest.mark.anyio
async def test_partial_batch_resuspends_with_the_rest_at_the_next_version() -> None:
    """Deciding a strict subset persists it and re-suspends with the remainder."""
    world, log = World(), []
    _, result = await suspended(world, log=log)
    first, second = ids(result)
    agent = world.agent(TWO_CALLS, tools=[echo_tool(log=log)])
    partial = await resume_agent_run(
        agent,
        ref(result),
        {"expected_version": 1, "decisions": [{"approval_id": first, "outcome": "allow_once"}]},
        **world.resume_options(),
    )
    assert partial.status == "suspended"
    assert partial.run_state.version == 2
    assert [d.approval_id for d in partial.interruption.pending_decisions] == [second]
    assert log == []
    done = await resume_agent_run(
        agent,
        ref(result),
        {"expected_version": 2, "decisions": [{"approval_id": second, "outcome": "allow_once"}]},
        **world.resume_options(),
    )
    assert done.status == "succeeded"
    assert log == [("echo", {"n": 1}), ("echo", {"n": 2})]


@pytest.mark.anyio
async def test_modified_arguments_are_revalidated_and_rehashed() -> None:
    """An edit runs with the new arguments; an edit the validator or a guardrail refuses fails
    closed with ERR_PRISM_DECISION_INVALID and writes nothing."""
    world, log = World(), []
    turns = [tool_turn(("c1", "echo", {"n": 1})), text_turn("done")]

    def validate(call: Any, tool: Any, context: Any) -> str | None:
        return "n must be below 100" if call.arguments.get("n", 0) >= 100 else None

    no_sevens = Guardrail(
        "no-sevens",
        "tool_input",
        lambda ctx: {"action": "block" if ctx.value.arguments.get("n") == 7 else "allow"},
    )
    config = {
        "tools": [echo_tool(log=log)],
        "validate": validate,
        "guardrails": {"tool_input": [no_sevens]},
    }
    agent = world.agent(turns, **config)
    result = await agent.create_session(id="s1").run(
        "go", run_state=world.run_state(interrupt_before_tool=True)
    )
    (only,) = ids(result)
    before = await world.checkpoints.raw(result.run_id)
    for bad, message, detail in (
        ({"n": 100}, "Modified arguments failed schema validation", "below 100"),
        ({"n": 7}, "Modified arguments blocked by guardrail rule no-sevens", "decisions[0]"),
    ):
        with pytest.raises(AgentDecisionError) as info:
            await resume_agent_run(
                world.agent(turns, **config),
                ref(result),
                {
                    "expected_version": 1,
                    "decisions": [
                        {"approval_id": only, "outcome": "allow_once", "modified_arguments": bad}
                    ],
                },
                **world.resume_options(),
            )
        assert info.value.code == "ERR_PRISM_DECISION_INVALID"
        # The message is the spec's; which decision and what the check found ride the notes.
        assert str(info.value) == message
        assert any(detail in note for note in info.value.__notes__)
        assert await world.checkpoints.raw(result.run_id) == before
    done = await resume_agent_run(
        world.agent(turns, **config),
        ref(result),
        {
            "expected_version": 1,
            "decisions": [
                {"approval_id": only, "outcome": "allow_once", "modified_arguments": {"n": 5}}
            ],
        },
        **world.resume_options(),
    )
    assert done.status == "succeeded"
    assert log == [("echo", {"n": 5})]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("resume", "code"),
    [
        (
            {
                "expected_version": 1,
                "decisions": [{"approval_id": "appr_nope", "outcome": "allow_once"}],
            },
            "ERR_PRISM_DECISION_UNKNOWN",
        ),
        ({"expected_version": 1, "decision": "sideways"}, "ERR_PRISM_DECISION_INVALID"),
        ({"expected_version": 0, "decision": "approve"}, "ERR_PRISM_DECISION_INVALID"),
        (None, "ERR_PRISM_DECISION_INVALID"),
    ],
)
async def test_bad_decisions_fail_closed_with_no_write(resume: Any, code: str) -> None:
    """Malformed or unknown decisions raise AgentDecisionError and leave the record as it was."""
    world, log = World(), []
    _, result = await suspended(world, log=log)
    before = await world.checkpoints.raw(result.run_id)
    world.checkpoints.saves = world.checkpoints.loads = 0
    with pytest.raises(AgentDecisionError) as info:
        await resume_agent_run(
            world.agent(TWO_CALLS, tools=[echo_tool(log=log)]),
            ref(result),
            resume,
            **world.resume_options(),
        )
    assert info.value.code == code
    assert "appr_nope" not in str(info.value)
    assert world.checkpoints.saves == 0
    if code != "ERR_PRISM_DECISION_UNKNOWN":
        assert world.checkpoints.loads == 0  # shape errors never touch the store
    assert await world.checkpoints.raw(result.run_id) == before
    assert log == []


@pytest.mark.anyio
async def test_scope_misuse_is_refused() -> None:
    """An elicitation payload on a tool-approval decision is a scope error."""
    world = World()
    _, result = await suspended(world)
    first, _second = ids(result)
    with pytest.raises(AgentDecisionError) as info:
        await resume_agent_run(
            world.agent(TWO_CALLS, tools=[echo_tool()]),
            ref(result),
            {
                "expected_version": 1,
                "decisions": [
                    {"approval_id": first, "outcome": "allow_once", "elicitation": {"a": 1}}
                ],
            },
            **world.resume_options(),
        )
    assert info.value.code == "ERR_PRISM_DECISION_SCOPE"


@pytest.mark.anyio
async def test_stale_version_mismatch_and_ownership_refusals_write_nothing() -> None:
    """Stale version, wrong revision, changed agent and foreign owner all refuse unchanged."""
    world, log = World(), []
    _, result = await suspended(world, log=log, ownership={"tenant_id": "t1"})
    before = await world.checkpoints.raw(result.run_id)
    world.checkpoints.saves = 0
    good = {
        "checkpoints": world.checkpoints,
        "definition_revision": REVISION,
        "ownership": {"tenant_id": "t1"},
    }
    cases = [
        (
            world.agent(TWO_CALLS, tools=[echo_tool()]),
            {"expected_version": 2, "decision": "approve"},
            good,
            "Stale or non-suspended agent run resume",
        ),
        (
            world.agent(TWO_CALLS, tools=[echo_tool()]),
            {"expected_version": 1, "decision": "continue"},
            good,
            "Stale or non-running",
        ),
        (
            world.agent(TWO_CALLS, tools=[echo_tool()]),
            {"expected_version": 1, "decision": "approve"},
            {**good, "definition_revision": "other"},
            "fingerprint mismatch",
        ),
        (
            world.agent(TWO_CALLS, tools=[echo_tool()], instructions="changed"),
            {"expected_version": 1, "decision": "approve"},
            good,
            "fingerprint mismatch",
        ),
        (
            world.agent(TWO_CALLS, tools=[echo_tool()]),
            {"expected_version": 1, "decision": "approve"},
            {**good, "ownership": {"tenant_id": "t2"}},
            f"No durable agent run {result.run_id}",
        ),
    ]
    for agent, resume, options, message in cases:
        with pytest.raises(AgentRunStateError, match=message):
            await resume_agent_run(agent, ref(result), resume, **options)
    assert world.checkpoints.saves == 0
    assert await world.checkpoints.raw(result.run_id) == before
    assert log == []


@pytest.mark.anyio
async def test_fingerprint_covers_each_component() -> None:
    """Each fingerprinted part changes the hash; the revision does too."""
    world = World()
    base: dict[str, Any] = {"tools": [echo_tool()], "instructions": "i"}
    reference = agent_fingerprint(world.agent([], **base), REVISION)
    variants = [
        {**base, "instructions": "j"},
        {**base, "model": {"provider": "mock", "model": "other"}},
        {**base, "system_prompt": ["layer"]},
        {**base, "tools": [echo_tool(parameters={"type": "object"})]},
        {**base, "tools": [echo_tool(effect="write")]},
        {**base, "tools": [echo_tool(exclusive=True)]},
        {**base, "guardrails": [Guardrail("g", "input", lambda c: None, revision="2")]},
        {**base, "id": "other-agent"},
    ]
    for variant in variants:
        assert agent_fingerprint(world.agent([], **variant), REVISION) != reference
    assert agent_fingerprint(world.agent([], **base), "next") != reference
    assert agent_fingerprint(world.agent([], **base), REVISION) == reference


@pytest.mark.anyio
async def test_dispatched_call_is_never_replayed() -> None:
    """A crash after the dispatched mark leaves the call in doubt; a continue refuses."""
    world = World()
    _, result = await suspended(world)

    class Crash(Exception):
        pass

    def crashing(args: dict[str, Any], context: Any) -> Any:
        raise SystemExit("worker died mid side effect")

    agent = world.agent(TWO_CALLS, tools=[ToolDefinition("echo", crashing)])
    with pytest.raises(SystemExit):
        await resume_agent_run(
            agent,
            ref(result),
            {"expected_version": 1, "decision": "approve"},
            **world.resume_options(),
        )
    status = await load_agent_run_state(world.checkpoints, ref(result))
    assert status is not None
    assert next(c.status for c in status.state.pending_calls) == "dispatched"
    with pytest.raises(AgentRunStateError) as info:
        await resume_agent_run(
            world.agent(TWO_CALLS, tools=[echo_tool()]),
            ref(result),
            {"expected_version": status.version, "decision": "continue"},
            **world.resume_options(),
        )
    assert info.value.code == "ERR_PRISM_TOOL_IN_DOUBT"
    assert info.value.in_doubt == (next(c.tool_call_id for c in status.state.pending_calls),)


@pytest.mark.anyio
async def test_input_guardrail_interrupt_suspends_before_the_input_is_stored() -> None:
    """An input interrupt in a durable run suspends; approve appends the input and runs."""
    world = World()
    gate = Guardrail("review", "input", lambda ctx: {"action": "interrupt", "reason": "check"})
    agent = world.agent([text_turn("ok")], guardrails={"input": [gate]})
    session = agent.create_session(id="s1")
    result = await session.run("deploy to prod", run_state=world.run_state())
    assert result.status == "suspended"
    assert result.interruption.kind == "input_guardrail"
    assert await session.entries() == []
    done = await resume_agent_run(
        world.agent([text_turn("ok")], guardrails={"input": [gate]}),
        ref(result),
        {"expected_version": 1, "decision": "approve"},
        **world.resume_options(),
    )
    assert done.status == "succeeded"
    texts = [e.message.text for e in await world.sessions.list("s1") if e.message]
    assert texts == ["deploy to prod", "ok"]


@pytest.mark.anyio
async def test_durable_run_prerequisites_fail_before_provider_work() -> None:
    """No agent id, a blank revision, per-run overrides, or a loop without snapshot fail early."""
    world = World()
    provider_agent = world.agent([text_turn("x")], id=None, name=None)
    with pytest.raises(AgentRunStateError, match="id or name"):
        await provider_agent.create_session().run("x", run_state=world.run_state())
    agent = world.agent([text_turn("x")])
    with pytest.raises(AgentRunStateError, match="non-blank"):
        await agent.create_session().run("x", run_state=RunStateOptions(world.checkpoints, "  "))
    with pytest.raises(AgentRunStateError, match="cannot override model"):
        await agent.create_session().run(
            "x", run_state=world.run_state(), model={"provider": "mock", "model": "b"}
        )

    class Stateless:
        name = "stateless"
        revision = "1"

        async def run(self, context: Any) -> Any:
            async for event in context.run_turns():
                yield event

    with pytest.raises(AgentLoopStateError) as info:
        await (
            world.agent([text_turn("x")], loop=Stateless())
            .create_session()
            .run("x", run_state=world.run_state())
        )
    assert info.value.code == "ERR_PRISM_LOOP_NOT_DURABLE"
    for bad in (
        {"checkpoint_policy": "sometimes"},
        {"max_state_bytes": 0},
        {"max_state_bytes": 1048577},
    ):
        with pytest.raises(AgentRunStateError):
            await agent.create_session().run(
                "x",
                run_state={
                    "checkpoints": world.checkpoints,
                    "definition_revision": REVISION,
                    **bad,
                },
            )
    assert agent.provider.requests == []  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_oversized_state_is_refused_not_truncated() -> None:
    """A state over max_state_bytes fails the run; nothing is written."""
    world = World()
    agent = world.agent(TWO_CALLS, tools=[echo_tool()])
    with pytest.raises(AgentRunError) as info:
        await agent.create_session(id="s1").run(
            "x", run_state=world.run_state(interrupt_before_tool=True, max_state_bytes=200)
        )
    assert info.value.code == "ERR_PRISM_AGENT_RUN_STATE"
    assert world.checkpoints.saves == 0


@pytest.mark.anyio
async def test_redaction_at_the_checkpoint_boundary() -> None:
    """A secret in the suspended input never reaches the stored state."""
    world = World()
    gate = Guardrail("review", "input", lambda ctx: {"action": "interrupt"})
    agent = world.agent(
        [text_turn("ok")],
        guardrails={"input": [gate]},
        redactor=create_secret_redactor(["hunter2"]),
    )
    result = await agent.create_session(id="s1").run(
        "password hunter2", run_state=world.run_state()
    )
    raw = await world.checkpoints.raw(result.run_id)
    assert raw is not None
    assert b"hunter2" not in raw
    assert b"[REDACTED]" in raw


@pytest.mark.anyio
async def test_clean_decision_policy_run_writes_nothing() -> None:
    """A durable run that never suspends writes no checkpoint under the default policy."""
    world = World()
    agent = world.agent([tool_turn(("c1", "echo", {})), text_turn("done")], tools=[echo_tool()])
    result = await agent.create_session(id="s1").run("x", run_state=world.run_state())
    assert result.status == "succeeded"
    assert world.checkpoints.saves == 0
