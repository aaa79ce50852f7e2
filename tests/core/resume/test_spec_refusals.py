"""Refusals that say what did not match: an unknown or foreign run, another session, another
agent, another configuration, a stale version, and a secure agent's per-run overrides."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import (
    AgentRunNotFoundError,
    AgentRunStateError,
    create_agent_run_lifecycle,
    create_secret_redactor,
    create_secure_agent,
    resume_agent_run,
)

from ..durable_support import REVISION, World, by_history
from ..helpers import echo_tool, text_turn, tool_turn

pytestmark = pytest.mark.anyio

TURNS = [tool_turn(("c1", "echo", {"n": 1})), text_turn("done")]
OWNER = {"tenant_id": "t1"}


async def suspended(world: World, **run_state: Any) -> Any:
    agent = world.agent(TURNS, tools=[echo_tool()])
    result = await agent.create_session(id="s1").run(
        "go", run_state=world.run_state(interrupt_before_tool=True, **run_state)
    )
    assert result.status == "suspended"
    return result


def approve(result: Any) -> dict[str, Any]:
    return {"expected_version": result.run_state.version, "decision": "approve"}


async def test_an_unknown_and_a_foreign_run_read_alike() -> None:
    """An unknown run id and another owner's run are both "No durable agent run <run id>"
    (AgentRunNotFoundError), and nothing is written."""
    world = World()
    result = await suspended(world, ownership=OWNER)
    agent = world.agent(TURNS, tools=[echo_tool()])
    saves = world.checkpoints.saves
    with pytest.raises(AgentRunNotFoundError) as unknown:
        await resume_agent_run(
            agent, {"run_id": "run_nope"}, approve(result), **world.resume_options(ownership=OWNER)
        )
    assert str(unknown.value) == "No durable agent run run_nope"
    with pytest.raises(AgentRunNotFoundError) as foreign:
        await resume_agent_run(
            agent,
            {"run_id": result.run_id, "session_id": "s1"},
            approve(result),
            **world.resume_options(ownership={"tenant_id": "t2"}),
        )
    assert str(foreign.value) == f"No durable agent run {result.run_id}"
    assert world.checkpoints.saves == saves


async def test_another_session_of_the_same_owner_is_a_session_mismatch() -> None:
    """The run exists in the caller's scope but under another session: "Agent run session
    mismatch", not an absent run."""
    world = World()
    result = await suspended(world)
    with pytest.raises(AgentRunStateError) as caught:
        await resume_agent_run(
            world.agent(TURNS, tools=[echo_tool()]),
            {"run_id": result.run_id, "session_id": "s2"},
            approve(result),
            **world.resume_options(),
        )
    assert str(caught.value) == "Agent run session mismatch"
    assert not isinstance(caught.value, AgentRunNotFoundError)


async def test_the_lifecycle_refuses_another_agent_and_another_session() -> None:
    """A lifecycle resume asking for another agent id is "Agent run capability mismatch"; one
    naming another session is "Agent run session mismatch"; resolve_agent is never called."""
    world = World()
    result = await suspended(world)
    resolved: list[str] = []

    def resolve(agent_id: str) -> Any:
        resolved.append(agent_id)
        return world.agent(TURNS, tools=[echo_tool()]), REVISION

    lifecycle = create_agent_run_lifecycle(checkpoints=world.checkpoints, resolve_agent=resolve)
    with pytest.raises(AgentRunStateError) as capability:
        await lifecycle.resume(
            {"run_id": result.run_id, "session_id": "s1"}, approve(result), agent_id="billing"
        )
    assert str(capability.value) == "Agent run capability mismatch"
    with pytest.raises(AgentRunStateError) as session:
        await lifecycle.resume({"run_id": result.run_id, "session_id": "s9"}, approve(result))
    assert str(session.value) == "Agent run session mismatch"
    assert resolved == []


async def test_a_resume_whose_configuration_differs_from_the_agents_is_refused() -> None:
    """An agent with run_state= resumed with another revision: "Agent durable run-state
    configuration mismatch on resume", naming what differs."""
    world = World()
    run_state = world.run_state(interrupt_before_tool=True)
    agent = world.agent(TURNS, tools=[echo_tool()], run_state=run_state)
    result = await agent.create_session(id="s1").run("go")
    with pytest.raises(AgentRunStateError) as caught:
        await resume_agent_run(
            agent,
            {"run_id": result.run_id, "session_id": "s1"},
            approve(result),
            checkpoints=world.checkpoints,
            definition_revision="2099-01-01.1",
        )
    message = str(caught.value)
    assert message.startswith("Agent durable run-state configuration mismatch on resume")
    assert "definition_revision" in message


async def test_a_stale_resume_says_which_status_it_needed() -> None:
    """A continue on a run that is not running: "Stale or non-running agent run resume"; a
    decision on a version that moved on: "Stale or non-suspended agent run resume"."""
    world = World()
    result = await suspended(world)
    agent = world.agent(TURNS, tools=[echo_tool()])
    ref = {"run_id": result.run_id, "session_id": "s1"}
    with pytest.raises(AgentRunStateError) as continuing:
        await resume_agent_run(
            agent,
            ref,
            {"expected_version": result.run_state.version, "decision": "continue"},
            **world.resume_options(),
        )
    assert str(continuing.value) == "Stale or non-running agent run resume"
    with pytest.raises(AgentRunStateError) as deciding:
        await resume_agent_run(
            agent,
            ref,
            {"expected_version": result.run_state.version + 1, "decision": "approve"},
            **world.resume_options(),
        )
    assert str(deciding.value) == "Stale or non-suspended agent run resume"


async def test_a_secure_agent_refuses_per_run_overrides() -> None:
    """run_state or redactor per run on a secure agent: AgentRunStateError "Secure agent
    defaults cannot be replaced per run", before any provider request."""
    world = World()
    agent = create_secure_agent(
        id="secure",
        model={"provider": "mock", "model": "m"},
        provider=by_history(TURNS),
        run_state=world.run_state(ownership=OWNER),
        redactor=create_secret_redactor(["s3cret"]),
        trust=lambda call, tool, ctx: None,
        permission=lambda call, tool, ctx: None,
        validate=lambda call, tool, ctx: None,
        limits={
            "max_turns": 5,
            "max_provider_attempts": 5,
            "max_tool_rounds": 5,
            "max_tool_calls": 5,
            "max_wall_time_ms": 60_000,
            "max_total_tokens": 10_000,
        },
        tools=[echo_tool(parameters={"type": "object"})],
        store=world.sessions,
    )
    for override in (
        {"redactor": create_secret_redactor(["x"])},
        {"run_state": world.run_state(ownership=OWNER)},
    ):
        with pytest.raises(AgentRunStateError) as caught:
            await agent.create_session().run("go", **override)
        assert str(caught.value) == "Secure agent defaults cannot be replaced per run"
    assert agent.provider.requests == []  # type: ignore[union-attr]
