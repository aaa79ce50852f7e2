"""session.stream honours max_queued_events/overflow exactly as session.subscribe does, and the
run completes when the consumer falls behind."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from prism_core import InvalidOptionsError, ToolDefinition

from ..helpers import paused_consumer, scripted_agent, text_turn, tool_turn

pytestmark = pytest.mark.anyio

SCRIPT = [tool_turn(("c1", "probe", {})), tool_turn(("c2", "probe", {})), text_turn("done")]


def chatty(log: list[str], reports: int = 10) -> ToolDefinition:
    """A tool that reports progress ``reports`` times (one burst of events per call)."""

    def probe(args: dict[str, Any], context: Any) -> str:
        log.append(context.tool_call_id)
        for n in range(reports):
            context.report_progress({"n": n})
        return "ok"

    return ToolDefinition("probe", probe)


def progress(events: list[Any]) -> list[int]:
    return [e.progress["n"] for e in events if e.type == "tool_execution_progress"]


async def test_close_delivers_one_notice_ends_the_stream_and_the_run_completes() -> None:
    """overflow="close": the queue is cleared, one event_subscriber_overflow notice is the last
    event, and the run still finishes (every tool ran, the result succeeded)."""
    log: list[str] = []
    agent = scripted_agent(SCRIPT, tools=[chatty(log)])
    session = agent.create_session()
    stream = session.stream("go", max_queued_events=4, overflow="close")
    events = [event async for event in stream]
    assert events[-1].type == "event_subscriber_overflow"
    assert (events[-1].max_queued_events, events[-1].overflow) == (4, "close")
    assert events[-1].dropped >= 1
    assert [e.type for e in events].count("event_subscriber_overflow") == 1
    assert log == ["c1", "c2"]
    assert stream.result is not None
    assert (stream.result.status, stream.result.text) == ("succeeded", "done")
    assert not session.running


async def test_drop_oldest_keeps_the_newest_events() -> None:
    """overflow="drop_oldest": a consumer that pauses until the run has ended receives one
    notice, then the newest four events (what a roomy subscriber saw last)."""
    log: list[str] = []
    agent = scripted_agent(SCRIPT, tools=[chatty(log)])
    session = agent.create_session()
    watcher = session.subscribe(max_queued_events=4096)
    stream = session.stream("go", max_queued_events=4, overflow="drop_oldest")
    events = await paused_consumer(stream, lambda: ran(session))
    seen = [event async for event in watcher]
    names = [e.type for e in events]
    assert names.count("event_subscriber_overflow") == 1
    assert names.index("event_subscriber_overflow") < len(events) - 4
    assert events[-4:] == seen[-4:]
    assert events[-1].type == "agent_finished"
    assert log == ["c1", "c2"]


async def test_drop_newest_keeps_what_fit_and_goes_on() -> None:
    """overflow="drop_newest": a consumer that pauses receives what fit in its queue (the
    run's first events: four, or five when it took the first before the queue filled), then
    one notice; the run goes on to its end."""
    log: list[str] = []
    agent = scripted_agent(SCRIPT, tools=[chatty(log)])
    session = agent.create_session()
    watcher = session.subscribe(max_queued_events=4096)
    stream = session.stream("go", max_queued_events=4, overflow="drop_newest")
    events = await paused_consumer(stream, lambda: ran(session))
    seen = [event async for event in watcher]
    kept = [e.type for e in events].index("event_subscriber_overflow")
    assert kept in (4, 5)
    assert events[:kept] == seen[:kept]
    assert [e.type for e in events[kept:]] == ["event_subscriber_overflow"]
    assert stream.result is not None
    assert stream.result.status == "succeeded"
    assert log == ["c1", "c2"]


async def test_a_paused_consumer_does_not_stall_its_run() -> None:
    """The run goes on while its consumer reads nothing: every tool runs and the run ends
    before the consumer reads its second event (spec: the queue, not the run, is bounded)."""
    log: list[str] = []
    agent = scripted_agent(SCRIPT, tools=[chatty(log, reports=1)])
    session = agent.create_session()
    stream = session.stream("go")
    first = await stream.__anext__()
    with anyio.fail_after(60):
        while True:
            if not session.running:
                break
            await anyio.sleep(0.01)
    assert first.type == "agent_started"
    assert log == ["c1", "c2"]
    rest = [event.type async for event in stream]
    assert rest[-1] == "agent_finished"


async def ran(session: Any) -> bool:
    """Whether the session's run has ended."""
    return not session.running


async def test_the_stream_yields_the_same_events_a_subscriber_sees() -> None:
    """With room enough the stream delivers exactly what a concurrent subscriber receives."""
    agent = scripted_agent(SCRIPT, tools=[chatty([], reports=2)])
    session = agent.create_session()
    watcher = session.subscribe(max_queued_events=1024)
    streamed = [event.type async for event in session.stream("go")]
    watched = [event.type async for event in watcher]
    assert streamed == watched
    assert streamed[-1] == "agent_finished"


async def test_a_bad_bound_is_refused_before_any_run() -> None:
    """max_queued_events below 1 or an unknown policy is refused at the call, typed."""
    agent = scripted_agent([text_turn("hi")])
    session = agent.create_session()
    with pytest.raises(InvalidOptionsError):
        session.stream("go", max_queued_events=0)
    with pytest.raises(InvalidOptionsError):
        session.stream("go", overflow="drop_all")  # type: ignore[arg-type]
    assert agent.provider.requests == []  # type: ignore[union-attr]
