"""Gates that must never open by accident: elicitations, approved input, arguments the approver
could not see, pack asks where a run cannot suspend, and the decision cap of one turn."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentDecisionError,
    AgentRunError,
    AgentRunStateError,
    Guardrail,
    GuardrailError,
    GuardrailRunError,
    ToolDefinition,
    create_secret_redactor,
    resume_agent_run,
    tool_call_content,
)
from prism_core.durable import arguments_hash

from ..durable_support import World
from ..helpers import echo_tool, scripted_agent, text_turn, tool_turn

ASK_SCHEMA = {"type": "object", "required": ["answer"]}


def ref(result: Any) -> dict[str, str]:
    """The run reference of ``result``."""
    return {"run_id": result.run_id, "session_id": result.session_id}


def ask_tool(log: list[Any]) -> ToolDefinition:
    """An elicitation tool that records it if it ever executes."""

    def execute(args: dict[str, Any], context: Any) -> str:
        log.append(("ask_user", args))
        return "executed"

    return ToolDefinition("ask_user", execute, elicitation=ASK_SCHEMA)


async def elicitation_suspended(world: World, log: list[Any]) -> Any:
    agent = world.agent(
        [tool_turn(("c1", "ask_user", {"q": "why?"})), text_turn("ok")], tools=[ask_tool(log)]
    )
    result = await agent.create_session(id="s1").run("go", run_state=world.run_state())
    assert result.status == "suspended"
    return result


# -- elicitations never execute ---------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    "entry",
    [
        {"outcome": "allow_once", "modified_arguments": {"q": "edited"}},
        {"outcome": "allow_for_run", "modified_arguments": {"q": "edited"}},
        {"outcome": "allow_once"},
    ],
    ids=["edit", "edit-for-run", "no-answer"],
)
async def test_an_elicitation_decision_that_would_run_the_tool_is_a_scope_error(
    entry: dict[str, Any],
) -> None:
    """Edited arguments (or an allow without an answer) on an elicitation never run the tool:
    AgentDecisionError ERR_PRISM_DECISION_SCOPE, and the store is not written."""
    world, log = World(), []
    result = await elicitation_suspended(world, log)
    (decision,) = result.interruption.pending_decisions
    before = await world.checkpoints.raw(result.run_id)
    saves = world.checkpoints.saves
    with pytest.raises(AgentDecisionError) as caught:
        await resume_agent_run(
            world.agent([text_turn("thanks")], tools=[ask_tool(log)]),
            ref(result),
            {"expected_version": 1, "decisions": [{"approval_id": decision.approval_id, **entry}]},
            **world.resume_options(),
        )
    assert caught.value.code == "ERR_PRISM_DECISION_SCOPE"
    assert "edited" not in str(caught.value)
    assert world.checkpoints.saves == saves
    assert await world.checkpoints.raw(result.run_id) == before
    assert log == []


@pytest.mark.anyio
async def test_approve_on_an_elicitation_is_refused_and_the_answer_still_works() -> None:
    """``approve`` cannot stand in for an answer; the run stays decidable with one."""
    world, log = World(), []
    result = await elicitation_suspended(world, log)
    resumed = world.agent([text_turn("thanks")], tools=[ask_tool(log)])
    with pytest.raises(AgentDecisionError) as caught:
        await resume_agent_run(
            resumed, ref(result), {"expected_version": 1, "decision": "approve"},
            **world.resume_options(),
        )  # fmt: skip
    assert caught.value.code == "ERR_PRISM_DECISION_SCOPE"
    (decision,) = result.interruption.pending_decisions
    answered = await resume_agent_run(
        resumed,
        ref(result),
        {
            "expected_version": 1,
            "decisions": [
                {
                    "approval_id": decision.approval_id,
                    "outcome": "allow_once",
                    "elicitation": {"answer": "yes"},
                }
            ],
        },
        **world.resume_options(),
    )
    assert answered.status == "succeeded"
    assert log == []


@pytest.mark.anyio
async def test_a_guardrail_ask_on_an_elicitation_tool_asks_for_an_answer() -> None:
    """An ask on an elicitation tool suspends as an elicitation (not an approval that would
    run the tool); a schema gives no reason of its own, so the decision carries the ask's:
    "Approval required by guardrail rule <name>: <reason>"."""
    world, log = World(), []
    asks = Guardrail("review", "tool_input", lambda ctx: {"action": "interrupt", "reason": "r"})
    agent = world.agent(
        [tool_turn(("c1", "ask_user", {"q": "why?"})), text_turn("ok")],
        tools=[ask_tool(log)],
        guardrails={"tool_input": [asks]},
    )
    result = await agent.create_session(id="s1").run("go", run_state=world.run_state())
    (decision,) = result.interruption.pending_decisions
    assert (decision.kind, decision.reason, decision.guardrail) == (
        "elicitation",
        "Approval required by guardrail rule review: r",
        "review",
    )
    assert decision.elicitation_schema == ASK_SCHEMA


# -- approved input is checked again ----------------------------------------------------------


class InputPolicy:
    """An input guard that asks, then (once the policy changes) blocks."""

    def __init__(self) -> None:
        self.action = "interrupt"
        self.seen = 0

    def __call__(self, ctx: Any) -> dict[str, Any]:
        self.seen += 1
        return {"action": self.action, "reason": "policy"}


@pytest.mark.anyio
async def test_approved_input_that_a_guard_now_blocks_fails_the_run_before_anything_runs() -> None:
    """After an approved input interrupt, the input guardrails run again on resume: a guard
    that now blocks fails the run with a GuardrailError cause; no tool runs, the input is not
    stored."""
    world, log = World(), []
    policy = InputPolicy()
    config: dict[str, Any] = {
        "tools": [echo_tool(log=log)],
        "guardrails": {"input": [Guardrail("review", "input", policy)]},
    }
    turns = [tool_turn(("c1", "echo", {"n": 1})), text_turn("done")]
    agent = world.agent(turns, **config)
    result = await agent.create_session(id="s1").run("deploy it", run_state=world.run_state())
    assert result.interruption.kind == "input_guardrail"
    policy.action = "block"
    with pytest.raises(GuardrailRunError) as caught:
        await resume_agent_run(
            world.agent(turns, **config),
            ref(result),
            {"expected_version": 1, "decision": "approve"},
            **world.resume_options(),
        )
    assert caught.value.code == "ERR_PRISM_GUARDRAIL_BLOCKED"
    assert isinstance(caught.value.__cause__, GuardrailError)
    assert caught.value.result.status == "failed"
    assert policy.seen == 2
    assert log == []
    entries = await world.sessions.list("s1")
    assert not any(e.message is not None and e.message.role == "user" for e in entries)


@pytest.mark.anyio
async def test_approved_input_that_a_guard_still_asks_about_runs_on() -> None:
    """The approval answers the ask: the same guard asking again does not suspend again."""
    world, log = World(), []
    policy = InputPolicy()
    config: dict[str, Any] = {
        "tools": [echo_tool(log=log)],
        "guardrails": {"input": [Guardrail("review", "input", policy)]},
    }
    turns = [tool_turn(("c1", "echo", {"n": 1})), text_turn("done")]
    result = (
        await world.agent(turns, **config)
        .create_session(id="s1")
        .run("deploy it", run_state=world.run_state())
    )
    resumed = await resume_agent_run(
        world.agent(turns, **config),
        ref(result),
        {"expected_version": 1, "decision": "approve"},
        **world.resume_options(),
    )
    assert resumed.status == "succeeded"
    assert policy.seen == 2
    assert log == [("echo", {"n": 1})]


# -- arguments the approver could not see -------------------------------------------------------


@pytest.mark.anyio
async def test_a_gated_call_with_a_redacted_secret_is_refused_before_anything_is_written() -> None:
    """The approver would see ``[REDACTED]``: the call is blocked for the model with
    ``unapprovable_arguments``, nothing is suspended, the tool never runs."""
    world, log = World(), []
    agent = world.agent(
        [tool_turn(("c1", "echo", {"password": "hunter2"})), text_turn("understood")],
        tools=[echo_tool(log=log)],
        redactor=create_secret_redactor(["hunter2"]),
    )
    session = agent.create_session(id="s1")
    sub = session.subscribe()
    result = await session.run("log in", run_state=world.run_state(interrupt_before_tool=True))
    events = [e async for e in sub]
    assert result.status == "succeeded"
    assert world.checkpoints.saves == 0
    assert log == []
    (blocked,) = [e for e in events if e.type == "tool_execution_blocked"]
    assert blocked.reason == "unapprovable_arguments"
    assert blocked.error.code == "unapprovable_arguments"
    assert "hunter2" not in repr(events)


@pytest.mark.anyio
async def test_a_gated_call_rewritten_by_middleware_is_refused() -> None:
    """A ``tool_call`` middleware edit would run arguments the approver never saw."""

    class Rewrite:
        def tool_call(self, call: Any, ctx: Any) -> Any:
            return tool_call_content(call.id, call.name, {"n": 99})

    world, log = World(), []
    agent = world.agent(
        [tool_turn(("c1", "echo", {"n": 1})), text_turn("ok")],
        tools=[echo_tool(log=log)],
        middleware=[Rewrite()],
    )
    session = agent.create_session(id="s1")
    result = await session.run("x", run_state=world.run_state(interrupt_before_tool=True))
    assert result.status == "succeeded"
    assert world.checkpoints.saves == 0
    assert log == []


@pytest.mark.anyio
async def test_the_suspension_hashes_the_arguments_it_stores_and_shows() -> None:
    """A gated call without secrets suspends with the hash of the stored arguments and is
    approvable (the redactor is on, the arguments hold nothing it redacts)."""
    world, log = World(), []
    config: dict[str, Any] = {
        "tools": [echo_tool(log=log)],
        "redactor": create_secret_redactor(["hunter2"]),
    }
    turns = [tool_turn(("c1", "echo", {"n": 1})), text_turn("done")]
    result = (
        await world.agent(turns, **config)
        .create_session(id="s1")
        .run("x", run_state=world.run_state(interrupt_before_tool=True))
    )
    (decision,) = result.interruption.pending_decisions
    assert decision.scope.arguments_hash == arguments_hash({"n": 1})
    resumed = await resume_agent_run(
        world.agent(turns, **config),
        ref(result),
        {"expected_version": 1, "decision": "approve"},
        **world.resume_options(),
    )
    assert resumed.status == "succeeded"
    assert log == [("echo", {"n": 1})]


@pytest.mark.anyio
async def test_deny_always_decides_even_when_a_pending_call_no_longer_matches() -> None:
    """A pending call whose recorded hash no longer matches the session cannot be approved,
    but ``deny`` still ends the run: a suspended run is always decidable."""
    world, log = World(), []
    turns = [tool_turn(("c1", "echo", {"n": 1})), text_turn("done")]
    result = (
        await world.agent(turns, tools=[echo_tool(log=log)])
        .create_session(id="s1")
        .run("x", run_state=world.run_state(interrupt_before_tool=True))
    )
    store = world.checkpoints.inner
    record = await store.load(AGENT_RUN_NAMESPACE, result.run_id)
    value = dict(record.value)
    value["pending_calls"] = [dict(value["pending_calls"][0], arguments_hash="0" * 64)]
    await store.save(AGENT_RUN_NAMESPACE, result.run_id, value, version=2, expected_version=1)
    agent = world.agent(turns, tools=[echo_tool(log=log)])
    with pytest.raises(AgentRunStateError, match="no longer matches"):
        await resume_agent_run(
            agent, ref(result), {"expected_version": 2, "decision": "approve"},
            **world.resume_options(),
        )  # fmt: skip
    denied = await resume_agent_run(
        agent, ref(result), {"expected_version": 2, "decision": "deny"}, **world.resume_options()
    )
    assert denied.status == "denied"
    assert log == []


# -- a pack's ask where the run cannot suspend -------------------------------------------------

ASK_PACK = [{"id": "house", "rules": [{"id": "shell", "pattern": "rm ", "action": "ask"}]}]


@pytest.mark.anyio
async def test_a_pack_ask_outside_a_durable_run_is_recorded_as_the_block_it_becomes() -> None:
    """The emitted ``guardrail_decision`` says ``block``: the record that was acted on."""
    log: list[Any] = []
    agent = scripted_agent(
        [tool_turn(("c1", "echo", {"cmd": "rm -rf /"})), text_turn("ok")],
        tools=[echo_tool(log=log)],
    )
    session = agent.create_session(guardrail_packs=ASK_PACK)
    sub = session.subscribe()
    result = await session.run("x")
    events = [e async for e in sub]
    assert result.status == "succeeded"
    assert log == []
    (decision,) = [e for e in events if e.type == "guardrail_decision"]
    assert decision.record.action == "block"
    assert decision.record.guardrail == "pack:house/shell"
    (blocked,) = [e for e in events if e.type == "tool_execution_blocked"]
    assert blocked.error.message.startswith("Blocked by guardrail rule pack:house/shell")


@pytest.mark.anyio
async def test_a_host_guard_named_like_a_pack_is_not_a_pack() -> None:
    """A host guard called ``pack:house/shell`` that interrupts, even with pack-like metadata,
    is refused as an unavailable interrupt, not quietly turned into a block."""
    log: list[Any] = []

    def impostor(ctx: Any) -> dict[str, Any]:
        return {"action": "interrupt", "metadata": {"pack": "house", "rule": "shell"}}

    agent = scripted_agent(
        [tool_turn(("c1", "echo", {"cmd": "ls"})), text_turn("ok")],
        tools=[echo_tool(log=log)],
        guardrails={"tool_input": [Guardrail("pack:house/shell", "tool_input", impostor)]},
    )
    with pytest.raises(AgentRunError) as caught:
        await agent.create_session().run("x")
    assert caught.value.code == "ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE"
    assert log == []


# -- the decision cap is checked before anything of the round runs -----------------------------


@pytest.mark.anyio
async def test_more_gated_calls_than_a_suspension_holds_run_nothing_of_the_round() -> None:
    """33 elicitations after an ungated call: ERR_PRISM_DECISION_LIMIT (an AgentDecisionError
    cause), the ungated call never ran, no checkpoint written."""
    world, log = World(), []
    calls = [("c0", "echo", {"n": 0})] + [(f"a{i}", "ask_user", {"i": i}) for i in range(33)]
    agent = world.agent(
        [tool_turn(*calls), text_turn("ok")], tools=[echo_tool(log=log), ask_tool(log)]
    )
    with pytest.raises(AgentRunError) as caught:
        await agent.create_session(id="s1").run("go", run_state=world.run_state())
    assert caught.value.code == "ERR_PRISM_DECISION_LIMIT"
    assert isinstance(caught.value.__cause__, AgentDecisionError)
    assert caught.value.__cause__.code == "ERR_PRISM_DECISION_LIMIT"
    assert log == []
    assert world.checkpoints.saves == 0


@pytest.mark.anyio
async def test_thirty_two_gated_calls_still_suspend_together() -> None:
    """At the cap, the round suspends as one batch after its ungated call ran."""
    world, log = World(), []
    calls = [("c0", "echo", {"n": 0})] + [(f"a{i}", "ask_user", {"i": i}) for i in range(32)]
    agent = world.agent(
        [tool_turn(*calls), text_turn("ok")], tools=[echo_tool(log=log), ask_tool(log)]
    )
    result = await agent.create_session(id="s1").run("go", run_state=world.run_state())
    assert result.status == "suspended"
    assert len(result.interruption.pending_decisions) == 32
    assert log == [("echo", {"n": 0})]
