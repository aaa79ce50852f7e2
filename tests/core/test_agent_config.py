"""An agent's configuration is one frozen value that sessions and runs read."""

from __future__ import annotations

import copy

import attrs
import pytest

from prism_core import (
    Agent,
    AgentConfig,
    AgentConfigError,
    RunStateOptions,
    create_agent,
    create_memory_checkpoint_store,
    create_memory_session_store,
    create_secret_redactor,
    create_secure_agent,
)
from tests.core.helpers import MODEL, echo_tool, scripted_agent, text_turn


def test_the_agent_reads_its_frozen_config() -> None:
    """Every configured value is on ``agent.config``, the agent's attributes read it, and
    neither can be changed after creation."""
    agent = create_agent(id="a", model=MODEL, limits={"max_turns": 3}, metadata={"k": "v"})
    assert isinstance(agent.config, AgentConfig)
    assert agent.id == agent.config.id == "a"
    assert agent.limits is agent.config.limits
    assert agent.limits.max_turns == 3
    assert dict(agent.metadata) == {"k": "v"}
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        agent.config.id = "b"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        agent.limits = None  # type: ignore[misc,assignment]
    with pytest.raises(TypeError):
        agent.config.metadata["k"] = "w"  # type: ignore[index]


def test_a_description_is_public_text_apart_from_the_instructions() -> None:
    """``description=`` is kept as given (``None`` by default), never derived from the
    instructions, and refused unless it is a string."""
    plain = create_agent(id="a", model=MODEL, instructions="Internal: never refund twice.")
    assert plain.description is plain.config.description is None
    described = create_agent(id="a", model=MODEL, description="Refunds orders.")
    assert described.description == described.config.description == "Refunds orders."
    with pytest.raises(AgentConfigError, match="description must be a string"):
        create_agent(id="a", model=MODEL, description=42)
    with pytest.raises(AttributeError):
        described.description = "other"  # type: ignore[misc]


def test_the_store_is_the_one_attribute_a_host_replaces() -> None:
    """A copy of the agent with another ``store`` shares the same config and opens its
    sessions on the new store."""
    agent = create_agent(id="a", model=MODEL)
    other = copy.copy(agent)
    other.store = create_memory_session_store()
    assert other.config is agent.config
    assert other.create_session().store is other.store
    assert agent.create_session().store is agent.store is not other.store


def test_a_secure_agent_is_marked_in_its_config() -> None:
    """``create_secure_agent`` records ``secure`` in the config; a plain agent does not."""
    agent = create_secure_agent(
        id="s",
        model=MODEL,
        run_state=RunStateOptions(create_memory_checkpoint_store(), "r1", ownership={"t": "1"}),
        redactor=create_secret_redactor(["x"]),
        trust=lambda *a: None,
        permission=lambda *a: None,
        validate=lambda *a: None,
        limits={
            "max_turns": 1,
            "max_provider_attempts": 1,
            "max_tool_rounds": 1,
            "max_tool_calls": 1,
            "max_wall_time_ms": 1000,
            "max_total_tokens": 10,
        },
    )
    assert agent.secure
    assert agent.config.secure
    assert not create_agent(model=MODEL).config.secure


@pytest.mark.anyio
async def test_a_session_and_its_runs_read_the_agents_config() -> None:
    """The session's ``config`` is its agent's, and a run uses the configured tools."""
    log: list[object] = []
    agent: Agent = scripted_agent([text_turn("ok")], tools=[echo_tool("echo", log)])
    session = agent.create_session()
    assert session.config is agent.config
    assert session.config.registry.get("echo") is not None
    result = await session.run("hi")
    assert result.text == "ok"


def test_evolve_gives_a_copy_on_other_stores_with_other_durable_options() -> None:
    """``agent.evolve(store=..., run_state=...)`` copies the agent with those two replaced and
    everything else shared; the agent itself is unchanged and a bad ``run_state`` refused."""
    agent = create_agent(id="a", model=MODEL)
    sessions = create_memory_session_store()
    options = RunStateOptions(create_memory_checkpoint_store(), "r1")
    moved = agent.evolve(store=sessions, run_state=options)
    assert moved.store is sessions
    assert moved.run_state is options
    assert moved.registry is agent.registry
    assert agent.run_state is None
    assert agent.store is not sessions
    assert agent.evolve().run_state is None
    with pytest.raises(TypeError):
        agent.evolve(run_state=42)
    with pytest.raises(Exception, match="SessionStore"):
        agent.evolve(store="sqlite:///x.db")  # type: ignore[arg-type]
