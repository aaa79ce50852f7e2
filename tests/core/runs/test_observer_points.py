"""The observer middleware points: ``event``, ``checkpoint_metadata``, ``checkpoint_written``."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentRunError,
    AgentRunStateError,
    CheckpointWrite,
    MiddlewareContext,
    create_secret_redactor,
    resume_agent_run,
)
from prism_core.codec import dumps

from ..durable_support import World
from ..helpers import echo_tool, scripted_agent, text_turn, tool_turn, types

TURNS = [tool_turn(("c1", "echo", {"word": "s3cret"})), text_turn("done")]


class Recorder:
    """Middleware recording what each observer point saw."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, MiddlewareContext]] = []
        self.writes: list[tuple[CheckpointWrite, MiddlewareContext]] = []

    def event(self, event: Any, context: MiddlewareContext) -> None:
        self.events.append((event, context))

    async def checkpoint_written(self, write: CheckpointWrite, context: MiddlewareContext) -> None:
        self.writes.append((write, context))


@pytest.mark.anyio
async def test_the_event_point_sees_every_event_as_subscribers_do() -> None:
    """Same events, same order, redacted, with the run's context and the agent's name."""
    recorder = Recorder()
    agent = scripted_agent(
        TURNS,
        name="helper",
        tools=[echo_tool()],
        middleware=[recorder],
        redactor=create_secret_redactor(["s3cret"]),
    )
    session = agent.create_session(id="s1")
    streamed = [event async for event in session.stream("go")]
    assert [e for e, _ in recorder.events] == streamed
    assert types(streamed)[0] == "agent_started"
    assert types(streamed)[-1] == "agent_finished"
    assert "s3cret" not in dumps([e for e, _ in recorder.events]).decode()
    _, context = recorder.events[0]
    assert context.point == "event"
    assert context.session_id == "s1"
    assert context.run_id == streamed[0].run_id
    assert context.agent_name == "helper"


def test_an_async_event_observer_is_refused_when_composed() -> None:
    """``event`` runs inside ``emit``: an ``async def`` handler cannot be awaited there."""

    class AsyncObserver:
        async def event(self, event: Any, context: Any) -> None:
            return None

    with pytest.raises(TypeError, match="'event' must be synchronous"):
        scripted_agent(TURNS, middleware=[AsyncObserver()])


@pytest.mark.anyio
async def test_a_failing_observer_is_logged_and_never_fails_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An observer that raises is logged by type only; the run still succeeds."""

    def explode(event: Any, context: Any) -> None:
        raise ValueError("observer detail that must not be logged")

    agent = scripted_agent(TURNS, tools=[echo_tool()], middleware=[{"event": explode}])
    with caplog.at_level(logging.WARNING, logger="prism_core.middleware"):
        result = await agent.create_session().run("go")
    assert result.status == "succeeded"
    messages = [r.getMessage() for r in caplog.records if r.name == "prism_core.middleware"]
    assert messages
    assert all(m == "middleware event observer raised ValueError" for m in messages)


@pytest.mark.anyio
async def test_checkpoint_points_extend_the_sidecar_and_observe_each_write() -> None:
    """``checkpoint_metadata`` adds to the host's sidecar map; ``checkpoint_written`` sees each
    write's version, status and the exact stored size; the resume sees the stored sidecar."""
    world, recorder = World(), Recorder()

    def stamp(metadata: dict[str, str], context: MiddlewareContext) -> dict[str, str]:
        return {**metadata, "stamped_by": context.run_id or ""}

    middleware = [recorder, {"checkpoint_metadata": stamp}]
    agent = world.agent(TURNS, tools=[echo_tool()], middleware=middleware)
    result = await agent.create_session(id="s1").run(
        "go",
        run_state=world.run_state(
            interrupt_before_tool=True, checkpoint_metadata={"tenant": "acme"}
        ),
    )
    assert result.status == "suspended"
    record = await world.checkpoints.load(AGENT_RUN_NAMESPACE, result.run_id)
    assert record is not None
    assert dict(record.metadata or {}) == {"tenant": "acme", "stamped_by": result.run_id}
    ((write, context),) = recorder.writes
    assert (write.run_id, write.version, write.status) == (result.run_id, 1, "suspended")
    assert write.bytes == len(dumps(record.value))
    assert write.duration_ms >= 0
    assert (context.point, context.run_id, context.session_id) == (
        "checkpoint_written",
        result.run_id,
        "s1",
    )

    resumer = Recorder()
    resumed = await resume_agent_run(
        world.agent(TURNS, tools=[echo_tool()], middleware=[resumer]),
        {"run_id": result.run_id, "session_id": "s1"},
        {"expected_version": 1, "decision": "approve"},
        **world.resume_options(),
    )
    assert resumed.status == "succeeded"
    # The claim (written before the resumed run starts), the dispatch mark, the terminal write.
    assert [(w.version, w.status) for w, _ in resumer.writes] == [
        (2, "running"),
        (3, "running"),
        (4, "succeeded"),
    ]
    resumed_events = [e for e, _ in resumer.events if e.type == "agent_resumed"]
    (resumed_event,) = resumed_events
    assert resumed_event.checkpoint_metadata == {"tenant": "acme", "stamped_by": result.run_id}


@pytest.mark.anyio
async def test_checkpoint_metadata_middleware_is_bounded_like_the_hosts() -> None:
    """A ``checkpoint_metadata`` handler returning a non-string value fails the write."""
    world = World()
    agent = world.agent(
        TURNS,
        tools=[echo_tool()],
        middleware=[{"checkpoint_metadata": lambda metadata, context: {"n": 1}}],
    )
    with pytest.raises(AgentRunError, match="must be strings") as caught:
        await agent.create_session(id="s1").run(
            "go", run_state=world.run_state(interrupt_before_tool=True)
        )
    assert caught.value.result.error is not None
    assert caught.value.result.error.code == AgentRunStateError.code
    assert world.checkpoints.saves == 0


@pytest.mark.anyio
async def test_a_settled_deny_reaches_the_event_observer() -> None:
    """A denied resume never starts a run; its ``agent_denied`` event is observed anyway."""
    world = World()
    agent = world.agent(TURNS, tools=[echo_tool()])
    result = await agent.create_session(id="s1").run(
        "go", run_state=world.run_state(interrupt_before_tool=True)
    )
    recorder = Recorder()
    denied = await resume_agent_run(
        world.agent(TURNS, tools=[echo_tool()], middleware=[recorder]),
        {"run_id": result.run_id, "session_id": "s1"},
        {"expected_version": 1, "decision": "deny"},
        **world.resume_options(),
    )
    assert denied.status == "denied"
    assert [e.type for e, _ in recorder.events] == ["agent_denied"]
    assert [(w.version, w.status) for w, _ in recorder.writes] == [(2, "denied")]
