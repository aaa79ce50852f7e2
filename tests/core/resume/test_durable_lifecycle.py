"""Durable runs: the lifecycle adapter, on_session, streams, session state, loops, secure agents."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentLoopStateError,
    AgentRunNotFoundError,
    AgentRunStateError,
    GenerateValidateReviseLoop,
    PrismError,
    Skill,
    ToolDefinition,
    create_agent_run_lifecycle,
    create_load_skill_tool,
    create_secret_redactor,
    create_secure_agent,
    load_agent_run_state,
    resume_agent_run,
    resume_agent_run_stream,
)

from ..durable_support import REVISION, World
from ..helpers import echo_tool, text_turn, tool_turn, types

TURNS = [tool_turn(("c1", "echo", {"n": 1})), text_turn("done")]


async def suspend(world: World, **config: Any) -> Any:
    """One suspended run (interrupt before every tool)."""
    config.setdefault("tools", [echo_tool()])
    agent = world.agent(config.pop("turns", TURNS), **config)
    result = await agent.create_session(id="s1").run(
        "go", run_state=world.run_state(interrupt_before_tool=True, ownership=config.get("_owner"))
    )
    assert result.status == "suspended"
    return result


def ref(result: Any) -> dict[str, str]:
    """The run reference of ``result``."""
    return {"run_id": result.run_id, "session_id": result.session_id}


@pytest.mark.anyio
async def test_lifecycle_status_and_resume_with_agent_resolution() -> None:
    """status() returns state and version; resume() resolves the agent by id, sync or async."""
    world = World()
    result = await suspend(world)
    resolved: list[str] = []

    async def resolve(agent_id: str) -> Any:
        resolved.append(agent_id)
        return {"agent": world.agent(TURNS, tools=[echo_tool()]), "definition_revision": REVISION}

    lifecycle = create_agent_run_lifecycle(checkpoints=world.checkpoints, resolve_agent=resolve)
    status = await lifecycle.status(ref(result))
    assert status is not None
    assert (status.state.status, status.version) == ("suspended", 1)
    assert await lifecycle.status(ref(result), agent_id="someone-else") is None
    assert await lifecycle.status({"run_id": "nope", "session_id": "s1"}) is None
    done = await lifecycle.resume(
        ref(result), {"expected_version": 1, "decision": "approve"}, agent_id="investigator"
    )
    assert done.status == "succeeded"
    assert resolved == ["investigator"]


@pytest.mark.anyio
async def test_lifecycle_resume_stream_and_capability_check() -> None:
    """resume_stream yields the resumed run; an agent_id that is not the run's is refused
    with "Agent run capability mismatch"."""
    world = World()
    result = await suspend(world)
    lifecycle = create_agent_run_lifecycle(
        checkpoints=world.checkpoints,
        resolve_agent=lambda agent_id: (world.agent(TURNS, tools=[echo_tool()]), REVISION),
    )
    with pytest.raises(AgentRunStateError) as intruder:
        await lifecycle.resume(
            ref(result), {"expected_version": 1, "decision": "approve"}, agent_id="intruder"
        )
    assert str(intruder.value) == "Agent run capability mismatch"
    assert not isinstance(intruder.value, AgentRunNotFoundError)
    stream = lifecycle.resume_stream(ref(result), {"expected_version": 1, "decision": "approve"})
    kinds = types([e async for e in stream])
    assert kinds[:2] == ["agent_started", "agent_resumed"]
    assert kinds[-1] == "agent_finished"


@pytest.mark.anyio
async def test_on_session_sees_the_session_and_a_throw_fails_closed() -> None:
    """on_session gets the rebuilt session; if it raises, nothing is written or run."""
    world, log = World(), []
    result = await suspend(world, tools=[echo_tool(log=log)])
    before = await world.checkpoints.raw(result.run_id)

    def explode(session: Any) -> None:
        raise RuntimeError("observer down")

    with pytest.raises(RuntimeError, match="observer down"):
        await resume_agent_run(
            world.agent(TURNS, tools=[echo_tool(log=log)]),
            ref(result),
            {"expected_version": 1, "decision": "approve"},
            on_session=explode,
            **world.resume_options(),
        )
    assert await world.checkpoints.raw(result.run_id) == before
    assert log == []
    seen: list[str] = []
    await resume_agent_run(
        world.agent(TURNS, tools=[echo_tool(log=log)]),
        ref(result),
        {"expected_version": 1, "decision": "approve"},
        on_session=lambda s: seen.append(s.id),
        **world.resume_options(),
    )
    assert seen == ["s1"]


def held_tool(started: Any, log: list[Any], **kw: Any) -> ToolDefinition:
    """An ``echo`` tool that says it started, then waits until it is cancelled."""

    async def execute(args: dict[str, Any], context: Any) -> Any:
        log.append(args)
        started.set()
        await anyio.sleep_forever()

    return ToolDefinition("echo", execute, **kw)


@pytest.mark.anyio
async def test_leaving_a_resume_stream_early_aborts_only_the_resumed_run() -> None:
    """aclose() while nothing side-effecting is under way (the approved call is read-only
    and waits) aborts the resumed execution and records ``aborted``."""
    world, log, started = World(), [], anyio.Event()
    result = await suspend(world, tools=[held_tool(started, [], effect="read")])
    stream = resume_agent_run_stream(
        world.agent(TURNS, tools=[held_tool(started, log, effect="read")]),
        ref(result),
        {"expected_version": 1, "decision": "approve"},
        **world.resume_options(),
    )
    kinds = [(await stream.__anext__()).type, (await stream.__anext__()).type]
    await started.wait()
    await stream.aclose()
    assert kinds == ["agent_started", "agent_resumed"]
    assert log == [{"n": 1}]
    status = await load_agent_run_state(world.checkpoints, ref(result))
    assert status is not None
    assert status.state.status == "aborted"


@pytest.mark.anyio
async def test_leaving_a_resume_stream_while_a_side_effect_runs_leaves_it_in_doubt() -> None:
    """aclose() while the approved side-effecting call runs: the run is not recorded
    ``aborted`` (the effect may have happened); its dispatched mark stays, the call in doubt
    for a continue to settle (API.md: any abort while a side-effecting call is dispatched
    leaves that call in doubt)."""
    world, log, started = World(), [], anyio.Event()
    result = await suspend(world, tools=[held_tool(started, [])])
    stream = resume_agent_run_stream(
        world.agent(TURNS, tools=[held_tool(started, log)]),
        ref(result),
        {"expected_version": 1, "decision": "approve"},
        **world.resume_options(),
    )
    await stream.__anext__()
    await started.wait()
    await stream.aclose()
    assert stream.result is not None
    assert stream.result.status == "aborted"
    assert "c1 was under way" in (stream.result.error.message if stream.result.error else "")
    status = await load_agent_run_state(world.checkpoints, ref(result))
    assert status is not None
    assert status.state.status == "running"
    assert [c.tool_call_id for c in status.state.pending_calls if c.status == "dispatched"] == [
        "c1"
    ]


@pytest.mark.anyio
async def test_persisted_packs_are_reinstated_and_gate_later_calls() -> None:
    """A pack ask rule suspends; the resumed run re-compiles it and it gates again."""
    world, log = World(), []
    pack = {
        "id": "ops",
        "rules": [
            {
                "id": "ask-deploy",
                "tool": "deploy",
                "pattern": "prod",
                "action": "ask",
                "reason": "production deploy",
            }
        ],
    }
    deploy = ToolDefinition("deploy", lambda a, c: log.append(a) or "deployed")
    turns = [
        tool_turn(("c1", "deploy", {"env": "prod"})),
        tool_turn(("c2", "deploy", {"env": "prod-eu"})),
        text_turn("done"),
    ]
    agent = world.agent(turns, tools=[deploy])
    session = agent.create_session(id="s1", guardrail_packs=[pack])
    first = await session.run("ship it", run_state=world.run_state(persist_session_state=True))
    assert first.status == "suspended"
    (decision,) = first.interruption.pending_decisions
    assert decision.guardrail == "pack:ops/ask-deploy"
    record = await world.checkpoints.load(AGENT_RUN_NAMESPACE, first.run_id)
    assert record is not None
    assert record.value["session_state"]["guardrail_packs"]["packs"][0]["id"] == "ops"
    second = await resume_agent_run(
        world.agent(turns, tools=[deploy]),
        ref(first),
        {"expected_version": 1, "decision": "approve"},
        **world.resume_options(),
    )
    assert second.status == "suspended"
    assert second.interruption.pending_decisions[0].guardrail == "pack:ops/ask-deploy"
    assert log == [{"env": "prod"}]


@pytest.mark.anyio
async def test_unresolvable_pack_block_fails_closed_with_no_write() -> None:
    """A pack id the resuming host does not know refuses the resume before any work."""
    world = World()
    # secrets-hygiene comes from prism_packs; without the plugin the id is unknown.
    with pytest.raises(PrismError, match="unknown guardrail pack"):
        world.agent(TURNS).create_session(guardrail_packs=["secrets-hygiene"])
    import prism_packs

    with_packs = world.agent(TURNS, tools=[echo_tool()], plugins=[prism_packs.plugin])
    result = await with_packs.create_session(id="s1", guardrail_packs=["secrets-hygiene"]).run(
        "go", run_state=world.run_state(interrupt_before_tool=True, persist_session_state=True)
    )
    before = await world.checkpoints.raw(result.run_id)
    with pytest.raises(AgentRunStateError, match="guardrail packs"):
        await resume_agent_run(
            world.agent(TURNS, tools=[echo_tool()]),
            ref(result),
            {"expected_version": 1, "decision": "approve"},
            **world.resume_options(),
        )
    assert await world.checkpoints.raw(result.run_id) == before


@pytest.mark.anyio
async def test_loaded_skills_ride_the_checkpoint() -> None:
    """persist_session_state carries loaded skill names; include_skill_bodies their text."""
    world = World()
    skills = [Skill("triage", "Check deploys first.", description="triage")]
    turns = [
        tool_turn(("c0", "load_skill", {"name": "triage"})),
        tool_turn(("c1", "echo", {"n": 1})),
        text_turn("done"),
    ]
    tools = [echo_tool(), create_load_skill_tool()]
    agent = world.agent(turns, tools=tools, skills=skills)
    stream = agent.create_session(id="s1").stream(
        "go",
        run_state=world.run_state(
            persist_session_state=True, include_skill_bodies=True, checkpoint_policy="every-turn"
        ),
    )
    async for event in stream:
        if event.type == "tool_execution_finished" and event.name == "echo":
            break
    await stream.aclose()
    record = await world.checkpoints.load(AGENT_RUN_NAMESPACE, stream.run_id or "")
    assert record is not None
    state = record.value["session_state"]
    assert state["loaded_skill_names"] == ["triage"]
    assert state["loaded_skill_bodies"] == [
        {"name": "triage", "instructions": "Check deploys first."}
    ]


@pytest.mark.anyio
async def test_loop_snapshot_rides_the_checkpoint_and_revision_is_checked() -> None:
    """A generate-validate-revise loop's count is restored; another loop revision is refused."""
    world = World()
    loop = GenerateValidateReviseLoop(validate=lambda text: None)
    result = await suspend(world, loop=loop)
    record = await world.checkpoints.load(AGENT_RUN_NAMESPACE, result.run_id)
    assert record is not None
    assert record.value["loop_state"] == {
        "name": "generate-validate-revise",
        "revision": "1",
        "snapshot": {"attempts": 0, "revisions": 0},
    }
    import attrs

    other = attrs.evolve(loop, revision="2")
    with pytest.raises(AgentRunStateError):
        # The loop revision is part of the fingerprint, so a changed loop is refused early.
        await resume_agent_run(
            world.agent(TURNS, tools=[echo_tool()], loop=other),
            ref(result),
            {"expected_version": 1, "decision": "approve"},
            **world.resume_options(),
        )
    assert AgentLoopStateError  # the loop error class is what a matching fingerprint would raise


@pytest.mark.anyio
async def test_secure_agent_requires_every_seam() -> None:
    """create_secure_agent refuses missing pieces, forces pre-tool interruption, and blocks
    untrusted or unpermitted tools."""
    world, log = World(), []
    revoked: list[str] = []
    tool = echo_tool(log=log, parameters={"type": "object"})
    complete: dict[str, Any] = {
        "id": "secure",
        "model": {"provider": "mock", "model": "m"},
        "run_state": world.run_state(ownership={"tenant_id": "t1"}),
        "redactor": create_secret_redactor(["s3cret"]),
        "trust": lambda call, tool, ctx: None,
        "permission": lambda call, tool, ctx: "revoked" if revoked else None,
        "validate": lambda call, tool, ctx: None,
        "limits": {
            "max_turns": 5,
            "max_provider_attempts": 5,
            "max_tool_rounds": 5,
            "max_tool_calls": 5,
            "max_wall_time_ms": 60_000,
            "max_total_tokens": 10_000,
        },
        "tools": [tool],
        "store": world.sessions,
    }
    for missing in ("id", "redactor", "trust", "permission", "validate", "limits", "run_state"):
        with pytest.raises(PrismError, match=missing):
            create_secure_agent(**{k: v for k, v in complete.items() if k != missing})
    with pytest.raises(PrismError, match="max_tool_calls"):
        create_secure_agent(**{**complete, "limits": {"max_turns": 5}})
    with pytest.raises(PrismError, match="ownership"):
        create_secure_agent(**{**complete, "run_state": world.run_state()})
    with pytest.raises(PrismError, match="parameters"):
        create_secure_agent(**{**complete, "tools": [echo_tool()]})
    with pytest.raises(PrismError, match="already registered"):
        create_secure_agent(**{**complete, "tools": [tool, tool]})
    from ..durable_support import by_history

    agent = create_secure_agent(**complete, provider=by_history(TURNS))
    session = agent.create_session(id="s1")
    result = await session.run("go")
    assert result.status == "suspended"
    with pytest.raises(AgentRunStateError) as refused:
        await agent.create_session().run("go", redactor=create_secret_redactor(["x"]))
    assert str(refused.value) == "Secure agent defaults cannot be replaced per run"
    revoked.append("permission withdrawn while the run waited")
    done = await resume_agent_run(
        agent,
        ref(result),
        {"expected_version": 1, "decision": "approve"},
        **world.resume_options(ownership={"tenant_id": "t1"}),
    )
    assert done.status == "succeeded"
    assert log == []  # permission is checked again at dispatch, after the approval
