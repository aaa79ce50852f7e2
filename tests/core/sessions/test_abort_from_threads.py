"""Aborting from another thread: a GUI or signal-handler thread, or a sync tool's worker thread,
aborts a run as the loop's own code would, on asyncio and on trio."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import pytest

from prism_core import (
    AbortSignal,
    AgentRunError,
    ToolDefinition,
    load_agent_run_state,
    resume_agent_run,
)

from ..durable.test_crash_recovery import crash, investigation, ref
from ..durable_support import World
from ..helpers import scripted_agent, text_turn, tool_turn

pytestmark = pytest.mark.anyio


def later(seconds: float, action: Any) -> threading.Thread:
    """Run ``action()`` on a plain thread (not one anyio made) after ``seconds``."""

    def run() -> None:
        time.sleep(seconds)
        action()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


async def test_session_abort_from_a_plain_thread_cancels_the_tool_in_flight() -> None:
    """The async tool would sleep 30 s; the abort from another thread ends the run at once,
    with its reason, and ``abort`` reports that there was a run to abort."""
    finished: list[str] = []

    async def slow(args: dict[str, Any], context: Any) -> str:
        await anyio.sleep(30)
        finished.append("slow")
        return "late"

    agent = scripted_agent(
        [tool_turn(("c1", "slow", {})), text_turn("never")], tools=[ToolDefinition("slow", slow)]
    )
    session = agent.create_session()
    answers: list[bool] = []
    thread = later(0.3, lambda: answers.append(session.abort("operator pressed stop")))
    started = time.monotonic()
    with anyio.fail_after(10), pytest.raises(AgentRunError) as caught:
        await session.run("go")
    elapsed = time.monotonic() - started
    await anyio.to_thread.run_sync(thread.join)
    assert answers == [True]
    assert caught.value.result.status == "aborted"
    assert caught.value.result.abort_reason == "operator pressed stop"
    assert finished == []
    assert elapsed < 5


async def test_a_sync_tool_aborting_its_own_run_from_its_worker_thread() -> None:
    """A sync tool runs in a worker thread; aborting the session from there ends the run
    before the next provider turn, without an error inside the tool."""
    errors: list[BaseException] = []
    holder: dict[str, Any] = {}
    returned = threading.Event()

    def stop(args: dict[str, Any], context: Any) -> str:
        assert threading.current_thread() is not threading.main_thread()
        try:
            holder["answer"] = holder["session"].abort("the tool gave up")
        except BaseException as exc:
            errors.append(exc)
            raise
        finally:
            returned.set()
        return "stopping"

    agent = scripted_agent(
        [tool_turn(("c1", "stop", {})), tool_turn(("c2", "stop", {})), text_turn("never")],
        tools=[ToolDefinition("stop", stop)],
    )
    session = agent.create_session()
    holder["session"] = session
    with anyio.fail_after(10), pytest.raises(AgentRunError) as caught:
        await session.run("go")
    # The run stops waiting for the abandoned thread at once; the thread returns on its own.
    assert await anyio.to_thread.run_sync(returned.wait, 10)
    assert errors == []
    assert holder["answer"] is True
    assert caught.value.result.status == "aborted"
    assert caught.value.result.abort_reason == "the tool gave up"


async def test_a_resume_signal_fired_from_a_plain_thread_aborts_the_resumed_run() -> None:
    """A resumed run whose tool waits 30 s is aborted by its signal fired on another thread:
    no later tool runs, and since the side-effecting call was under way the stored run is
    left ``running`` with that call in doubt (never ``aborted`` with an unrecorded effect)."""
    world, log = World(), []
    run_id = await crash(world, log)
    status = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert status is not None
    signal = AbortSignal()

    async def probe(args: dict[str, Any], context: Any) -> str:
        log.append(args["step"])
        await anyio.sleep(30)
        return "late"

    agent = world.agent(investigation(4), tools=[ToolDefinition("probe", probe)])
    thread = later(0.3, lambda: signal.abort("shutting down"))
    with anyio.fail_after(10), pytest.raises(AgentRunError) as caught:
        await resume_agent_run(
            agent,
            ref(run_id),
            {"expected_version": status.version, "decision": "continue"},
            signal=signal,
            **world.resume_options(),
        )
    await anyio.to_thread.run_sync(thread.join)
    assert caught.value.result.status == "aborted"
    assert caught.value.result.abort_reason == "shutting down"
    assert log == [0, 1, 2]
    stored = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert stored is not None
    assert stored.state.status == "running"
    assert len([c for c in stored.state.pending_calls if c.status == "dispatched"]) == 1


async def test_callbacks_run_on_the_loop_they_were_registered_from() -> None:
    """``abort`` from another thread runs each callback on the registering loop's thread and
    returns after it ran; a callback registered outside any loop runs on the firing thread."""
    signal = AbortSignal()
    seen: dict[str, int] = {}
    loop_thread = threading.get_ident()
    signal.on_abort(lambda reason: seen.__setitem__("loop", threading.get_ident()))
    returned: list[bool] = []

    def fire() -> None:
        seen["firing"] = threading.get_ident()
        returned.append(signal.abort("bye"))
        seen["after"] = seen.get("loop", 0)

    thread = later(0, fire)
    await anyio.to_thread.run_sync(thread.join)
    assert returned == [True]
    assert seen["loop"] == loop_thread
    assert seen["after"] == loop_thread
    assert seen["firing"] != loop_thread

    outside = AbortSignal()
    ran_on: list[int] = []

    def register_and_fire() -> None:
        outside.on_abort(lambda reason: ran_on.append(threading.get_ident()))
        outside.abort()

    thread = later(0, register_and_fire)
    await anyio.to_thread.run_sync(thread.join)
    assert ran_on == [thread.ident]
    assert outside.abort() is False


def test_firing_after_the_loop_ended_drops_the_loop_callbacks() -> None:
    """A callback whose loop has finished has nothing left to cancel: firing the signal then
    skips it instead of raising in the firing thread."""
    signal = AbortSignal()
    ran: list[str] = []

    async def register() -> None:
        signal.on_abort(lambda reason: ran.append(reason))

    anyio.run(register)
    failures: list[BaseException] = []

    def fire() -> None:
        try:
            signal.abort("too late")
        except BaseException as exc:
            failures.append(exc)

    later(0, fire).join()
    assert failures == []
    assert ran == []
    assert signal.aborted
    assert signal.reason == "too late"
