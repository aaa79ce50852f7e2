"""session.stream honours max_queued_events/overflow exactly as session.subscribe does, and the
run completes when the consumer falls behind."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import InvalidOptionsError, ToolDefinition

from .helpers import scripted_agent, text_turn, tool_turn

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
    """overflow="drop_oldest": each burst keeps its last four reports, after one notice."""
    log: list[str] = []
    agent = scripted_agent(SCRIPT, tools=[chatty(log)])
    stream = agent.create_session().stream("go", max_queued_events=4, overflow="drop_oldest")
    events = [event async for event in stream]
    assert progress(events) == [6, 7, 8, 9, 6, 7, 8, 9]
    names = [e.type for e in events]
    assert names.count("event_subscriber_overflow") == 1
    assert names[names.index("event_subscriber_overflow") + 1] == "tool_execution_progress"
    assert names[-1] == "agent_finished"
    assert log == ["c1", "c2"]


async def test_drop_newest_keeps_what_fit_and_goes_on() -> None:
    """overflow="drop_newest": the first reports of a burst are kept, then one notice."""
    log: list[str] = []
    agent = scripted_agent(SCRIPT, tools=[chatty(log)])
    stream = agent.create_session().stream("go", max_queued_events=4, overflow="drop_newest")
    events = [event async for event in stream]
    assert progress(events)[:3] == [0, 1, 2]
    assert [e.type for e in events].count("event_subscriber_overflow") == 1
    assert events[-1].type == "agent_finished"
    assert stream.result is not None
    assert stream.result.status == "succeeded"


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
