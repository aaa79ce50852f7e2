"""Places where the runtime had drifted from the spec: each test quotes the sentence it checks.

The quotes come from ``spec/agent-session-runtime.md`` (ASR), ``spec/durable-runs.md`` (DR)
and the host-facing API page (API).
"""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AbortSignal,
    AgentRunError,
    AgentRunStateError,
    GenerateValidateReviseLoop,
    LoadedSkillSet,
    ResumeAbortedError,
    Skill,
    create_agent_run_lifecycle,
    load_agent_run_state,
    resume_agent_run,
    resume_agent_run_stream,
)
from prism_core.durable import MAX_PERSISTED_TOOL_NAMES
from prism_core.guardrails import compile_guardrail_packs
from prism_core.skills import MAX_LOADED_SKILLS

from .durable_support import REVISION, CountingStore, World
from .helpers import echo_tool, text_turn, tool_turn

pytestmark = pytest.mark.anyio

TURNS = [tool_turn(("c1", "echo", {"n": 1})), text_turn("done")]


def ref(result: Any) -> dict[str, str]:
    return {"run_id": result.run_id, "session_id": result.session_id}


def approve(result: Any) -> dict[str, Any]:
    return {"expected_version": result.run_state.version, "decision": "approve"}


async def suspended(world: World, log: list[Any], **config: Any) -> Any:
    """A durable run suspended before its ``echo`` call (nothing has run yet)."""
    agent = world.agent(TURNS, tools=[echo_tool(log=log)], **config)
    result = await agent.create_session(id="s1").run(
        "go", run_state=world.run_state(interrupt_before_tool=True)
    )
    assert result.status == "suspended"
    return result


# -- a pre-aborted resume signal --------------------------------------------------------------


class HostShutdown(Exception):
    """The host's own reason for aborting."""


async def test_a_pre_aborted_resume_rethrows_the_signals_exception_reason() -> None:
    """ASR: "`AgentRunResumeOptions.signal` is inherited by both entrypoints, so
    `resumeAgentRun()` aborts a live resumed provider/tool turn the same way
    `resumeAgentRunStream()` does — checked before each preparation step".

    A signal aborted with an exception is checked the way ``AbortSignal.throwIfAborted()``
    does it: that very exception is raised (as a restore hook's compensation already did),
    not wrapped; nothing is claimed, written or run, on every entry point."""
    world, log = World(), []
    result = await suspended(world, log)
    before = await world.checkpoints.raw(result.run_id)
    calls = world.checkpoints.calls
    reason = HostShutdown("draining the worker")
    signal = AbortSignal()
    signal.abort(reason)
    agent = world.agent(TURNS, tools=[echo_tool(log=log)])

    with pytest.raises(HostShutdown) as direct:
        await resume_agent_run(
            agent, ref(result), approve(result), signal=signal, **world.resume_options()
        )
    assert direct.value is reason

    stream = resume_agent_run_stream(
        agent, ref(result), approve(result), signal=signal, **world.resume_options()
    )
    with pytest.raises(HostShutdown) as streamed:
        await stream.__anext__()
    assert streamed.value is reason

    lifecycle = create_agent_run_lifecycle(
        checkpoints=world.checkpoints, resolve_agent=lambda agent_id: (agent, REVISION)
    )
    with pytest.raises(HostShutdown) as through_lifecycle:
        await lifecycle.resume(ref(result), approve(result), signal=signal)
    assert through_lifecycle.value is reason

    assert world.checkpoints.calls == calls
    assert await world.checkpoints.raw(result.run_id) == before
    assert log == []


async def test_a_pre_aborted_resume_with_a_plain_reason_is_still_resume_aborted() -> None:
    """ASR (as above): a reason that is not an exception is named by the runtime's own
    refusal, ``ERR_PRISM_ABORTED``."""
    world, log = World(), []
    result = await suspended(world, log)
    signal = AbortSignal()
    signal.abort("operator cancelled")
    with pytest.raises(ResumeAbortedError) as caught:
        await resume_agent_run(
            world.agent(TURNS, tools=[echo_tool(log=log)]),
            ref(result),
            approve(result),
            signal=signal,
            **world.resume_options(),
        )
    assert caught.value.code == "ERR_PRISM_ABORTED"
    assert "operator cancelled" in str(caught.value)
    assert log == []


# -- configuration mismatches carry the run-state code ----------------------------------------


async def test_a_resume_contradicting_the_agents_run_state_is_an_agent_run_state_refusal() -> None:
    """DR: "Everything else fails closed with `AgentRunStateError` and zero checkpoint writes:
    `expectedVersion` mismatch, ownership/fencing mismatch, revision or fingerprint
    mismatch"; API: "`AgentRunStateError` (`ERR_PRISM_AGENT_RUN_STATE`)"."""
    world, log = World(), []
    configured = world.run_state(interrupt_before_tool=True)
    agent = world.agent(TURNS, tools=[echo_tool(log=log)], run_state=configured)
    result = await agent.create_session(id="s1").run("go")
    assert result.status == "suspended"
    saves = world.checkpoints.saves
    for options in ({"definition_revision": "other"}, {"ownership": {"tenant_id": "t2"}}):
        with pytest.raises(AgentRunStateError) as caught:
            await resume_agent_run(
                agent, ref(result), approve(result), **{**world.resume_options(), **options}
            )
        assert caught.value.code == "ERR_PRISM_AGENT_RUN_STATE"
        assert "configuration mismatch on resume" in str(caught.value)
    assert world.checkpoints.saves == saves
    assert log == []


async def test_a_per_run_run_state_replacing_the_agents_is_an_agent_run_state_refusal() -> None:
    """API: "`AgentRunStateError` (`ERR_PRISM_AGENT_RUN_STATE`)" — the one code of a refused
    durable configuration; a per-run ``run_state`` naming another store is refused with it
    before anything runs or is written."""
    world, log = World(), []
    agent = world.agent(
        TURNS, tools=[echo_tool(log=log)], run_state=world.run_state(interrupt_before_tool=True)
    )
    other = CountingStore()
    with pytest.raises(AgentRunStateError) as caught:
        await agent.create_session(id="s1").run(
            "go", run_state={"checkpoints": other, "definition_revision": REVISION}
        )
    assert caught.value.code == "ERR_PRISM_AGENT_RUN_STATE"
    assert (world.checkpoints.calls, other.calls, log) == (0, 0, [])


# -- a pack guard's revision ------------------------------------------------------------------


def test_a_pack_guards_revision_names_the_pack_and_its_version() -> None:
    """ASR: "The fingerprint hashes … guardrail definitions (name/stage/revision)"; a pack's
    guards carry the pack's identity as their revision, ``<pack>@<version>``."""
    compiled = compile_guardrail_packs(
        [{"id": "house", "version": 7, "rules": [{"id": "r", "pattern": "x"}]}], catalogue={}
    )
    [guard] = compiled.tool_input
    assert (guard.name, guard.revision) == ("pack:house/r", "house@7")


# -- the revise loop's loop-local state -------------------------------------------------------


async def test_the_revise_loops_snapshot_carries_its_attempts() -> None:
    """DR: "Each turn checkpoint is a normal durable state (schema v1) carrying … loop-local
    state when the loop declares `snapshot`/`restore`"; the generate-validate-revise loop's
    state is its ``attempts`` (answers validated) and ``revisions`` (revisions asked for)."""
    world, log = World(), []
    turns = [text_turn("draft"), tool_turn(("c1", "echo", {"n": 1})), text_turn("final")]
    loop = GenerateValidateReviseLoop(
        validate=lambda text: None if text == "final" else "not final yet"
    )
    agent = world.agent(turns, tools=[echo_tool(log=log)], loop=loop)
    result = await agent.create_session(id="s1").run(
        "go", run_state=world.run_state(interrupt_before_tool=True)
    )
    assert result.status == "suspended"
    record = await world.checkpoints.load(AGENT_RUN_NAMESPACE, result.run_id)
    assert record is not None
    assert record.value["loop_state"]["snapshot"] == {"attempts": 1, "revisions": 1}

    resumed = await resume_agent_run(
        world.agent(turns, tools=[echo_tool(log=log)], loop=loop),
        ref(result),
        approve(result),
        **world.resume_options(),
    )
    assert resumed.status == "succeeded"
    assert resumed.text == "final"
    record = await world.checkpoints.load(AGENT_RUN_NAMESPACE, result.run_id)
    assert record is not None
    assert record.value["loop_state"]["snapshot"] == {"attempts": 2, "revisions": 1}


def test_a_revise_loop_snapshot_without_attempts_restores_one_per_revision() -> None:
    """DR: "The resumed run … restores loop-local state": a snapshot written before
    ``attempts`` was recorded still restores (each revision followed an invalid answer)."""
    loop = GenerateValidateReviseLoop(validate=lambda text: None).new_run()
    loop.restore({"revisions": 2})
    assert loop.snapshot() == {"attempts": 2, "revisions": 2}


# -- save-side bounds -------------------------------------------------------------------------


class UncappedSkillSet(LoadedSkillSet):
    """A host's own loaded-skill set that keeps whatever it is given."""

    def add(self, skill: Skill) -> None:
        self._loaded[skill.name] = skill


async def test_a_skill_catalogue_over_64_names_is_refused_before_any_write() -> None:
    """ASR: "the loaded-skill **name catalog** (≤64 names, ≤256 chars each) rides the
    checkpoint": a catalogue that would not load back is refused at save with
    ``AgentRunStateError`` (``ERR_PRISM_AGENT_RUN_STATE``), and nothing is written."""
    world, log = World(), []
    session = world.agent(TURNS, tools=[echo_tool(log=log)]).create_session(id="s1")
    session.loaded_skills = UncappedSkillSet()
    for index in range(MAX_LOADED_SKILLS + 1):
        session.loaded_skills.add(Skill(f"skill-{index}", "Do the thing."))
    with pytest.raises(AgentRunError) as caught:
        await session.run(
            "go", run_state=world.run_state(interrupt_before_tool=True, persist_session_state=True)
        )
    assert caught.value.code == "ERR_PRISM_AGENT_RUN_STATE"
    assert isinstance(caught.value.__cause__, AgentRunStateError)
    assert f"{MAX_LOADED_SKILLS + 1} loaded" in str(caught.value)
    assert world.checkpoints.saves == 0
    assert log == []


async def test_a_skill_catalogue_of_64_names_rides_the_checkpoint() -> None:
    """ASR (as above): at the bound the whole catalogue rides the checkpoint, uncut."""
    world, log = World(), []
    session = world.agent(TURNS, tools=[echo_tool(log=log)]).create_session(id="s1")
    names = [f"skill-{index}" for index in range(MAX_LOADED_SKILLS)]
    for name in names:
        session.loaded_skills.add(Skill(name, "Do the thing."))
    result = await session.run(
        "go", run_state=world.run_state(interrupt_before_tool=True, persist_session_state=True)
    )
    assert result.status == "suspended"
    status = await load_agent_run_state(world.checkpoints, ref(result))
    assert status is not None
    assert status.state.session_state is not None
    assert list(status.state.session_state.loaded_skill_names) == names


async def test_a_durable_grant_of_more_than_128_tool_names_is_refused_before_any_write() -> None:
    """DR: "Each turn checkpoint … carrying … the run's `toolNames` grant" — at most 128 names
    ride it; a durable run granted more is refused with ``AgentRunStateError``
    (``ERR_PRISM_AGENT_RUN_STATE``) before any provider turn or checkpoint write."""
    world, log = World(), []
    requests: list[Any] = []
    agent = world.agent(
        TURNS,
        tools=[echo_tool(log=log)],
        middleware=[{"provider_request": lambda request, context: requests.append(request)}],
    )
    names = ["echo", *(f"tool_{index}" for index in range(MAX_PERSISTED_TOOL_NAMES))]
    assert MAX_PERSISTED_TOOL_NAMES == 128
    with pytest.raises(AgentRunStateError) as caught:
        await agent.create_session(id="s1").run(
            "go",
            tool_names=names,
            run_state=world.run_state(interrupt_before_tool=True),
        )
    assert caught.value.code == "ERR_PRISM_AGENT_RUN_STATE"
    assert f"got {MAX_PERSISTED_TOOL_NAMES + 1}" in str(caught.value)
    assert (world.checkpoints.calls, requests, log) == (0, [], [])

    granted = await agent.create_session(id="s2").run(
        "go",
        tool_names=names[:MAX_PERSISTED_TOOL_NAMES],
        run_state=world.run_state(interrupt_before_tool=True),
    )
    assert granted.status == "suspended"
    status = await load_agent_run_state(world.checkpoints, ref(granted))
    assert status is not None
    assert status.state.tool_names == tuple(names[:MAX_PERSISTED_TOOL_NAMES])

    record = await world.checkpoints.load(AGENT_RUN_NAMESPACE, granted.run_id)
    assert record is not None
    await world.checkpoints.save(
        AGENT_RUN_NAMESPACE,
        granted.run_id,
        {**record.value, "tool_names": names},
        version=record.version + 1,
        expected_version=record.version,
    )
    with pytest.raises(AgentRunStateError) as stored:
        await load_agent_run_state(world.checkpoints, ref(granted))
    assert f"tool_names holds {MAX_PERSISTED_TOOL_NAMES + 1} names" in str(stored.value)
