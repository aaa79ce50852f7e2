"""Sync tools, validators and guardrails run in worker threads, off the event loop."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import anyio.to_thread
import pytest

from prism_core import (
    AgentRunError,
    Guardrail,
    ToolDefinition,
    ToolExecutionContext,
    create_tool_registry,
    dispatch_tool_call,
    tool_call_content,
)
from prism_core.guardrails import GuardrailContext, evaluate_guardrails

from ..helpers import scripted_agent, text_turn, tool_turn


def ctx(name: str = "t") -> ToolExecutionContext:
    """A tool context outside any run."""
    return ToolExecutionContext(session_id="s", run_id="r", tool_call_id="c1", tool_name=name)


@pytest.mark.anyio
async def test_four_sessions_with_a_blocking_sync_tool_run_side_by_side() -> None:
    """Four sessions whose sync tool sleeps 1 s finish in about 1 s, not 4 s."""

    def nap(args: dict[str, Any], context: ToolExecutionContext) -> str:
        time.sleep(1)
        return "rested"

    agent = scripted_agent(
        [tool_turn(("c1", "nap", {})), text_turn("done")], tools=[ToolDefinition("nap", nap)]
    )
    texts: list[str] = []

    async def one() -> None:
        texts.append((await agent.create_session().run("go")).text)

    started = time.monotonic()
    async with anyio.create_task_group() as group:
        for _ in range(4):
            group.start_soon(one)
    elapsed = time.monotonic() - started
    assert texts == ["done"] * 4
    assert elapsed < 2.5


@pytest.mark.anyio
async def test_abort_returns_while_a_sync_tool_still_sleeps() -> None:
    """abort() ends the run at once; the thread finishes on its own and its result is
    discarded (it never reaches the session)."""
    started, release = threading.Event(), threading.Event()
    finished = threading.Event()

    def slow(args: dict[str, Any], context: ToolExecutionContext) -> str:
        started.set()
        release.wait(10)
        finished.set()
        return "late result"

    agent = scripted_agent(
        [tool_turn(("c1", "slow", {})), text_turn("never")], tools=[ToolDefinition("slow", slow)]
    )
    session = agent.create_session()
    outcome: list[Any] = []
    ended = anyio.Event()

    async def run() -> None:
        with pytest.raises(AgentRunError) as info:
            await session.run("go")
        outcome.append(info.value.result)
        ended.set()

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        assert await anyio.to_thread.run_sync(started.wait, 5)
        aborted_at = time.monotonic()
        assert session.abort("operator stop")
        with anyio.fail_after(5):
            await ended.wait()
        took = time.monotonic() - aborted_at
    assert outcome[0].status == "aborted"
    assert took < 0.5
    assert not finished.is_set()
    release.set()
    assert await anyio.to_thread.run_sync(finished.wait, 5)
    entries = await session.entries()
    assert "late result" not in repr(entries)


@pytest.mark.anyio
async def test_sync_tools_respect_the_given_limiter() -> None:
    """With a one-token limiter two sync calls run one after the other."""
    active, peak = [0], [0]
    lock = threading.Lock()

    def work(args: dict[str, Any], context: ToolExecutionContext) -> int:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.05)
        with lock:
            active[0] -= 1
        return threading.get_ident()

    registry = create_tool_registry([ToolDefinition("t", work)])
    limiter = anyio.CapacityLimiter(1)
    idents: list[Any] = []

    async def call() -> None:
        result = await dispatch_tool_call(
            tool_call_content("c1", "t", {}), registry=registry, context=ctx(), limiter=limiter
        )
        idents.append(result.value)

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        group.start_soon(call)
    assert peak == [1]
    assert threading.get_ident() not in idents


@pytest.mark.anyio
async def test_progress_from_a_sync_tool_reaches_the_run() -> None:
    """report_progress from a worker thread hops back to the event loop."""

    def work(args: dict[str, Any], context: ToolExecutionContext) -> str:
        context.report_progress({"step": 1})
        context.report_progress({"step": 2})
        return "ok"

    agent = scripted_agent(
        [tool_turn(("c1", "work", {})), text_turn("done")], tools=[ToolDefinition("work", work)]
    )
    events = [e async for e in agent.create_session().stream("go")]
    progress = [e.progress for e in events if e.type == "tool_execution_progress"]
    assert progress == [{"step": 1}, {"step": 2}]


@pytest.mark.anyio
async def test_sync_validators_and_guardrails_run_off_the_event_loop() -> None:
    """A sync validate and a sync guardrail see a thread other than the event loop's."""
    loop_thread = threading.get_ident()
    seen: list[int] = []

    def validate(call: Any, tool: Any, context: Any) -> None:
        seen.append(threading.get_ident())

    def guard(context: GuardrailContext) -> dict[str, str]:
        seen.append(threading.get_ident())
        return {"action": "allow"}

    registry = create_tool_registry([ToolDefinition("t", lambda a, c: 1)])
    result = await dispatch_tool_call(
        tool_call_content("c1", "t", {}), registry=registry, context=ctx(), validate=validate
    )
    assert result.value == 1
    records = await evaluate_guardrails(
        [Guardrail("g", "input", guard)],
        GuardrailContext(stage="input", value="hi", session_id="s", run_id="r"),
    )
    assert [r.action for r in records] == ["allow"]
    assert len(seen) == 2
    assert loop_thread not in seen


def restore_context() -> Any:
    """A restore-hook context for run r1."""
    from prism_core.durable._checkpoints import CheckpointRecord
    from prism_core.resume._restore import CheckpointRestoreContext

    record = CheckpointRecord(namespace="prism.agent-run", key="r1", version=1, value={})
    return CheckpointRestoreContext(
        run_id="r1",
        session_id="s1",
        version=1,
        status="suspended",
        metadata=None,
        checkpoint=record,
    )


@pytest.mark.anyio
async def test_sync_restore_hooks_run_in_a_thread_under_the_limiter() -> None:
    """A sync restore hook runs off the event loop; a limiter with no free token makes it
    wait, and its timeout then refuses the resume."""
    from prism_core import CheckpointRestoreError
    from prism_core.resume._restore import run_restore_hooks

    threads: list[int] = []

    def hook(context: Any) -> None:
        threads.append(threading.get_ident())

    audit = await run_restore_hooks([hook], restore_context(), 1000)
    assert audit is not None
    assert [h["hook"] for h in audit["hooks"]] == ["hook"]
    assert threads
    assert threading.get_ident() not in threads
    limiter = anyio.CapacityLimiter(1)
    held, release = anyio.Event(), anyio.Event()

    async def hold() -> None:
        async with limiter:
            held.set()
            await release.wait()

    async with anyio.create_task_group() as group:
        group.start_soon(hold)
        await held.wait()
        with pytest.raises(CheckpointRestoreError, match="timed out"):
            await run_restore_hooks([hook], restore_context(), 50, limiter=limiter)
        release.set()
    assert len(threads) == 1


def test_only_host_sync_callables_leave_the_event_loop() -> None:
    """Coroutine functions and the kernel's own callables run inline; host sync callables,
    partials of them and callable objects run in a thread."""
    import functools

    from prism_core import create_load_skill_tool
    from prism_core._threads import runs_inline

    async def coroutine(args: Any, context: Any) -> None:
        return None

    class Host:
        def __call__(self, args: Any, context: Any) -> None:
            return None

    assert runs_inline(coroutine)
    assert runs_inline(functools.partial(coroutine, {}))
    assert runs_inline(create_load_skill_tool().execute)
    assert not runs_inline(lambda a, c: None)
    assert not runs_inline(Host())
    assert not runs_inline(functools.partial(time.sleep, 1))


async def ticks_while(action: Any) -> tuple[Any, int]:
    """Run ``action()`` while another task ticks every 10 ms; its result and the tick count."""
    ticks = [0]
    outcome: list[Any] = []

    async def tick() -> None:
        while True:
            await anyio.sleep(0.01)
            ticks[0] += 1

    async with anyio.create_task_group() as group:
        group.start_soon(tick)
        outcome.append(await action())
        group.cancel_scope.cancel()
    return outcome[0], ticks[0]


@pytest.mark.anyio
async def test_a_blocking_sync_stop_hook_leaves_the_event_loop_free() -> None:
    """A sync stop hook that blocks for 0.4 s runs in a thread under the agent's limiter:
    another task keeps making progress meanwhile."""
    limiter = anyio.CapacityLimiter(2)
    seen: list[tuple[int, float]] = []

    def hook(context: Any) -> None:
        seen.append((threading.get_ident(), limiter.borrowed_tokens))
        time.sleep(0.4)

    agent = scripted_agent([text_turn("done")], stop_hooks=[hook], thread_limiter=limiter)
    result, ticks = await ticks_while(lambda: agent.create_session().run("go"))
    assert result.text == "done"
    assert ticks >= 10
    assert len(seen) == 1
    assert seen[0][0] != threading.get_ident()
    assert seen[0][1] == 1


@pytest.mark.anyio
async def test_a_blocking_sync_turn_policy_leaves_the_event_loop_free() -> None:
    """A sync turn policy ``stop`` that blocks runs in a thread under the agent's limiter."""
    limiter = anyio.CapacityLimiter(2)
    seen: list[tuple[int, float]] = []

    def stop(context: Any) -> dict[str, str]:
        seen.append((threading.get_ident(), limiter.borrowed_tokens))
        time.sleep(0.2)
        return {"action": "continue"}

    agent = scripted_agent(
        [tool_turn(("c1", "t", {})), text_turn("done")],
        tools=[ToolDefinition("t", lambda args, context: 1)],
        turn_policy=stop,
        thread_limiter=limiter,
    )
    result, ticks = await ticks_while(lambda: agent.create_session().run("go"))
    assert result.text == "done"
    assert len(seen) >= 2
    assert ticks >= 5 * len(seen)
    assert all(ident != threading.get_ident() for ident, _ in seen)
    assert all(borrowed == 1 for _, borrowed in seen)
