"""Hosting an agent (``Agent.hosted``): one rule for what the host owns and what the agent keeps.

The host owns the stores, the revision, the checkpoint policy, the ownership, the fencing token
and the lease it gives; the agent keeps the rest of its ``run_state``. A hosted agent with a
``run_state`` of its own runs and resumes without a configuration drift (the run passes no
``run_state`` of its own)."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import (
    AgentRunStateError,
    RunStateOptions,
    StorePair,
    create_memory_checkpoint_store,
    create_memory_session_store,
    load_agent_run_state,
    resume_agent_run,
)

from ..durable_support import World
from ..helpers import text_turn, tool_turn
from ..test_identity import refund_tool

SCRIPT = [tool_turn(("c1", "refund", {"order": "A-3", "eur": 120})), text_turn("refunded")]


def _pair(world: World) -> StorePair:
    return StorePair(world.checkpoints, world.sessions)


def test_the_host_owns_where_and_for_whom_the_agent_keeps_how() -> None:
    """An agent whose ``run_state`` names another store, revision, policy and fencing token,
    hosted on the pair: the host's store, revision, policy and owner, no fencing token; the
    agent's own bounds, session-state choice and ``interrupt_before_tool`` stay; the agent
    itself is unchanged."""
    world = World()
    elsewhere = create_memory_checkpoint_store()
    own = RunStateOptions(
        elsewhere,
        "agent-rev",
        checkpoint_policy="decision",
        interrupt_before_tool=True,
        persist_session_state=True,
        max_state_bytes=100_000,
        fencing_token=7,
        lease_ms=5_000,
    )
    agent = world.agent(SCRIPT, run_state=own)
    hosted = agent.hosted(_pair(world), definition_revision="host-rev", ownership={"t": "acme"})
    state = hosted.run_state
    assert isinstance(state, RunStateOptions)
    assert state.checkpoints is world.checkpoints
    assert hosted.store is world.sessions
    assert (state.definition_revision, state.checkpoint_policy) == ("host-rev", "every-turn")
    assert (state.ownership, state.fencing_token) == ({"t": "acme"}, None)
    assert (state.interrupt_before_tool, state.persist_session_state) == (True, True)
    assert (state.max_state_bytes, state.lease_ms) == (100_000, 5_000)
    assert agent.run_state is own
    leased = agent.hosted(
        _pair(world), definition_revision="r", ownership={"t": "acme"}, lease_ms=900
    )
    assert leased.run_state.lease_ms == 900


def test_a_mapping_run_state_needs_no_store_and_a_host_may_only_tighten_interruption() -> None:
    """A mapping without the host-owned keys is the agent's part; ``interrupt_before_tool``
    turned on by the host holds, the agent's own ``True`` is never turned off."""
    world = World()
    agent = world.agent(SCRIPT, run_state={"include_skill_bodies": True})
    gated = agent.hosted(_pair(world), definition_revision="r", interrupt_before_tool=True)
    assert gated.run_state.interrupt_before_tool is True
    assert gated.run_state.include_skill_bodies is True
    strict = world.agent(SCRIPT, run_state={"interrupt_before_tool": True})
    assert strict.hosted(_pair(world), definition_revision="r").run_state.interrupt_before_tool
    plain = world.agent(SCRIPT).hosted(_pair(world), definition_revision="r")
    assert plain.run_state.interrupt_before_tool is False


def test_the_hosts_metadata_is_added_to_the_agents() -> None:
    """Fixed maps merge (the host's win a shared key); with a callable, the merge is made at
    each write."""
    world = World()
    agent = world.agent(SCRIPT, run_state={"checkpoint_metadata": {"team": "billing", "k": "a"}})
    fixed = agent.hosted(_pair(world), definition_revision="r", checkpoint_metadata={"k": "h"})
    assert fixed.run_state.checkpoint_metadata == {"team": "billing", "k": "h"}
    calls: list[int] = []

    def dynamic() -> dict[str, str]:
        calls.append(1)
        return {"k": "agent", "n": str(len(calls))}

    moving = world.agent(SCRIPT, run_state={"checkpoint_metadata": dynamic})
    merged = moving.hosted(_pair(world), definition_revision="r", checkpoint_metadata={"k": "h"})
    source = merged.run_state.checkpoint_metadata
    assert callable(source)
    assert source() == {"k": "h", "n": "1"}


def test_an_agent_that_names_its_owner_is_served_for_that_owner_only() -> None:
    """Hosting it for another owner (or for the unscoped tenant) is refused with its own code;
    for its owner it is served."""
    world = World()
    agent = world.agent(SCRIPT, run_state={"ownership": {"tenant_id": "acme"}})
    served = agent.hosted(_pair(world), definition_revision="r", ownership={"tenant_id": "acme"})
    assert served.run_state.ownership == {"tenant_id": "acme"}
    for other in ({"tenant_id": "globex"}, None):
        with pytest.raises(AgentRunStateError) as refused:
            agent.hosted(_pair(world), definition_revision="r", ownership=other)
        assert refused.value.code == "ERR_PRISM_HOSTED_OWNER"


@pytest.mark.parametrize(
    ("stores", "options"),
    [
        (object(), {}),
        ((create_memory_checkpoint_store(),), {}),
        (None, {}),
    ],
)
def test_hosting_needs_a_store_pair(stores: Any, options: dict[str, Any]) -> None:
    """``stores`` must have both stores."""
    agent = World().agent(SCRIPT)
    with pytest.raises(TypeError):
        agent.hosted(stores, definition_revision="r", **options)


def test_a_malformed_host_option_is_the_run_states_refusal() -> None:
    """A blank revision or an unknown policy is refused as ``run_state=`` refuses it."""
    world = World()
    agent = world.agent(SCRIPT)
    with pytest.raises(AgentRunStateError):
        agent.hosted(_pair(world), definition_revision=" ")
    with pytest.raises(AgentRunStateError):
        agent.hosted(_pair(world), definition_revision="r", checkpoint_policy="sometimes")


@pytest.mark.anyio
async def test_a_hosted_agent_with_its_own_run_state_runs_and_resumes() -> None:
    """An agent that waits before every tool (its own ``run_state``) hosted for a tenant: the
    run suspends with every-turn checkpoints under the tenant, names its starter, and a resume
    by another person of the tenant with the same hosted copy runs the call once."""
    world, seen = World(), []
    sessions = create_memory_session_store()
    agent = world.agent(
        SCRIPT, tools=[refund_tool(seen)], run_state={"interrupt_before_tool": True}
    )
    pair = StorePair(world.checkpoints, sessions)
    team = {"tenant_id": "acme"}
    hosted = agent.hosted(pair, definition_revision="host-rev", ownership=team)
    result = await hosted.create_session(id="s1").run("refund A-3", actor="ana")
    assert result.status == "suspended"
    assert result.run_state is not None
    assert await load_agent_run_state(world.checkpoints, {"run_id": result.run_id}) is None
    found = await load_agent_run_state(world.checkpoints, {"run_id": result.run_id}, ownership=team)
    assert found is not None
    assert found.state.checkpoint_policy == "every-turn"
    assert found.state.definition_revision == "host-rev"
    resumed = await resume_agent_run(
        agent.hosted(pair, definition_revision="host-rev", ownership=team),
        {"run_id": result.run_id, "session_id": "s1"},
        {
            "expected_version": result.run_state.version,
            "decision": "approve",
            "actor": "bob",
            "channel": "agui",
        },
        checkpoints=world.checkpoints,
        definition_revision="host-rev",
        ownership=team,
    )
    assert resumed.status == "succeeded"
    assert seen == [{"started_by": "ana", "approvals": [("bob", "agui", "allow_once")]}]
