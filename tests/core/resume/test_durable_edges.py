"""Durable edge cases: asks never outrank denies, refusals before the claim, lost claims,
crashes after approvals, held input, packs without session state, sync restore hooks."""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import pytest

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentLoopStateError,
    CheckpointConflictError,
    CheckpointRestoreError,
    Guardrail,
    ProviderRequest,
    ToolDefinition,
    create_agent,
    create_mock_provider,
    load_agent_run_state,
    resume_agent_run,
)

from ..durable_support import REVISION, DyingStore, World, run_id_when_killed
from ..helpers import echo_tool, text_turn, tool_turn

TURNS = [tool_turn(("c1", "echo", {"n": 1})), text_turn("done")]


class WorkerDied(BaseException):
    """Stands in for SIGKILL."""


def ref(result: Any) -> dict[str, str]:
    """The run reference of ``result``."""
    return {"run_id": result.run_id, "session_id": result.session_id}


def ask_then_deny() -> dict[str, Any]:
    """Tool-input guards: the first asks, the second denies the same call."""
    ask = Guardrail("ask-first", "tool_input", lambda ctx: {"action": "interrupt"})
    deny = Guardrail("deny-second", "tool_input", lambda ctx: {"action": "block"})
    return {"tool_input": [ask, deny]}


@pytest.mark.anyio
async def test_an_ask_never_outranks_a_later_deny() -> None:
    """A deny after an ask blocks the call outright: no suspension, no approval, no run."""
    world, log = World(), []
    agent = world.agent(TURNS, tools=[echo_tool(log=log)], guardrails=ask_then_deny())
    result = await agent.create_session(id="s1").run("go", run_state=world.run_state())
    assert result.status == "succeeded"
    assert log == []
    assert world.checkpoints.saves == 0


@pytest.mark.anyio
async def test_a_failing_loop_restore_refuses_before_the_claim() -> None:
    """A durable loop whose restore() raises refuses the resume and leaves the record as is."""
    world = World()

    class Fragile:
        name = "fragile"
        revision = "1"

        def __init__(self, broken: bool = False) -> None:
            self.broken = broken

        async def run(self, context: Any) -> Any:
            async for event in context.run_turns():
                yield event

        def snapshot(self) -> dict[str, int]:
            return {"n": 1}

        def restore(self, snapshot: Any) -> None:
            if self.broken:
                raise ValueError("cannot read snapshot")

    agent = world.agent(TURNS, tools=[echo_tool()], loop=Fragile())
    result = await agent.create_session(id="s1").run(
        "go", run_state=world.run_state(interrupt_before_tool=True)
    )
    before = await world.checkpoints.raw(result.run_id)
    with pytest.raises(AgentLoopStateError) as info:
        await resume_agent_run(
            world.agent(TURNS, tools=[echo_tool()], loop=Fragile(True)),
            ref(result),
            {"expected_version": 1, "decision": "approve"},
            **world.resume_options(),
        )
    assert info.value.code == "ERR_PRISM_LOOP_SNAPSHOT"
    assert await world.checkpoints.raw(result.run_id) == before


@pytest.mark.anyio
async def test_a_lost_claim_compensates_the_restored_layers() -> None:
    """When another resume wins the claim, this one's restore hooks are compensated."""
    world = World()
    agent = world.agent(TURNS, tools=[echo_tool()])
    result = await agent.create_session(id="s1").run(
        "go", run_state=world.run_state(interrupt_before_tool=True)
    )
    calls: list[str] = []

    class Layer:
        id = "git"

        def restore(self, ctx: Any) -> None:
            calls.append("restore")

        def compensate(self, ctx: Any) -> None:
            calls.append("compensate")

    original = world.checkpoints.save_request

    async def racing(request: Any) -> Any:
        raise CheckpointConflictError("Checkpoint conflict on prism.agent-run/x")

    world.checkpoints.save_request = racing  # type: ignore[method-assign]
    with pytest.raises(CheckpointConflictError):
        await resume_agent_run(
            world.agent(TURNS, tools=[echo_tool()]),
            ref(result),
            {"expected_version": 1, "decision": "approve"},
            restore_hooks=[Layer()],
            **world.resume_options(),
        )
    world.checkpoints.save_request = original  # type: ignore[method-assign]
    assert calls == ["restore", "compensate"]


@pytest.mark.anyio
async def test_crash_after_an_approved_call_finished_can_continue() -> None:
    """Default policy: the dispatched mark is the last write; its result is stored, so a
    continue after a crash goes on instead of calling it ambiguous."""
    world, log = World(), []
    agent = world.agent(TURNS, tools=[echo_tool(log=log)])
    result = await agent.create_session(id="s1").run(
        "go", run_state=world.run_state(interrupt_before_tool=True)
    )

    def dies_after_tool(request: ProviderRequest) -> Any:
        if any(m.role == "tool" for m in request.messages):
            raise WorkerDied()
        return TURNS[0]

    crashing = create_agent(
        id="investigator",
        model={"provider": "mock", "model": "demo"},
        provider=create_mock_provider(dies_after_tool),
        store=world.sessions,
        tools=[echo_tool(log=log)],
    )
    with pytest.raises(WorkerDied):
        await resume_agent_run(
            crashing,
            ref(result),
            {"expected_version": 1, "decision": "approve"},
            **world.resume_options(),
        )
    status = await load_agent_run_state(world.checkpoints, ref(result))
    assert status is not None
    assert [c.status for c in status.state.pending_calls] == ["dispatched"]
    done = await resume_agent_run(
        world.agent(TURNS, tools=[echo_tool(log=log)]),
        ref(result),
        {"expected_version": status.version, "decision": "continue"},
        **world.resume_options(),
    )
    assert done.status == "succeeded"
    assert log == [("echo", {"n": 1})]


@pytest.mark.anyio
async def test_approved_input_survives_a_crash_after_the_claim() -> None:
    """The claim keeps approved input until it is stored; a continue does not repeat it."""
    world = World()
    gate = Guardrail("review", "input", lambda ctx: {"action": "interrupt"})
    agent = world.agent([text_turn("ok")], guardrails={"input": [gate]})
    result = await agent.create_session(id="s1").run("deploy", run_state=world.run_state())
    claim_seen: list[Any] = []
    original = world.checkpoints.save_request

    async def spy(request: Any) -> Any:
        claim_seen.append(json.loads(request.value_json))
        return await original(request)

    world.checkpoints.save_request = spy  # type: ignore[method-assign]

    def dies(request: ProviderRequest) -> Any:
        raise WorkerDied()

    crashing = create_agent(
        id="investigator",
        model={"provider": "mock", "model": "demo"},
        provider=create_mock_provider(dies),
        store=world.sessions,
        guardrails={"input": [gate]},
    )
    with pytest.raises(WorkerDied):
        await resume_agent_run(
            crashing,
            ref(result),
            {"expected_version": 1, "decision": "approve"},
            **world.resume_options(),
        )
    world.checkpoints.save_request = original  # type: ignore[method-assign]
    assert claim_seen[0]["pending_input"][0]["content"][0]["text"] == "deploy"
    status = await load_agent_run_state(world.checkpoints, ref(result))
    assert status is not None
    done = await resume_agent_run(
        world.agent([text_turn("ok")], guardrails={"input": [gate]}),
        ref(result),
        {"expected_version": status.version, "decision": "continue"},
        **world.resume_options(),
    )
    assert done.status == "succeeded"
    texts = [e.message.text for e in await world.sessions.list("s1") if e.message]
    assert texts == ["deploy", "ok"]


@pytest.mark.anyio
async def test_packs_ride_durable_checkpoints_without_session_state() -> None:
    """A session's packs are carried even without persist_session_state, so a resume never
    runs with weaker enforcement."""
    world = World()
    pack = {"id": "ops", "rules": [{"id": "no-prod", "tool": "echo", "pattern": "prod"}]}
    agent = world.agent(TURNS, tools=[echo_tool()])
    result = await agent.create_session(id="s1", guardrail_packs=[pack]).run(
        "go", run_state=world.run_state(interrupt_before_tool=True)
    )
    record = await world.checkpoints.load(AGENT_RUN_NAMESPACE, result.run_id)
    assert record is not None
    block = record.value["session_state"]["guardrail_packs"]
    assert block["packs"][0]["id"] == "ops"
    assert record.value["session_state"]["loaded_skill_names"] == []


@pytest.mark.anyio
async def test_a_sync_restore_hook_is_held_to_its_timeout() -> None:
    """A blocking sync hook runs in a worker thread, so its timeout still ends the resume."""
    world = World()
    agent = world.agent(TURNS, tools=[echo_tool()])
    result = await agent.create_session(id="s1").run(
        "go", run_state=world.run_state(interrupt_before_tool=True)
    )

    def slow_sync_hook(ctx: Any) -> None:
        time.sleep(0.5)

    started = anyio.current_time()
    with pytest.raises(CheckpointRestoreError, match="timed out after 50ms"):
        await resume_agent_run(
            agent,
            ref(result),
            {"expected_version": 1, "decision": "approve"},
            restore_hooks=[slow_sync_hook],
            restore_hook_timeout_ms=50,
            **world.resume_options(),
        )
    assert anyio.current_time() - started < 0.45


@pytest.mark.anyio
async def test_kept_rounds_are_charged_to_the_counters() -> None:
    """A continue that keeps the crashed worker's completed rounds counts them."""
    world, log = World(), []
    calls = {"n": 0}

    def probe(args: dict[str, Any], context: Any) -> str:
        calls["n"] += 1
        log.append(args)
        return "ok"

    script = [
        tool_turn(("c1", "probe", {"s": 1})),
        tool_turn(("c2", "probe", {"s": 2})),
        text_turn("done"),
    ]
    # The second round's result is stored; the worker dies at the next turn's checkpoint.
    world.checkpoints = DyingStore(lambda: calls["n"] == 2)
    agent = world.agent(script, tools=[ToolDefinition("probe", probe)])
    stream = agent.create_session(id="s1").stream(
        "go", run_state=world.run_state(checkpoint_policy="every-turn")
    )
    run_id = await run_id_when_killed(stream)
    status = await load_agent_run_state(world.checkpoints, {"run_id": run_id, "session_id": "s1"})
    assert status is not None
    recorded = status.state.counters
    done = await resume_agent_run(
        world.agent(script, tools=[ToolDefinition("probe", probe)]),
        {"run_id": run_id, "session_id": "s1"},
        {"expected_version": status.version, "decision": "continue"},
        **world.resume_options(),
    )
    final = await load_agent_run_state(world.checkpoints, {"run_id": run_id, "session_id": "s1"})
    assert final is not None
    assert done.status == "succeeded"
    assert final.state.counters.tool_rounds == recorded.tool_rounds + 1
    assert final.state.counters.tool_calls == recorded.tool_calls + 1
    assert len(log) == 2
    assert REVISION
