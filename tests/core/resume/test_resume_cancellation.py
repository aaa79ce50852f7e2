"""Resume cancellation, bounded resume streams and the restore audit."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AbortSignal,
    AgentRunError,
    CheckpointRestoreError,
    ResumeAbortedError,
    ToolDefinition,
    create_agent,
    create_agent_run_lifecycle,
    create_secret_redactor,
    load_agent_run_state,
    resume_agent_run,
    resume_agent_run_stream,
)

from ..durable.test_crash_recovery import crash, investigation, probe_tool, ref
from ..durable_support import REVISION, World
from ..helpers import paused_consumer

pytestmark = pytest.mark.anyio


async def crashed(world: World, log: list[int], **kw: Any) -> tuple[str, int]:
    """A crashed every-turn run (tools 0 and 1 ran) and its checkpoint version."""
    run_id = await crash(world, log, **kw)
    status = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert status is not None
    return run_id, status.version


def continue_input(version: int) -> dict[str, Any]:
    return {"expected_version": version, "decision": "continue"}


async def test_an_aborted_signal_claims_nothing_and_runs_no_tool() -> None:
    """Aborted before the call: no store access at all, no tool, the record unchanged."""
    world, log = World(), []
    run_id, version = await crashed(world, log)
    before = await world.checkpoints.raw(run_id)
    calls = world.checkpoints.calls
    signal = AbortSignal()
    signal.abort("operator cancelled")
    agent = world.agent(investigation(4), tools=[probe_tool(log)])
    with pytest.raises(ResumeAbortedError, match="operator cancelled") as caught:
        await resume_agent_run(
            agent, ref(run_id), continue_input(version), signal=signal, **world.resume_options()
        )
    assert caught.value.code == "ERR_PRISM_ABORTED"
    assert world.checkpoints.calls == calls
    assert log == [0, 1]
    assert await world.checkpoints.raw(run_id) == before


async def test_an_abort_during_preparation_stops_at_the_next_step() -> None:
    """Fired by the on_session observer: the decisions, hooks and claim never happen."""
    world, log = World(), []
    run_id, version = await crashed(world, log)
    before = await world.checkpoints.raw(run_id)
    saves = world.checkpoints.saves
    signal = AbortSignal()
    hooks: list[str] = []
    agent = world.agent(investigation(4), tools=[probe_tool(log)])
    with pytest.raises(ResumeAbortedError):
        await resume_agent_run(
            agent,
            ref(run_id),
            continue_input(version),
            signal=signal,
            on_session=lambda session: signal.abort("stop"),
            restore_hooks=[lambda cp: hooks.append("restored")],
            **world.resume_options(),
        )
    assert (world.checkpoints.saves, hooks, log) == (saves, [], [0, 1])
    assert await world.checkpoints.raw(run_id) == before


async def test_an_abort_during_the_restore_pass_stops_it_and_skips_compensation() -> None:
    """The hook in flight is cancelled (its signal fired), later hooks never run, nothing is
    compensated, and the resume fails with CheckpointRestoreError naming that hook."""
    world, log = World(), []
    run_id, version = await crashed(world, log)
    before = await world.checkpoints.raw(run_id)
    signal = AbortSignal()
    calls: list[str] = []
    fired: list[tuple[bool, Any]] = []

    class Layer:
        def __init__(self, id: str, slow: bool = False) -> None:
            self.id, self.slow = id, slow

        async def restore(self, ctx: Any) -> None:
            calls.append(f"restore {self.id}")
            if self.slow:
                signal.abort("deploy")
                fired.append((ctx.signal.aborted, ctx.signal.reason))
                await anyio.sleep(5)
                calls.append("slow finished")

        def compensate(self, ctx: Any) -> None:
            calls.append(f"compensate {self.id}")

    agent = world.agent(investigation(4), tools=[probe_tool(log)])
    with anyio.fail_after(2):
        with pytest.raises(CheckpointRestoreError) as caught:
            await resume_agent_run(
                agent,
                ref(run_id),
                continue_input(version),
                signal=signal,
                restore_hooks=[Layer("a"), Layer("b", slow=True), Layer("c")],
                **world.resume_options(),
            )
    assert (caught.value.hook, caught.value.compensation) == ("b", None)
    assert fired == [(True, "deploy")]
    assert calls == ["restore a", "restore b"]
    assert await world.checkpoints.raw(run_id) == before
    assert log == [0, 1]


async def test_a_cancelled_scope_before_the_claim_claims_nothing() -> None:
    """A host's anyio timeout around the resume, fired in a restore hook, writes nothing."""
    world, log = World(), []
    run_id, version = await crashed(world, log)
    before = await world.checkpoints.raw(run_id)

    async def slow(ctx: Any) -> None:
        await anyio.sleep(5)

    agent = world.agent(investigation(4), tools=[probe_tool(log)])
    with anyio.move_on_after(0.05) as scope:
        await resume_agent_run(
            agent,
            ref(run_id),
            continue_input(version),
            restore_hooks=[slow],
            **world.resume_options(),
        )
    assert scope.cancelled_caught
    assert await world.checkpoints.raw(run_id) == before
    assert log == [0, 1]


async def test_a_live_resumed_turn_aborts_like_a_live_run() -> None:
    """After the claim the signal aborts the resumed run: no later provider turn or tool; the
    call that fired it was under way, so it is left in doubt, not recorded ``aborted``."""
    world, log = World(), []
    run_id, version = await crashed(world, log)
    signal = AbortSignal()

    def probe(args: dict[str, Any], context: Any) -> str:
        log.append(args["step"])
        signal.abort("shutting down")
        return "ok"

    agent = world.agent(investigation(4), tools=[ToolDefinition("probe", probe)])
    with pytest.raises(AgentRunError) as caught:
        await resume_agent_run(
            agent, ref(run_id), continue_input(version), signal=signal, **world.resume_options()
        )
    result = caught.value.result
    assert result.status == "aborted"
    assert result.abort_reason == "shutting down"
    assert log == [0, 1, 2]
    status = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert status is not None
    assert status.state.status == "running"
    assert len([c for c in status.state.pending_calls if c.status == "dispatched"]) == 1


async def test_the_lifecycle_takes_the_signal_too() -> None:
    """resume(..., signal=...) on the lifecycle refuses before the claim."""
    world, log = World(), []
    run_id, version = await crashed(world, log)
    saves = world.checkpoints.saves
    agent = world.agent(investigation(4), tools=[probe_tool(log)])
    lifecycle = create_agent_run_lifecycle(
        checkpoints=world.checkpoints, resolve_agent=lambda agent_id: (agent, REVISION)
    )
    signal = AbortSignal()
    signal.abort()
    with pytest.raises(ResumeAbortedError):
        await lifecycle.resume(ref(run_id), continue_input(version), signal=signal)
    stream = lifecycle.resume_stream(ref(run_id), continue_input(version), signal=signal)
    with pytest.raises(ResumeAbortedError):
        await stream.__anext__()
    assert (world.checkpoints.saves, log) == (saves, [0, 1])


def chatty_probe(log: list[int], reports: int) -> ToolDefinition:
    """A probe that reports progress ``reports`` times."""

    def probe(args: dict[str, Any], context: Any) -> str:
        log.append(args["step"])
        for n in range(reports):
            context.report_progress({"n": n})
        return "ok"

    return ToolDefinition("probe", probe)


async def test_a_resume_stream_overflow_closes_it_and_the_resumed_run_completes() -> None:
    """Under the close policy, a consumer that pauses while the resumed run queues more than
    max_queued_events gets one event_subscriber_overflow notice and the stream ends; the
    run does not wait for its consumer and goes on to its end."""
    world, log = World(), []
    run_id, version = await crashed(world, log)
    agent = world.agent(investigation(4), tools=[chatty_probe(log, 10)])
    stream = resume_agent_run_stream(
        agent,
        ref(run_id),
        continue_input(version),
        max_queued_events=4,
        **world.resume_options(),
    )
    events = await paused_consumer(stream, lambda: ended(world, run_id))
    names = [e.type for e in events]
    assert names[-1] == "event_subscriber_overflow"
    assert names.count("event_subscriber_overflow") == 1
    assert len(events) <= 1 + 4
    assert events[-1].max_queued_events == 4
    assert events[-1].dropped >= 1
    # The resumed run went on past the overflow: every later tool turn ran.
    assert log == [0, 1, 2, 3]
    status = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert status is not None
    assert status.state.status == "succeeded"
    assert stream.result is not None
    assert stream.result.status == "succeeded"


async def ended(world: World, run_id: str) -> bool:
    """Whether the run's checkpoint records its end."""
    status = await load_agent_run_state(world.checkpoints, {"run_id": run_id})
    return status is not None and status.state.terminal


async def test_a_resume_stream_dropping_newest_keeps_going() -> None:
    """drop_newest: a consumer that pauses keeps what fit plus one notice, and the resumed
    run completes."""
    world, log = World(), []
    run_id, version = await crashed(world, log)
    agent = world.agent(investigation(4), tools=[chatty_probe(log, 10)])
    stream = resume_agent_run_stream(
        agent,
        ref(run_id),
        continue_input(version),
        max_queued_events=4,
        overflow="drop_newest",
        **world.resume_options(),
    )
    names = [event.type for event in await paused_consumer(stream, lambda: ended(world, run_id))]
    assert names[-1] == "event_subscriber_overflow"
    assert names.count("event_subscriber_overflow") == 1
    assert log == [0, 1, 2, 3]
    assert stream.result is not None
    assert stream.result.status == "succeeded"
    # The default bound lets every event through.
    world2, log2 = World(), []
    run_id2, version2 = await crashed(world2, log2)
    agent2 = world2.agent(investigation(4), tools=[chatty_probe(log2, 10)])
    full = resume_agent_run_stream(
        agent2, ref(run_id2), continue_input(version2), **world2.resume_options()
    )
    full_names = [event.type async for event in full]
    assert full_names.count("tool_execution_progress") == 20
    assert "event_subscriber_overflow" not in full_names


async def test_unnamed_hooks_get_positional_names() -> None:
    """A lambda is hook[i] in the audit and on the error, never <lambda>."""
    world, log = World(), []
    run_id, version = await crashed(world, log)
    agent = world.agent(investigation(4), tools=[probe_tool(log)])
    stream = resume_agent_run_stream(
        agent,
        ref(run_id),
        continue_input(version),
        restore_hooks=[lambda cp: None, lambda cp: None],
        **world.resume_options(),
    )
    events = [event async for event in stream]
    resumed = next(event for event in events if event.type == "agent_resumed")
    assert [h["hook"] for h in resumed.restore["hooks"]] == ["hook[0]", "hook[1]"]

    world, log = World(), []
    run_id, version = await crashed(world, log)
    agent = world.agent(investigation(4), tools=[probe_tool(log)])

    def ok(cp: Any) -> None:
        return None

    def broken(cp: Any) -> None:
        raise OSError("nope")

    with pytest.raises(CheckpointRestoreError) as caught:
        await resume_agent_run(
            agent,
            ref(run_id),
            continue_input(version),
            restore_hooks=[ok, lambda cp: broken(cp)],
            **world.resume_options(),
        )
    assert caught.value.hook == "hook[1]"
    # Function hooks have nothing to compensate: no compensation ran.
    assert caught.value.compensation is None


async def test_a_failed_compensation_reason_is_redacted_and_bounded() -> None:
    """The recorded reason goes through the agent's redactor and is cut to 1024 bytes."""
    secret = "tok-secret-42"
    world, log = World(), []
    run_id, version = await crashed(world, log, redactor=create_secret_redactor([secret]))

    class Layer:
        id = "git"

        def restore(self, ctx: Any) -> None:
            raise OSError("restore failed")

        def compensate(self, ctx: Any) -> None:
            raise RuntimeError(f"{secret} " + "x" * 5000)

    agent = create_agent(
        id="investigator",
        model={"provider": "mock", "model": "demo"},
        store=world.sessions,
        tools=[probe_tool(log)],
        redactor=create_secret_redactor([secret]),
        provider=world.agent(investigation(4)).provider,
    )
    with pytest.raises(CheckpointRestoreError) as caught:
        await resume_agent_run(
            agent,
            ref(run_id),
            continue_input(version),
            restore_hooks=[Layer()],
            **world.resume_options(),
        )
    compensation = caught.value.compensation
    assert compensation is not None
    # ``ran`` lists every hook whose compensate was attempted, the failing one included.
    assert compensation["ran"] == ["git"]
    failed = compensation["failed"]
    assert failed["hook"] == "git"
    assert secret not in failed["reason"]
    assert failed["reason"].startswith("[REDACTED] xxx")
    assert len(failed["reason"].encode("utf-8")) == 1024
    record = await world.checkpoints.inner.load(AGENT_RUN_NAMESPACE, run_id)
    assert record is not None
    assert record.value["status"] == "running"


async def test_an_abort_during_compensation_stops_it_between_hooks() -> None:
    """The caller aborts while the failing hook is compensated: that compensation sees its
    signal fire and finishes, the earlier hooks are not compensated, the resume raises the
    abort, and nothing is claimed."""
    world, log = World(), []
    run_id, version = await crashed(world, log)
    before = await world.checkpoints.raw(run_id)
    signal = AbortSignal()
    calls: list[str] = []

    class Layer:
        def __init__(self, id: str, *, broken: bool = False) -> None:
            self.id, self.broken = id, broken

        def restore(self, ctx: Any) -> None:
            calls.append(f"restore {self.id}")
            if self.broken:
                raise OSError("disk full")

        async def compensate(self, ctx: Any) -> None:
            calls.append(f"compensate {self.id}")
            if self.broken:
                signal.abort("deploy")
                # Compensation is never cancelled mid-hook: this one still completes.
                await anyio.sleep(0.01)
                calls.append(f"compensated {self.id} (signal {ctx.signal.aborted})")

    agent = world.agent(investigation(4), tools=[probe_tool(log)])
    with pytest.raises(ResumeAbortedError, match="deploy") as caught:
        await resume_agent_run(
            agent,
            ref(run_id),
            continue_input(version),
            signal=signal,
            restore_hooks=[Layer("a"), Layer("b"), Layer("c", broken=True)],
            **world.resume_options(),
        )
    assert caught.value.code == "ERR_PRISM_ABORTED"
    assert calls == [
        "restore a",
        "restore b",
        "restore c",
        "compensate c",
        "compensated c (signal True)",
    ]
    assert await world.checkpoints.raw(run_id) == before
    assert log == [0, 1]


def progress_seen(events: list[Any]) -> list[int]:
    """The ``n`` of every tool progress event, in order."""
    return [e.progress["n"] for e in events if e.type == "tool_execution_progress"]


async def test_a_resume_stream_dropping_oldest_keeps_the_newest_events() -> None:
    """drop_oldest: a consumer that pauses until the resumed run has ended receives one
    notice, then the run's newest four events (what a roomy subscriber saw last), and the
    run completes."""
    world, log = World(), []
    run_id, version = await crashed(world, log)
    agent = world.agent(investigation(4), tools=[chatty_probe(log, 10)])
    watchers: list[Any] = []
    stream = resume_agent_run_stream(
        agent,
        ref(run_id),
        continue_input(version),
        max_queued_events=4,
        overflow="drop_oldest",
        on_session=lambda session: watchers.append(session.subscribe(max_queued_events=4096)),
        **world.resume_options(),
    )
    events = await paused_consumer(stream, lambda: ended(world, run_id))
    seen = [event async for event in watchers[0]]
    names = [e.type for e in events]
    assert names.count("event_subscriber_overflow") == 1
    notice = events[names.index("event_subscriber_overflow")]
    assert notice.overflow == "drop_oldest"
    # The notice comes before what was kept: the run's newest four events.
    assert names.index("event_subscriber_overflow") < len(events) - 4
    assert events[-4:] == seen[-4:]
    assert events[-1].type == "agent_finished"
    assert log == [0, 1, 2, 3]
    assert stream.result is not None
    assert stream.result.status == "succeeded"


async def test_the_lifecycle_resume_stream_honours_its_queue_bounds() -> None:
    """lifecycle.resume_stream(..., max_queued_events, overflow) queues like the function:
    drop_oldest keeps the newest events; close ends the stream and the run completes."""
    world, log = World(), []
    run_id, version = await crashed(world, log)
    agent = world.agent(investigation(4), tools=[chatty_probe(log, 10)])
    lifecycle = create_agent_run_lifecycle(
        checkpoints=world.checkpoints, resolve_agent=lambda agent_id: (agent, REVISION)
    )
    watchers: list[Any] = []
    stream = lifecycle.resume_stream(
        ref(run_id),
        continue_input(version),
        max_queued_events=4,
        overflow="drop_oldest",
        on_session=lambda session: watchers.append(session.subscribe(max_queued_events=4096)),
    )
    events = await paused_consumer(stream, lambda: ended(world, run_id))
    seen = [event async for event in watchers[0]]
    assert events[-4:] == seen[-4:]
    assert [e.type for e in events].count("event_subscriber_overflow") == 1
    assert stream.result is not None
    assert stream.result.status == "succeeded"

    world, log = World(), []
    run_id, version = await crashed(world, log)
    agent = world.agent(investigation(4), tools=[chatty_probe(log, 10)])
    lifecycle = create_agent_run_lifecycle(
        checkpoints=world.checkpoints, resolve_agent=lambda agent_id: (agent, REVISION)
    )
    closing = lifecycle.resume_stream(ref(run_id), continue_input(version), max_queued_events=4)
    closed = await paused_consumer(closing, lambda: ended(world, run_id))
    assert closed[-1].type == "event_subscriber_overflow"
    assert closed[-1].max_queued_events == 4
    assert log == [0, 1, 2, 3]
    assert closing.result is not None
    assert closing.result.status == "succeeded"


async def test_an_aborted_lifecycle_resume_touches_no_store_and_resolves_no_agent() -> None:
    """Already aborted: resume and resume_stream read nothing and never call resolve_agent.
    Aborted while the record is read: resolve_agent is still never called."""
    world, log = World(), []
    run_id, version = await crashed(world, log)
    resolved: list[str] = []
    agent = world.agent(investigation(4), tools=[probe_tool(log)])

    def resolve(agent_id: str) -> Any:
        resolved.append(agent_id)
        return (agent, REVISION)

    lifecycle = create_agent_run_lifecycle(checkpoints=world.checkpoints, resolve_agent=resolve)
    signal = AbortSignal()
    signal.abort("shutting down")
    calls = world.checkpoints.calls
    with pytest.raises(ResumeAbortedError, match="shutting down"):
        await lifecycle.resume(ref(run_id), continue_input(version), signal=signal)
    stream = lifecycle.resume_stream(ref(run_id), continue_input(version), signal=signal)
    with pytest.raises(ResumeAbortedError):
        await stream.__anext__()
    assert (world.checkpoints.calls, resolved, log) == (calls, [], [0, 1])

    late = AbortSignal()
    original = world.checkpoints.load

    async def load_then_abort(*args: Any, **kw: Any) -> Any:
        record = await original(*args, **kw)
        late.abort("deploy")
        return record

    world.checkpoints.load = load_then_abort  # type: ignore[method-assign]
    before = await world.checkpoints.raw(run_id)
    with pytest.raises(ResumeAbortedError, match="deploy"):
        await lifecycle.resume(ref(run_id), continue_input(version), signal=late)
    assert (resolved, log) == ([], [0, 1])
    assert await world.checkpoints.raw(run_id) == before
