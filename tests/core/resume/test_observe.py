"""Observing a run from its stores (``observe_agent_run``): what a client that watches a run
another process executes sees; resuming after an event id replays what it missed, once."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from prism_core import (
    AgentRunNotFoundError,
    ToolDefinition,
    decide_agent_run,
    observe_agent_run,
    run_worker,
)

from ..durable_support import REVISION, World
from ..helpers import text_turn, tool_turn

pytestmark = pytest.mark.anyio

SCRIPT = [
    tool_turn(("c1", "look", {"q": "a"})),
    tool_turn(("c2", "refund", {"order": "A-3"})),
    text_turn("refunded A-3"),
]


def tools(log: list[str]) -> list[ToolDefinition]:
    def look(args: dict[str, Any], context: Any) -> str:
        log.append("look")
        return "found"

    def refund(args: dict[str, Any], context: Any) -> str:
        log.append("refund")
        return "refunded"

    return [
        ToolDefinition("look", look, effect="read"),
        ToolDefinition("refund", refund, needs_approval=True),
    ]


async def collect(world: World, run_id: str, after: str | None = None) -> list[Any]:
    with anyio.fail_after(60):
        return [
            observed
            async for observed in observe_agent_run(
                world.checkpoints, world.sessions, run_id, after=after
            )
        ]


async def test_observing_a_suspended_run_then_its_worker_run() -> None:
    """The first observation ends at the suspension; after a recorded decision, a second one
    resumed after the suspension's id sees only what the worker did, to the end."""
    world, log = World(), []
    agent = world.agent(SCRIPT, tools=tools(log))
    result = await agent.create_session(id="s1").run("refund", run_state=world.run_state())
    assert result.status == "suspended"
    first = await collect(world, result.run_id)
    assert [o.event.type for o in first] == [
        "message_finished",
        "tool_execution_finished",
        "message_finished",
        "agent_suspended",
    ]
    assert [o.id for o in first] == ["1", "2", "3", f"3.v{result.run_state.version}"]
    # Nothing new after the suspension while it waits.
    assert await collect(world, result.run_id, after=first[-1].id) == []
    await decide_agent_run(
        world.agent(SCRIPT, tools=tools(log)),
        {"run_id": result.run_id},
        {"expected_version": result.run_state.version, "decision": "approve"},
        **world.resume_options(),
    )
    stop = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(
            lambda: run_worker(
                checkpoints=world.checkpoints,
                sessions=world.sessions,
                resolve_agent=lambda agent_id: (world.agent(SCRIPT, tools=tools(log)), REVISION),
                poll_ms=10,
                stop=stop,
            )
        )
        later = await collect(world, result.run_id, after=first[-1].id)
        stop.set()
    assert [o.event.type for o in later] == [
        "tool_execution_finished",
        "message_finished",
        "agent_finished",
    ]
    assert [o.id for o in later[:2]] == ["4", "5"]
    assert later[0].event.tool_call_id == "c2"
    assert log == ["look", "refund"]
    # A client that lost the connection after event 4 gets 5 and the end, once.
    again = await collect(world, result.run_id, after="4")
    assert [o.id for o in again] == [later[1].id, later[2].id]


async def test_a_foreign_or_malformed_observation_is_refused_first() -> None:
    """An unknown run (or one of another owner) is not found; a malformed id is refused."""
    world = World()
    with pytest.raises(AgentRunNotFoundError):
        await collect(world, "run_nope")
    with pytest.raises(ValueError, match="not an event id"):
        await collect(world, "run_nope", after="x; drop")
