"""Crash recovery: every-turn checkpoints, continue, sidecar metadata and restore hooks."""

from __future__ import annotations

import json
from typing import Any

import anyio
import attrs
import pytest

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentRunStateError,
    CheckpointRestoreError,
    ProviderRequest,
    ToolDefinition,
    create_agent_run_lifecycle,
    create_mock_provider,
    create_secret_redactor,
    load_agent_run_state,
    provider_done,
    provider_tool_call,
    resume_agent_run,
    resume_agent_run_stream,
    tool_call_content,
)
from prism_core.durable._state import state_to_json

from ..durable_support import REVISION, DyingStore, World, run_id_when_killed
from ..helpers import text_turn, types


def investigation(turns: int) -> list[Any]:
    """``turns`` tool turns (one ``probe`` call each) then a final answer."""
    script = [
        [provider_tool_call(tool_call_content(f"c{i}", "probe", {"step": i})), provider_done()]
        for i in range(turns)
    ]
    return [*script, text_turn("root cause found")]


class WorkerDied(BaseException):
    """Stands in for SIGKILL: nothing in the run may catch it."""


def probe_tool(log: list[int]) -> ToolDefinition:
    """A side-effecting tool that records each execution."""

    def probe(args: dict[str, Any], context: Any) -> str:
        log.append(args["step"])
        return f"step {args['step']} ok"

    return ToolDefinition("probe", probe)


def dying_provider(script: list[Any], die_at_turn: int) -> Any:
    """A provider following ``script`` by history that kills the worker at a turn."""

    def events(request: ProviderRequest) -> list[Any]:
        index = sum(1 for m in request.messages if m.role == "assistant")
        if index == die_at_turn:
            raise WorkerDied()
        return script[min(index, len(script) - 1)]

    return create_mock_provider(events)


def ref(run_id: str) -> dict[str, str]:
    """The run reference in session s1."""
    return {"run_id": run_id, "session_id": "s1"}


async def crash(
    world: World,
    log: list[int],
    *,
    turns: int = 4,
    die_at_turn: int = 2,
    redactor: Any = None,
    **run_state: Any,
) -> str:
    """Run an every-turn investigation that dies at ``die_at_turn``; return its run id."""
    from prism_core import create_agent

    agent = create_agent(
        id="investigator",
        model={"provider": "mock", "model": "demo"},
        store=world.sessions,
        tools=[probe_tool(log)],
        redactor=redactor,
        provider=dying_provider(investigation(turns), die_at_turn),
    )
    stream = agent.create_session(id="s1").stream(
        "find the root cause",
        run_state=world.run_state(checkpoint_policy="every-turn", **run_state),
    )
    seen: list[str] = []

    async def consume() -> None:
        async for event in stream:
            seen.append(event.run_id)

    with pytest.raises(WorkerDied):
        await consume()
    return seen[-1]


@pytest.mark.anyio
async def test_every_turn_writes_one_running_checkpoint_per_turn() -> None:
    """Turn 1 included; each carries leaf, counters and the policy; terminal save at the end.
    A side-effecting call adds its dispatched mark, anchored at its turn's checkpoint."""
    world, log = World(), []
    agent = world.agent(investigation(3), tools=[probe_tool(log)])
    seen: list[dict[str, Any]] = []
    original = world.checkpoints.save_request

    async def spy(request: Any) -> Any:
        seen.append(json.loads(request.value_json))
        return await original(request)

    world.checkpoints.save_request = spy  # type: ignore[method-assign]
    result = await agent.create_session(id="s1").run(
        "go", run_state=world.run_state(checkpoint_policy="every-turn")
    )
    assert result.status == "succeeded"
    assert [s["status"] for s in seen] == ["running"] * 7 + ["succeeded"]
    turns, marks = seen[0:7:2], seen[1:7:2]
    assert [s["counters"]["turns"] for s in turns] == [0, 1, 2, 3]
    assert {s["checkpoint_policy"] for s in seen} == {"every-turn"}
    assert all(s["interruption"] is None and s["pending_calls"] == [] for s in turns)
    for index, mark in enumerate(marks):
        assert [(c["tool_call_id"], c["status"]) for c in mark["pending_calls"]] == [
            (f"c{index}", "dispatched")
        ]
        assert (mark["leaf_id"], mark["counters"]) == (
            turns[index]["leaf_id"],
            turns[index]["counters"],
        )
    assert result.run_state.version == 8


@pytest.mark.anyio
async def test_read_only_and_idempotent_calls_write_no_dispatched_mark() -> None:
    """``effect="read"`` and ``idempotent=True`` tools run without a mark: one write a turn."""
    for options in ({"effect": "read"}, {"idempotent": True}):
        world, log = World(), []
        probe = attrs.evolve(probe_tool(log), **options)
        agent = world.agent(investigation(3), tools=[probe])
        result = await agent.create_session(id="s1").run(
            "go", run_state=world.run_state(checkpoint_policy="every-turn")
        )
        assert result.status == "succeeded"
        assert log == [0, 1, 2]
        assert world.checkpoints.saves == 4 + 1


@pytest.mark.anyio
async def test_crash_then_continue_runs_every_tool_exactly_once() -> None:
    """A worker dies mid-run; a new worker continues the same run; no tool runs twice."""
    world, log = World(), []
    run_id = await crash(world, log, turns=4, die_at_turn=2)
    assert log == [0, 1]
    status = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert status is not None
    assert status.state.status == "running"
    resumed = world.agent(investigation(4), tools=[probe_tool(log)])
    stream = resume_agent_run_stream(
        resumed,
        ref(run_id),
        {"expected_version": status.version, "decision": "continue"},
        **world.resume_options(),
    )
    events = [e async for e in stream]
    assert types(events)[:2] == ["agent_started", "agent_resumed"]
    assert events[-1].type == "agent_finished"
    assert log == [0, 1, 2, 3]
    assert stream.result is not None
    assert stream.result.run_id == run_id
    assert stream.result.text == "root cause found"
    texts = [e.message.role for e in await world.sessions.list("s1") if e.message]
    assert texts.count("tool") == 4


@pytest.mark.anyio
async def test_continue_after_a_store_that_failed_at_the_crash() -> None:
    """The first worker's store fails from its fourth write on (the worker is as good as
    dead); a second worker on a healthy connection continues from the last good checkpoint
    and no tool runs twice, including the one that ran after that checkpoint."""
    from prism_core import AgentRunError, CheckpointStoreError, create_agent

    world, log = World(), []

    class FailingAfter:
        def __init__(self, inner: Any, healthy_writes: int) -> None:
            self.inner, self.left = inner, healthy_writes

        async def save_request(self, request: Any) -> Any:
            if self.left <= 0:
                raise CheckpointStoreError("connection reset by peer")
            self.left -= 1
            return await self.inner.save_request(request)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    broken = FailingAfter(world.checkpoints, healthy_writes=3)
    agent = create_agent(
        id="investigator",
        model={"provider": "mock", "model": "demo"},
        store=world.sessions,
        tools=[probe_tool(log)],
        provider=dying_provider(investigation(4), 99),
    )
    with pytest.raises(AgentRunError) as info:
        await agent.create_session(id="s1").run(
            "go",
            run_state={
                "checkpoints": broken,
                "definition_revision": REVISION,
                "checkpoint_policy": "every-turn",
            },
        )
    assert "connection reset" in str(info.value)
    # The fourth write is step 1's dispatched mark: it failed, so step 1 never ran.
    assert log == [0]
    run_id = info.value.result.run_id
    status = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert status is not None
    assert (status.state.status, status.version) == ("running", 3)
    resumed = await resume_agent_run(
        world.agent(investigation(4), tools=[probe_tool(log)]),
        ref(run_id),
        {"expected_version": 3, "decision": "continue"},
        **world.resume_options(),
    )
    assert resumed.status == "succeeded"
    assert log == [0, 1, 2, 3]


@pytest.mark.anyio
async def test_completed_round_after_the_checkpoint_is_not_redispatched() -> None:
    """Results the crashed worker stored after its last checkpoint are kept, not re-run."""
    world, log = World(), []
    from prism_core import create_agent

    calls = {"n": 0}

    def probe(args: dict[str, Any], context: Any) -> str:
        log.append(args["step"])
        calls["n"] += 1
        return "ok"

    # Step 1's result is stored; the worker dies at the next turn's checkpoint write.
    world.checkpoints = DyingStore(lambda: calls["n"] == 2)
    agent = create_agent(
        id="investigator",
        model={"provider": "mock", "model": "demo"},
        store=world.sessions,
        tools=[ToolDefinition("probe", probe)],
        provider=dying_provider(investigation(3), 99),
    )
    stream = agent.create_session(id="s1").stream(
        "go", run_state=world.run_state(checkpoint_policy="every-turn")
    )
    run_id = await run_id_when_killed(stream)
    status = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert status is not None
    resumed = await resume_agent_run(
        world.agent(investigation(3), tools=[ToolDefinition("probe", probe)]),
        ref(run_id),
        {"expected_version": status.version, "decision": "continue"},
        **world.resume_options(),
    )
    assert resumed.status == "succeeded"
    assert log == [0, 1, 2]


@pytest.mark.anyio
async def test_crash_inside_a_tool_round_leaves_the_call_in_doubt_and_refused() -> None:
    """A call marked dispatched without its result may have run: a continue without a
    resolution refuses with ERR_PRISM_TOOL_IN_DOUBT naming it, and writes nothing."""
    world, log = World(), []
    from prism_core import create_agent

    def dies(args: dict[str, Any], context: Any) -> str:
        raise WorkerDied()

    agent = create_agent(
        id="investigator",
        model={"provider": "mock", "model": "demo"},
        store=world.sessions,
        tools=[ToolDefinition("probe", dies)],
        provider=dying_provider(investigation(3), 99),
    )
    with pytest.raises(WorkerDied):
        await agent.create_session(id="s1").run(
            "go", run_state=world.run_state(checkpoint_policy="every-turn")
        )
    records = await world.checkpoints.inner.list(AGENT_RUN_NAMESPACE)
    run_id = records.records[0].key
    before = await world.checkpoints.raw(run_id)
    entries = len(await world.sessions.list("s1"))
    with pytest.raises(AgentRunStateError) as info:
        await resume_agent_run(
            world.agent(investigation(3), tools=[probe_tool(log)]),
            ref(run_id),
            {"expected_version": 2, "decision": "continue"},
            **world.resume_options(),
        )
    assert info.value.code == "ERR_PRISM_TOOL_IN_DOUBT"
    assert info.value.in_doubt == ("c0",)
    assert "resolutions" in str(info.value)
    assert await world.checkpoints.raw(run_id) == before
    assert len(await world.sessions.list("s1")) == entries
    assert log == []


@pytest.mark.anyio
async def test_continue_refusals_write_nothing() -> None:
    """Stale version, a suspended run, and a running state with pending work all refuse."""
    world, log = World(), []
    run_id = await crash(world, log)
    status = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert status is not None
    agent = world.agent(investigation(4), tools=[probe_tool(log)])
    before = await world.checkpoints.raw(run_id)
    world.checkpoints.saves = 0
    with pytest.raises(AgentRunStateError, match="Stale or non-running"):
        await resume_agent_run(
            agent,
            ref(run_id),
            {"expected_version": status.version - 1, "decision": "continue"},
            **world.resume_options(),
        )
    with pytest.raises(AgentRunStateError, match="Stale or non-suspended agent run resume"):
        await resume_agent_run(
            agent,
            ref(run_id),
            {"expected_version": status.version, "decision": "approve"},
            **world.resume_options(),
        )
    from prism_core.durable import Interruption, PendingDecision

    tampered = attrs.evolve(
        status.state,
        interruption=Interruption(
            kind="tool_approval",
            pending_decisions=(PendingDecision(approval_id="a", kind="tool_approval"),),
        ),
    )
    await world.checkpoints.inner.save(
        AGENT_RUN_NAMESPACE, run_id, state_to_json(tampered), version=status.version + 1
    )
    with pytest.raises(AgentRunStateError, match="no pending decisions"):
        await resume_agent_run(
            agent,
            ref(run_id),
            {"expected_version": status.version + 1, "decision": "continue"},
            **world.resume_options(),
        )
    assert world.checkpoints.saves == 0
    assert before is not None
    assert log == [0, 1]


@pytest.mark.anyio
async def test_continued_run_keeps_counters_and_turn_checkpoints() -> None:
    """The resumed run reuses the recorded counters and keeps writing turn checkpoints."""
    world, log = World(), []
    run_id = await crash(world, log, turns=4, die_at_turn=2)
    status = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert status is not None
    recorded_turns = status.state.counters.turns
    world.checkpoints.saves = 0
    result = await resume_agent_run(
        world.agent(investigation(4), tools=[probe_tool(log)]),
        ref(run_id),
        {"expected_version": status.version, "decision": "continue"},
        **world.resume_options(),
    )
    final = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert final is not None
    assert final.state.status == "succeeded"
    assert final.state.counters.turns == recorded_turns + 3
    # The claim is the first turn's checkpoint; two more turns, then the terminal save; and
    # a dispatched mark before each of the two probe calls that ran.
    assert world.checkpoints.saves == 1 + 2 + 1 + 2
    assert result.status == "succeeded"


@pytest.mark.anyio
async def test_checkpoint_metadata_is_resolved_per_write_redacted_and_preserved() -> None:
    """A callable is resolved at each write and redacted; status() returns it beside the state;
    a resume without its own metadata keeps it byte for byte, one with its own replaces it."""
    world, log = World(), []
    head = {"commit": "c0"}

    def metadata() -> dict[str, str]:
        head["commit"] = f"c{len(log)}"
        return {"git": head["commit"], "token": "tok-1"}

    redactor = create_secret_redactor(["tok-1"])
    run_id = await crash(world, log, checkpoint_metadata=metadata, redactor=redactor)
    status = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert status is not None
    assert status.metadata == {"git": "c2", "token": "[REDACTED]"}
    assert not hasattr(status.state, "metadata")
    raw = await world.checkpoints.raw(run_id)
    assert raw is not None
    assert b"tok-1" not in raw
    lifecycle = create_agent_run_lifecycle(
        checkpoints=world.checkpoints,
        resolve_agent=lambda agent_id: (
            world.agent(investigation(4), tools=[probe_tool(log)], redactor=redactor),
            REVISION,
        ),
    )
    found = await lifecycle.status(ref(run_id))
    assert found is not None
    assert found.metadata == status.metadata
    stream = lifecycle.resume_stream(
        ref(run_id), {"expected_version": status.version, "decision": "continue"}
    )
    async for event in stream:
        if event.type == "turn_started":
            break
    await stream.aclose()
    kept = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert kept is not None
    assert kept.version > status.version
    assert kept.metadata == status.metadata
    record = await world.checkpoints.inner.load(AGENT_RUN_NAMESPACE, run_id)
    assert "git" not in str(record.value)


@pytest.mark.anyio
async def test_resume_metadata_replaces_and_malformed_metadata_reads_as_absent() -> None:
    """A resume's own checkpoint_metadata annotates the claim; a malformed stored map reads
    as None instead of failing."""
    world, log = World(), []
    run_id = await crash(world, log, checkpoint_metadata={"git": "old"})
    status = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert status is not None
    agent = world.agent(investigation(4), tools=[probe_tool(log)])
    await resume_agent_run(
        agent,
        ref(run_id),
        {"expected_version": status.version, "decision": "continue"},
        checkpoint_metadata={"git": "new"},
        **world.resume_options(),
    )
    final = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert final is not None
    assert final.metadata == {"git": "new"}
    record = await world.checkpoints.inner.load(AGENT_RUN_NAMESPACE, run_id)
    await world.checkpoints.inner.save(
        AGENT_RUN_NAMESPACE,
        run_id,
        record.value,
        version=record.version + 1,
        fencing_token=record.fencing_token,
        metadata={"k": "v" * 5000},
    )
    legacy = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert legacy is not None
    assert legacy.metadata is None


@pytest.mark.anyio
async def test_metadata_bounds_fail_the_write() -> None:
    """Over 4096 bytes fails the write (the run fails, nothing saved); a fixed map with a
    non-string value is refused with the options, before the run starts."""
    from prism_core import AgentRunError, AgentRunStateError

    for bad in ({"big": "x" * 5000}, {"n": 1}):
        world = World()
        agent = world.agent(investigation(1), tools=[probe_tool([])])
        with pytest.raises((AgentRunError, AgentRunStateError)) as info:
            await agent.create_session(id="s1").run(
                "go",
                run_state=world.run_state(checkpoint_policy="every-turn", checkpoint_metadata=bad),
            )
        assert info.value.code == "ERR_PRISM_AGENT_RUN_STATE"
        assert world.checkpoints.saves == 0


@pytest.mark.anyio
async def test_restore_hooks_run_in_order_with_audit() -> None:
    """Lifecycle hooks run first, then per-resume hooks; agent_resumed carries the audit."""
    world, log = World(), []
    run_id = await crash(world, log, checkpoint_metadata={"git": "abc"})
    status = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert status is not None
    order: list[tuple[str, Any]] = []

    async def restore_git(ctx: Any) -> None:
        order.append(("git", ctx.metadata["git"]))

    class Docs:
        id = "docs"

        def restore(self, ctx: Any) -> None:
            order.append(("docs", ctx.version))

    lifecycle = create_agent_run_lifecycle(
        checkpoints=world.checkpoints,
        restore_hooks=[restore_git],
        resolve_agent=lambda agent_id: (
            world.agent(investigation(4), tools=[probe_tool(log)]),
            REVISION,
        ),
    )
    stream = lifecycle.resume_stream(
        ref(run_id),
        {"expected_version": status.version, "decision": "continue"},
        restore_hooks=[Docs()],
    )
    events = [e async for e in stream]
    assert order == [("git", "abc"), ("docs", status.version)]
    resumed = events[1]
    assert resumed.type == "agent_resumed"
    assert [h["hook"] for h in resumed.restore["hooks"]] == ["restore_git", "docs"]
    assert resumed.restore["duration_ms"] >= 0


@pytest.mark.anyio
async def test_restore_hook_failure_and_timeout_claim_nothing_and_compensate() -> None:
    """The first failing hook aborts; later hooks never run; every applied layer is
    compensated in reverse order starting with the failing one, even past a compensation that
    raises (the first failure is recorded in ``error.compensation``); the record is
    unchanged."""
    world, log = World(), []
    run_id = await crash(world, log)
    status = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert status is not None
    before = await world.checkpoints.raw(run_id)
    calls: list[str] = []

    class Layer:
        def __init__(self, id: str, fail: bool = False, compensate_fails: bool = False) -> None:
            self.id, self.fail, self.compensate_fails = id, fail, compensate_fails

        def restore(self, ctx: Any) -> None:
            calls.append(f"restore {self.id}")
            if self.fail:
                raise OSError("disk gone")

        def compensate(self, ctx: Any) -> None:
            calls.append(f"compensate {self.id}")
            if self.compensate_fails:
                raise RuntimeError("cannot undo")

    hooks = [Layer("a"), Layer("b", compensate_fails=True), Layer("c", fail=True), Layer("d")]
    agent = world.agent(investigation(4), tools=[probe_tool(log)])
    with pytest.raises(CheckpointRestoreError) as info:
        await resume_agent_run(
            agent,
            ref(run_id),
            {"expected_version": status.version, "decision": "continue"},
            restore_hooks=hooks,
            **world.resume_options(),
        )
    error = info.value
    assert error.code == "ERR_PRISM_CHECKPOINT_RESTORE"
    assert error.hook == "c"
    assert str(error) == "Checkpoint restore hook c failed: disk gone"
    assert isinstance(error.__cause__, OSError)
    # Best effort: b's failing compensation does not stop the pass, a is undone too.
    assert calls == [
        "restore a",
        "restore b",
        "restore c",
        "compensate c",
        "compensate b",
        "compensate a",
    ]
    assert error.compensation == {
        "ran": ["c", "b", "a"],
        "failed": {"hook": "b", "reason": "cannot undo"},
    }
    assert [name for name, _ in error.compensation_errors] == ["b"]
    assert await world.checkpoints.raw(run_id) == before

    cancelled: list[bool] = []

    async def slow(ctx: Any) -> None:
        try:
            await anyio.sleep(5)
        except anyio.get_cancelled_exc_class():
            cancelled.append(True)
            raise

    with pytest.raises(CheckpointRestoreError, match="timed out after 20ms") as timed:
        await resume_agent_run(
            agent,
            ref(run_id),
            {"expected_version": status.version, "decision": "continue"},
            restore_hooks=[slow],
            restore_hook_timeout_ms=20,
            **world.resume_options(),
        )
    assert timed.value.hook == "slow"
    assert cancelled == [True]
    assert await world.checkpoints.raw(run_id) == before
    assert log == [0, 1]


@pytest.mark.anyio
async def test_restore_hooks_never_run_on_deny_or_resuspend() -> None:
    """deny and a partial batch do not claim, so restore hooks stay untouched."""
    from ..helpers import echo_tool, tool_turn

    world = World()
    turns = [tool_turn(("c1", "echo", {}), ("c2", "echo", {"x": 1})), text_turn("ok")]
    agent = world.agent(turns, tools=[echo_tool()])
    result = await agent.create_session(id="s1").run(
        "go", run_state=world.run_state(interrupt_before_tool=True)
    )
    ran: list[str] = []
    first = result.interruption.pending_decisions[0].approval_id
    partial = await resume_agent_run(
        agent,
        ref(result.run_id),
        {"expected_version": 1, "decisions": [{"approval_id": first, "outcome": "allow_once"}]},
        restore_hooks=[lambda ctx: ran.append("hook")],
        **world.resume_options(),
    )
    assert partial.status == "suspended"
    denied = await resume_agent_run(
        agent,
        ref(result.run_id),
        {"expected_version": 2, "decision": "deny"},
        restore_hooks=[lambda ctx: ran.append("hook")],
        **world.resume_options(),
    )
    assert denied.status == "denied"
    assert ran == []


@pytest.mark.anyio
async def test_default_policy_state_has_no_policy_key_and_no_turn_writes() -> None:
    """checkpoint_policy appears only for every-turn; decision policy writes only on suspension."""
    world, log = World(), []
    agent = world.agent(investigation(2), tools=[probe_tool(log)])
    result = await agent.create_session(id="s1").run("go", run_state=world.run_state())
    assert result.status == "succeeded"
    assert world.checkpoints.saves == 0


@pytest.mark.anyio
async def test_continue_reinstates_the_packs_the_crashed_run_enforced() -> None:
    """persist_session_state carries the pack block; a continued run enforces the same packs
    (with their state), and a tampered block fails closed before any work."""
    import prism_packs
    from prism_core import create_agent

    world, log = World(), []
    ran: list[str] = []
    shell = ToolDefinition("shell", lambda args, ctx: ran.append(args["command"]) or "ok")
    script = [
        [provider_tool_call(tool_call_content("c0", "shell", {"command": "ls"})), provider_done()],
        [
            provider_tool_call(tool_call_content("c1", "shell", {"command": "rm -rf /"})),
            provider_done(),
        ],
        text_turn("done"),
    ]
    crashed = create_agent(
        id="investigator",
        model={"provider": "mock", "model": "demo"},
        store=world.sessions,
        tools=[shell],
        plugins=[prism_packs.plugin],
        provider=dying_provider(script, 1),
    )
    session = crashed.create_session(id="s1", guardrail_packs=["destructive-commands"])
    stream = session.stream(
        "go", run_state=world.run_state(checkpoint_policy="every-turn", persist_session_state=True)
    )
    seen: list[str] = []

    async def consume() -> None:
        async for event in stream:
            seen.append(event.run_id)

    with pytest.raises(WorkerDied):
        await consume()
    run_id = seen[-1]
    status = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert status is not None
    block = status.state.session_state.guardrail_packs  # type: ignore[union-attr]
    assert [p["id"] for p in block["packs"]] == ["destructive-commands"]

    def resumed_agent(**extra: Any) -> Any:
        return create_agent(
            id="investigator",
            model={"provider": "mock", "model": "demo"},
            store=world.sessions,
            tools=[shell],
            provider=dying_provider(script, 99),
            **extra,
        )

    tampered = attrs.evolve(
        status.state,
        session_state=attrs.evolve(
            status.state.session_state, guardrail_packs={"packs": [{"id": "nope", "version": 1}]}
        ),
    )
    await world.checkpoints.inner.save(
        AGENT_RUN_NAMESPACE, run_id, state_to_json(tampered), version=status.version + 1
    )
    with pytest.raises(AgentRunStateError, match="guardrail packs"):
        await resume_agent_run(
            resumed_agent(plugins=[prism_packs.plugin]),
            ref(run_id),
            {"expected_version": status.version + 1, "decision": "continue"},
            **world.resume_options(),
        )
    await world.checkpoints.inner.save(
        AGENT_RUN_NAMESPACE, run_id, state_to_json(status.state), version=status.version + 2
    )
    done = await resume_agent_run(
        resumed_agent(plugins=[prism_packs.plugin]),
        ref(run_id),
        {"expected_version": status.version + 2, "decision": "continue"},
        **world.resume_options(),
    )
    assert done.status == "succeeded"
    assert ran == ["ls"]  # the pack still blocks the destructive command after the crash
    assert log == []


class _ListOnlySessions:
    """A session store with only the protocol's methods, recording the reads it serves."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.reads: list[str] = []

    async def append(self, entry: Any, **kw: Any) -> Any:
        return await self.inner.append(entry, **kw)

    async def list(self, session_id: str) -> Any:
        self.reads.append("list")
        return await self.inner.list(session_id)

    async def get(self, entry_id: str) -> Any:
        return await self.inner.get(entry_id)

    async def read_branch_path(self, session_id: str, leaf_id: str | None) -> Any:
        self.reads.append("branch")
        return await self.inner.read_branch_path(session_id, leaf_id)

    async def aclose(self) -> None:
        await self.inner.aclose()


class _TailReadingSessions(_ListOnlySessions):
    """The same store with the one-call branch-and-run-tail read."""

    async def read_branch_and_run_tail(self, *args: Any) -> Any:
        self.reads.append("branch+tail")
        return await self.inner.read_branch_and_run_tail(*args)


@pytest.mark.anyio
@pytest.mark.parametrize("store", [_TailReadingSessions, _ListOnlySessions])
async def test_continue_reads_the_branch_and_run_tail_once(store: type[Any]) -> None:
    """A continue makes one branch-and-run-tail read (never ``list``) on a store that offers
    it, and one ``list`` on a store that does not; both continue the run the same way."""
    world, log = World(), []
    sessions = store(world.sessions)
    world.sessions = sessions  # type: ignore[assignment]
    run_id = await crash(world, log, turns=4, die_at_turn=2)
    status = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert status is not None
    sessions.reads.clear()
    result = await resume_agent_run(
        world.agent(investigation(4), tools=[probe_tool(log)]),
        ref(run_id),
        {"expected_version": status.version, "decision": "continue"},
        **world.resume_options(),
    )
    assert result.status == "succeeded"
    assert result.text == "root cause found"
    assert log == [0, 1, 2, 3]
    expected = "branch+tail" if store is _TailReadingSessions else "list"
    assert sessions.reads == [expected]
