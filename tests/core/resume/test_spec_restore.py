"""Restore hooks as the spec describes them: a signal per hook, best-effort compensation under
the per-hook timeout, and hook names."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest

from prism_core import CheckpointRestoreError, load_agent_run_state, resume_agent_run

from ..durable.test_crash_recovery import crash, investigation, probe_tool, ref
from ..durable_support import World

pytestmark = pytest.mark.anyio


async def crashed(world: World, log: list[int]) -> tuple[str, int]:
    run_id = await crash(world, log)
    status = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert status is not None
    return run_id, status.version


def continue_input(version: int) -> dict[str, Any]:
    return {"expected_version": version, "decision": "continue"}


async def test_a_hooks_signal_fires_on_its_timeout() -> None:
    """A sync hook that overruns restore_hook_timeout_ms sees its context's signal fire (so
    it can stop on its own); the resume fails naming the hook, "timed out after 30ms"."""
    world, log = World(), []
    run_id, version = await crashed(world, log)
    before = await world.checkpoints.raw(run_id)
    stopped = threading.Event()
    seen: list[Any] = []

    def fetch_repo(ctx: Any) -> None:
        seen.append(ctx.signal.aborted)
        # A hook talking to a remote system polls its signal and gives up when it fires.
        for _ in range(12000):  # a minute at most, however busy the machine
            if ctx.signal.aborted:
                seen.append(ctx.signal.reason)
                stopped.set()
                return
            threading.Event().wait(0.005)

    agent = world.agent(investigation(4), tools=[probe_tool(log)])
    with pytest.raises(CheckpointRestoreError) as caught:
        await resume_agent_run(
            agent,
            ref(run_id),
            continue_input(version),
            restore_hooks=[fetch_repo],
            restore_hook_timeout_ms=30,
            **world.resume_options(),
        )
    assert caught.value.hook == "fetch_repo"
    assert "fetch_repo" in str(caught.value)
    assert "timed out after 30ms" in str(caught.value)
    assert await anyio.to_thread.run_sync(stopped.wait, 5)
    assert seen == [False, "timed out after 30ms"]
    assert await world.checkpoints.raw(run_id) == before


async def test_compensation_is_best_effort_and_each_compensate_is_timed() -> None:
    """After a failed restore every applied layer is compensated, last first: a compensate
    that overruns the per-hook timeout is recorded as the failure ("... timed out after
    1000ms", naming it) and the pass goes on to the earlier layers. (The timeout is long
    enough that the hooks that return at once never reach it on a busy machine.)"""
    world, log = World(), []
    run_id, version = await crashed(world, log)
    calls: list[str] = []

    class Layer:
        def __init__(self, id: str, *, fails: bool = False, hangs: bool = False) -> None:
            self.id, self.fails, self.hangs = id, fails, hangs

        def restore(self, ctx: Any) -> None:
            calls.append(f"restore {self.id}")
            if self.fails:
                raise OSError("no such commit")

        async def compensate(self, ctx: Any) -> None:
            calls.append(f"compensate {self.id}")
            if self.hangs:
                await anyio.sleep_forever()

    agent = world.agent(investigation(4), tools=[probe_tool(log)])
    with anyio.fail_after(60), pytest.raises(CheckpointRestoreError) as caught:
        await resume_agent_run(
            agent,
            ref(run_id),
            continue_input(version),
            restore_hooks=[Layer("git"), Layer("docs", hangs=True), Layer("db", fails=True)],
            restore_hook_timeout_ms=1000,
            **world.resume_options(),
        )
    assert caught.value.hook == "db"
    assert calls == [
        "restore git",
        "restore docs",
        "restore db",
        "compensate db",
        "compensate docs",
        "compensate git",
    ]
    compensation = caught.value.compensation
    assert compensation is not None
    assert compensation["ran"] == ["db", "docs", "git"]
    assert compensation["failed"]["hook"] == "docs"
    assert "docs" in compensation["failed"]["reason"]
    assert "timed out after 1000ms" in compensation["failed"]["reason"]


async def test_hooks_are_named_by_id_then_restore_function_then_position() -> None:
    """An object hook is its id, else its restore function's name; a bare function is its
    name; a hook with neither is hook[i]."""
    world, log = World(), []
    run_id, version = await crashed(world, log)

    def restore_git(ctx: Any) -> None:
        return None

    class Named:
        id = "docs"

        def restore(self, ctx: Any) -> None:
            return None

    class Unnamed:
        restore = staticmethod(restore_git)

    class Anonymous:
        restore = staticmethod(lambda ctx: None)

    def plain_function(ctx: Any) -> None:
        return None

    agent = world.agent(investigation(4), tools=[probe_tool(log)])
    events: list[Any] = []

    async def collect() -> None:
        from prism_core import resume_agent_run_stream

        stream = resume_agent_run_stream(
            agent,
            ref(run_id),
            continue_input(version),
            restore_hooks=[Named(), Unnamed(), Anonymous(), plain_function, lambda ctx: None],
            **world.resume_options(),
        )
        events.extend([event async for event in stream])

    await collect()
    resumed = next(event for event in events if event.type == "agent_resumed")
    assert [h["hook"] for h in resumed.restore["hooks"]] == [
        "docs",
        "restore_git",
        "hook[2]",
        "plain_function",
        "hook[4]",
    ]
