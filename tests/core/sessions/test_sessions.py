"""Sessions: stream, subscribe, abort, close, branch navigation and the memory store."""

from __future__ import annotations

import gc
from typing import Any

import anyio
import pytest

from prism_core import (
    AgentRunError,
    ProviderRequest,
    SessionClosedError,
    SessionEntryNotFoundError,
    ToolDefinition,
    create_agent,
    create_memory_session_store,
    create_mock_provider,
    provider_done,
    provider_text_delta,
)

from ..helpers import MODEL, echo_tool, scripted_agent, text_turn, tool_turn, types


@pytest.mark.anyio
async def test_stream_yields_only_its_run_and_ends() -> None:
    """stream() owns one run: its events only, ending with agent_finished, result available."""
    agent = scripted_agent([text_turn("a")])
    session = agent.create_session()
    stream = session.stream("hi")
    events = [e async for e in stream]
    assert types(events) == [
        "agent_started",
        "turn_started",
        "message_started",
        "message_delta",
        "message_finished",
        "turn_finished",
        "agent_finished",
    ]
    assert stream.result is not None
    assert stream.result.status == "succeeded"
    assert {e.run_id for e in events} == {stream.run_id}
    assert not session.running


@pytest.mark.anyio
async def test_stream_of_failed_run_ends_with_error_event() -> None:
    """A failing owned run ends the stream after its error event instead of parking it."""
    agent = create_agent(model={"provider": "none", "model": "x"})
    events = [e async for e in agent.create_session().stream("hi")]
    assert types(events) == ["agent_started", "error"]


@pytest.mark.anyio
async def test_stream_preflight_rejection_raises_instead_of_parking() -> None:
    """A pre-flight validation error surfaces from the iteration."""
    session = scripted_agent([text_turn("a")]).create_session()
    with pytest.raises(ValueError, match="unknown run options"):
        async for _ in session.stream("hi", bogus=1):
            pass
    with pytest.raises(ValueError, match="max_queued_events"):
        session.stream("hi", max_queued_events=0)


@pytest.mark.anyio
async def test_leaving_a_stream_early_aborts_its_run() -> None:
    """break out of the stream: the run is aborted, the session is free again, no new turn."""
    provider = create_mock_provider(turns=[tool_turn(("c1", "echo", {})), text_turn("late")])
    agent = create_agent(model=MODEL, provider=provider, tools=[echo_tool()])
    session = agent.create_session()
    watcher = session.subscribe()
    async for event in session.stream("go"):
        if event.type == "tool_execution_started":
            break
    gc.collect()
    assert not session.running
    seen = [e async for e in watcher]
    assert seen[-1].type == "error"
    assert seen[-1].status == "aborted"
    assert len(provider.requests) == 1
    assert (await session.run("again")).status == "succeeded"


@pytest.mark.anyio
async def test_aclose_on_a_stream_aborts_and_settles() -> None:
    """aclose() aborts the owned run and waits for it to settle."""
    session = scripted_agent(
        [tool_turn(("c1", "echo", {}))] * 3, tools=[echo_tool()]
    ).create_session()
    stream = session.stream("go")
    first = await stream.__anext__()
    assert first.type == "agent_started"
    await stream.aclose()
    assert stream.result is not None
    assert stream.result.status == "aborted"
    assert not session.running


@pytest.mark.anyio
async def test_subscribe_is_run_scoped_by_default_and_across_runs_opts_out() -> None:
    """A default subscriber closes at the run's end; across_runs keeps receiving."""
    session = scripted_agent([text_turn("a")]).create_session()
    scoped = session.subscribe()
    across = session.subscribe(across_runs=True)
    first = await session.run("one")
    second = await session.run("two")
    scoped_events = [e async for e in scoped]
    assert {e.run_id for e in scoped_events} == {first.run_id}
    across.close()
    across_events = [e async for e in across]
    assert {e.run_id for e in across_events} == {first.run_id, second.run_id}
    await session.close()


@pytest.mark.anyio
async def test_subscriber_consumes_concurrently_with_the_run() -> None:
    """A consumer task sees events live while run() is in progress."""
    session = scripted_agent([text_turn("a")]).create_session()
    got: list[str] = []
    sub = session.subscribe()

    async def consume() -> None:
        async for event in sub:
            got.append(event.type)

    async with anyio.create_task_group() as group:
        group.start_soon(consume)
        await session.run("hi")
    assert got[0] == "agent_started"
    assert got[-1] == "agent_finished"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("overflow", "expected"),
    [
        ("close", ["event_subscriber_overflow"]),
        (
            "drop_oldest",
            ["event_subscriber_overflow", "message_finished", "turn_finished", "agent_finished"],
        ),
        (
            "drop_newest",
            ["agent_started", "turn_started", "message_started", "event_subscriber_overflow"],
        ),
    ],
)
async def test_bounded_queue_overflow_policies(overflow: str, expected: list[str]) -> None:
    """Each policy delivers one overflow notice and keeps the events the policy promises."""
    session = scripted_agent([text_turn("a")]).create_session()
    sub = session.subscribe(max_queued_events=3, overflow=overflow)  # type: ignore[arg-type]
    await session.run("hi")
    events = [e async for e in sub]
    assert types(events) == expected
    notices = [e for e in events if e.type == "event_subscriber_overflow"]
    assert len(notices) == 1
    assert notices[0].max_queued_events == 3


@pytest.mark.anyio
async def test_abort_reaches_provider_and_tool_and_stops_new_turns() -> None:
    """abort() cancels the running tool; no provider turn starts afterwards."""
    tool_cancelled = anyio.Event()
    tool_started = anyio.Event()

    async def hang(args: dict[str, Any], context: Any) -> str:
        tool_started.set()
        try:
            await anyio.sleep_forever()
        finally:
            tool_cancelled.set()
        return "never"

    agent = scripted_agent(
        [tool_turn(("c1", "hang", {})), text_turn("next")], tools=[ToolDefinition("hang", hang)]
    )
    session = agent.create_session()
    results: list[Any] = []

    async def runner() -> None:
        with pytest.raises(AgentRunError) as info:
            await session.run("go")
        results.append(info.value)

    with anyio.fail_after(3):
        async with anyio.create_task_group() as group:
            group.start_soon(runner)
            await tool_started.wait()
            assert session.abort("stop")
    assert tool_cancelled.is_set()
    error = results[0]
    assert error.result.status == "aborted"
    assert error.result.abort_reason == "stop"
    assert error.code == "ERR_PRISM_ABORTED"
    assert len(agent.provider.requests) == 1  # type: ignore[union-attr]
    assert not session.abort()


@pytest.mark.anyio
async def test_abort_cancels_a_streaming_provider() -> None:
    """A provider blocked mid-stream is cancelled and sees its signal aborted."""
    signals: list[Any] = []
    entered = anyio.Event()

    class Slow:
        id = "slow"

        async def generate(self, request: ProviderRequest) -> Any:
            signals.append(request.signal)
            yield provider_text_delta("start")
            entered.set()
            await anyio.sleep_forever()
            yield provider_done()

    session = create_agent(model=MODEL, provider=Slow()).create_session()

    async def runner() -> None:
        with pytest.raises(AgentRunError):
            await session.run("go")

    with anyio.fail_after(3):
        async with anyio.create_task_group() as group:
            group.start_soon(runner)
            await entered.wait()
            session.abort()
    assert signals[0].aborted


@pytest.mark.anyio
async def test_close_dispatches_shutdown_once_and_closes_subscribers() -> None:
    """close() runs session_shutdown once, ends every subscriber, and refuses new runs."""
    shutdowns: list[str] = []
    agent = scripted_agent(
        [text_turn("a")],
        middleware=[{"session_shutdown": lambda ctx: shutdowns.append(ctx.session_id)}],
    )
    session = agent.create_session(id="s")
    across = session.subscribe(across_runs=True)
    await session.run("hi")
    await session.close()
    await session.close()
    assert shutdowns == ["s"]
    assert across.closed
    with pytest.raises(SessionClosedError):
        await session.run("again")


@pytest.mark.anyio
async def test_entries_checkout_fork_and_clone() -> None:
    """Branch navigation: checkout an older leaf, fork shares the store, clone copies ids anew."""
    store = create_memory_session_store()
    provider = create_mock_provider(text_turn("reply"))
    agent = create_agent(model=MODEL, provider=provider, store=store)
    session = agent.create_session(id="main")
    await session.run("one")
    first_leaf = session.leaf_id
    await session.run("two")
    assert len(await session.entries()) == 4

    await session.checkout(first_leaf)
    assert len(await session.entries()) == 2
    await session.run("branch")
    texts = [e.message.text for e in await session.entries() if e.message]
    assert texts == ["one", "reply", "branch", "reply"]
    assert [m.text for m in provider.requests[-1].messages] == ["one", "reply", "branch"]
    assert len(await store.list("main")) == 6

    fork = session.fork(leaf_id=first_leaf)
    assert fork.id == "main"
    assert fork.store is store
    assert len(await fork.entries()) == 2

    clone = await session.clone(id="copy")
    cloned = await clone.entries()
    original = await session.entries()
    assert [e.message for e in cloned] == [e.message for e in original]
    assert {e.id for e in cloned}.isdisjoint({e.id for e in original})
    assert {e.session_id for e in cloned} == {"copy"}

    with pytest.raises(SessionEntryNotFoundError):
        await session.checkout("entry_missing")
    await session.checkout()
    assert session.leaf_id == (await store.list("main"))[-1].id


@pytest.mark.anyio
async def test_memory_store_branch_aware_paths() -> None:
    """read_branch_path walks parents root to leaf and never crosses sessions."""
    from prism_core import Message, create_session_entry

    store = create_memory_session_store()
    root = await store.append(
        create_session_entry(session_id="s", kind="message", message=Message.user("r"))
    )
    left = await store.append(
        create_session_entry(session_id="s", kind="label", parent_id=root.id, label="l")
    )
    right = await store.append(
        create_session_entry(session_id="s", kind="label", parent_id=root.id, label="r")
    )
    assert [e.id for e in await store.read_branch_path("s", left.id)] == [root.id, left.id]
    assert [e.id for e in await store.read_branch_path("s", right.id)] == [root.id, right.id]
    with pytest.raises(SessionEntryNotFoundError):
        await store.read_branch_path("other", left.id)
    with pytest.raises(SessionEntryNotFoundError):
        await store.append(
            create_session_entry(session_id="other", kind="label", parent_id=root.id, label="x")
        )
