"""Configuration that fails closed: store lifetimes, run-state drift, resume option types,
the thread limiter, provider calls that cannot encode, the event loop, logging, pack rules."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from prism_core import (
    AgentConfigError,
    AgentRunStateError,
    GuardrailPackError,
    PrismError,
    RunStateOptions,
    ToolDefinition,
    create_agent,
    create_agent_run_lifecycle,
    create_memory_checkpoint_store,
    create_mock_provider,
    create_secret_redactor,
    provider_done,
    provider_tool_call,
    resume_agent_run,
    resume_agent_run_stream,
    tool_call_content,
)
from prism_core.guardrails import GuardrailPack, PackRule

from ..durable_support import REVISION, CountingStore, World
from ..helpers import MODEL, echo_tool, scripted_agent, text_turn, tool_turn
from ..json_file_store import JsonFileCheckpointStore


def ref(result: Any) -> dict[str, str]:
    """The run reference of ``result``."""
    return {"run_id": result.run_id, "session_id": result.session_id}


TURNS = [tool_turn(("c1", "echo", {"n": 1})), text_turn("done")]


# -- store lifetimes ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_an_agent_without_a_store_resumes_in_process() -> None:
    """Without ``store=``, an agent's sessions share one memory store, so the run it suspended
    resumes on the same agent object."""
    log: list[Any] = []
    checkpoints = create_memory_checkpoint_store()
    agent = scripted_agent(TURNS, id="a", tools=[echo_tool(log=log)])
    options = RunStateOptions(checkpoints, REVISION, interrupt_before_tool=True)
    result = await agent.create_session(id="s1").run("x", run_state=options)
    assert result.status == "suspended"
    resumed = await resume_agent_run(
        agent,
        ref(result),
        {"expected_version": 1, "decision": "approve"},
        checkpoints=checkpoints,
        definition_revision=REVISION,
    )
    assert resumed.status == "succeeded"
    assert log == [("echo", {"n": 1})]


@pytest.mark.anyio
async def test_checkpoints_that_outlive_a_memory_session_are_refused_when_the_run_starts(
    tmp_path: Path,
) -> None:
    """A file checkpoint store with the agent's memory sessions could never resume after a
    restart: refused before anything is written, saying what to pass."""
    path = tmp_path / "runs.json"
    agent = scripted_agent(TURNS, id="a", tools=[echo_tool()])
    session = agent.create_session(id="s1")
    with pytest.raises(AgentRunStateError) as caught:
        await session.run("x", run_state=RunStateOptions(JsonFileCheckpointStore(path), REVISION))
    assert caught.value.code == "ERR_PRISM_SESSION_STORE_LIFETIME"
    assert "open_session_store(url, plugins=...)" in str(caught.value)
    assert not path.exists()
    assert await agent.store.list("s1") == []
    with pytest.raises(AgentRunStateError) as resumed:
        await resume_agent_run(
            agent,
            {"run_id": "run_x", "session_id": "s1"},
            {"expected_version": 1, "decision": "deny"},
            checkpoints=JsonFileCheckpointStore(path),
            definition_revision=REVISION,
        )
    assert resumed.value.code == "ERR_PRISM_SESSION_STORE_LIFETIME"
    assert not path.exists()


@pytest.mark.parametrize("url", ["sqlite:///x.db", "memory://"])
def test_a_store_url_is_refused_when_the_agent_is_created(url: str) -> None:
    """A URL where a store is expected fails at ``create_agent``, naming open_session_store."""
    with pytest.raises(PrismError) as caught:
        create_agent(model=MODEL, store=url)
    assert caught.value.code == "ERR_PRISM_STORE_INVALID"
    assert "open_session_store(url, plugins=[...])" in str(caught.value)
    with pytest.raises(PrismError, match="must be a SessionStore"):
        create_agent(model=MODEL, store=object())


# -- durable configuration drift ----------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("change", ["store", "revision", "interrupt", "ownership"])
async def test_a_run_state_per_run_cannot_replace_the_agents_own(change: str) -> None:
    """A per-run ``run_state`` that differs from the agent's configured one is refused before
    anything runs or is written; the agent's own options pass."""
    world, log = World(), []
    configured = world.run_state(interrupt_before_tool=True)
    agent = world.agent(TURNS, tools=[echo_tool(log=log)], run_state=configured)
    other = {
        "store": RunStateOptions(CountingStore(), REVISION, interrupt_before_tool=True),
        "revision": RunStateOptions(world.checkpoints, "other", interrupt_before_tool=True),
        "interrupt": world.run_state(),
        "ownership": world.run_state(interrupt_before_tool=True, ownership={"tenant": "b"}),
    }[change]
    with pytest.raises(AgentRunStateError) as caught:
        await agent.create_session(id="s1").run("x", run_state=other)
    assert "RunOptions cannot replace agent durable run-state configuration" in str(caught.value)
    assert caught.value.code == "ERR_PRISM_AGENT_RUN_STATE"
    assert world.checkpoints.calls == 0
    assert log == []
    same = await agent.create_session(id="s2").run("x", run_state=configured)
    assert same.status == "suspended"


@pytest.mark.anyio
@pytest.mark.parametrize(
    "options",
    [
        {"definition_revision": "other"},
        {"ownership": {"tenant": "b"}},
        {"persist_session_state": True},
        {"checkpoints": CountingStore()},
    ],
    ids=["revision", "ownership", "session-state", "store"],
)
async def test_a_resume_contradicting_the_agents_configuration_is_refused_before_the_claim(
    options: dict[str, Any],
) -> None:
    """The resume's options must agree with the agent's ``run_state=``; nothing is read or
    written when they do not."""
    world, log = World(), []
    configured = world.run_state(interrupt_before_tool=True)
    agent = world.agent(TURNS, tools=[echo_tool(log=log)], run_state=configured)
    result = await agent.create_session(id="s1").run("x")
    calls = world.checkpoints.calls
    with pytest.raises(AgentRunStateError) as caught:
        await resume_agent_run(
            world.agent(TURNS, tools=[echo_tool(log=log)], run_state=configured),
            ref(result),
            {"expected_version": 1, "decision": "approve"},
            **{**world.resume_options(), **options},
        )
    assert caught.value.code == "ERR_PRISM_AGENT_RUN_STATE"
    assert world.checkpoints.calls == calls
    assert log == []


# -- resume options of the wrong type -----------------------------------------------------------

BAD_OPTIONS = [
    {"on_session": 1},
    {"restore_hooks": None},
    {"restore_hooks": 0},
    {"restore_hooks": 1.5},
    {"restore_hooks": "hook"},
    {"restore_hooks": [1]},
    {"persist_session_state": "yes"},
    {"include_skill_bodies": 1},
    {"ownership": {"tenant": 1}},
    {"ownership": ["tenant"]},
]


@pytest.mark.anyio
@pytest.mark.parametrize("bad", BAD_OPTIONS, ids=repr)
async def test_resume_options_of_the_wrong_type_are_typed_refusals(bad: dict[str, Any]) -> None:
    """Every resume entry point answers AgentRunStateError, with zero store access."""
    world, log = World(), []
    agent = world.agent(TURNS, tools=[echo_tool(log=log)])
    result = await agent.create_session(id="s1").run(
        "x", run_state=world.run_state(interrupt_before_tool=True)
    )
    calls = world.checkpoints.calls
    decision = {"expected_version": 1, "decision": "approve"}
    options = {**world.resume_options(), **bad}
    with pytest.raises(AgentRunStateError):
        await resume_agent_run(agent, ref(result), decision, **options)
    with pytest.raises(AgentRunStateError):
        resume_agent_run_stream(agent, ref(result), decision, **options)
    lifecycle = create_agent_run_lifecycle(
        checkpoints=world.checkpoints, resolve_agent=lambda agent_id: (agent, REVISION)
    )
    with pytest.raises(AgentRunStateError):
        await lifecycle.resume(ref(result), decision, **bad)
    assert world.checkpoints.saves == 1
    assert world.checkpoints.calls <= calls + 1  # the lifecycle's status read, at most
    assert log == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    "bad", [{"max_queued_events": "x"}, {"max_queued_events": 0}, {"overflow": 3}], ids=repr
)
async def test_resume_stream_queue_options_of_the_wrong_type_are_typed_refusals(
    bad: dict[str, Any],
) -> None:
    """A resume stream's queue options are refused like its other options, nothing read."""
    world = World()
    agent = world.agent(TURNS, tools=[echo_tool()])
    ref_ = {"run_id": "run_x", "session_id": "s1"}
    decision = {"expected_version": 1, "decision": "approve"}
    with pytest.raises(AgentRunStateError):
        resume_agent_run_stream(agent, ref_, decision, **world.resume_options(), **bad)
    lifecycle = create_agent_run_lifecycle(
        checkpoints=world.checkpoints, resolve_agent=lambda agent_id: (agent, REVISION)
    )
    with pytest.raises(AgentRunStateError):
        lifecycle.resume_stream(ref_, decision, **bad)
    assert world.checkpoints.calls == 0


@pytest.mark.parametrize(
    "hooks", [None, 0, 1.5, [object()]], ids=["none", "zero", "float", "list-of-object"]
)
def test_a_lifecycle_with_bad_restore_hooks_is_refused_when_built(hooks: Any) -> None:
    """``create_agent_run_lifecycle`` refuses its own options with AgentRunStateError."""
    with pytest.raises(AgentRunStateError):
        create_agent_run_lifecycle(
            checkpoints=create_memory_checkpoint_store(),
            resolve_agent=lambda agent_id: None,
            restore_hooks=hooks,
        )
    with pytest.raises(AgentRunStateError):
        create_agent_run_lifecycle(
            checkpoints=create_memory_checkpoint_store(),
            resolve_agent=1,  # type: ignore[arg-type]
        )


# -- the host's thread limiter ------------------------------------------------------------------


@pytest.mark.anyio
async def test_sync_host_callables_run_under_the_agents_thread_limiter() -> None:
    """Sync tools, validators, guardrails and restore hooks borrow the agent's limiter,
    in the run loop and in the resume pipeline."""
    limiter = anyio.CapacityLimiter(1)
    seen: list[tuple[str, float]] = []

    def tool(args: dict[str, Any], context: Any) -> str:
        seen.append(("tool", limiter.borrowed_tokens))
        return "ok"

    def validate(call: Any, tool: Any, context: Any) -> None:
        seen.append(("validate", limiter.borrowed_tokens))

    def guard(ctx: Any) -> dict[str, str]:
        seen.append(("guard", limiter.borrowed_tokens))
        return {"action": "allow"}

    def hook(context: Any) -> None:
        seen.append(("hook", limiter.borrowed_tokens))

    from prism_core import Guardrail

    world = World()
    config: dict[str, Any] = {
        "tools": [ToolDefinition("echo", tool)],
        "validate": validate,
        "guardrails": {"tool_input": [Guardrail("g", "tool_input", guard)]},
        "thread_limiter": limiter,
    }
    result = (
        await world.agent(TURNS, **config)
        .create_session(id="s1")
        .run("x", run_state=world.run_state(interrupt_before_tool=True))
    )
    resumed = await resume_agent_run(
        world.agent(TURNS, **config),
        ref(result),
        {
            "expected_version": 1,
            "decisions": [
                {
                    "approval_id": result.interruption.pending_decisions[0].approval_id,
                    "outcome": "allow_once",
                    "modified_arguments": {"n": 2},
                }
            ],
        },
        restore_hooks=[hook],
        **world.resume_options(),
    )
    assert resumed.status == "succeeded"
    kinds = {kind for kind, _ in seen}
    assert kinds == {"tool", "validate", "guard", "hook"}
    assert all(borrowed == 1 for _, borrowed in seen)
    assert limiter.borrowed_tokens == 0
    with pytest.raises(AgentConfigError, match="CapacityLimiter") as info:
        create_agent(model=MODEL, thread_limiter=3)
    assert info.value.code == "ERR_PRISM_AGENT_CONFIG"


WRONG_CONFIG: list[tuple[str, Any]] = [
    ("thread_limiter", 3),
    ("thread_limiter", "4"),
    ("thread_limiter", anyio.Lock),
    ("run_state", 3),
    ("run_state", "every-turn"),
    ("stop_hooks", 3),
    ("stop_hooks", [lambda context: None, "finish"]),
    ("turn_policy", 3),
    ("turn_policy", {"max_turns": -1}),
    ("validate", "yes"),
    ("trust", 1),
    ("metadata", 3),
    ("provider_options", "fast"),
    ("system_prompt", 3),
    ("middleware", 3),
    ("provider_request_policies", [1]),
    ("limits", "tight"),
    ("retry", "often"),
    ("context_window", -5),
    ("skills_disclosure", "loud"),
    ("thinking_level", 3),
    ("redactor", "mask"),
    ("name", 3),
    ("tools", 3),
    ("no_such_option", 1),
]


@pytest.mark.parametrize(("key", "value"), WRONG_CONFIG, ids=[k for k, _ in WRONG_CONFIG])
def test_a_wrong_configuration_value_is_a_typed_error_at_creation(key: str, value: Any) -> None:
    """Every malformed ``create_agent`` value is refused when the agent is created, with a
    ``PrismError`` and a stable code (the check's own error as its cause), not at run time."""
    with pytest.raises(PrismError) as info:
        create_agent(model=MODEL, **{key: value})
    assert info.value.code in ("ERR_PRISM_AGENT_CONFIG", "ERR_PRISM_INVALID_OPTIONS")
    assert len(str(info.value)) <= 400
    if info.value.code == "ERR_PRISM_AGENT_CONFIG":
        assert isinstance(info.value.__cause__, TypeError | ValueError)


def test_a_huge_wrong_value_is_quoted_briefly() -> None:
    """The refusal of an enormous value stays short."""
    with pytest.raises(AgentConfigError) as info:
        create_agent(model=MODEL, stop_hooks=["x" * 100_000])
    assert len(str(info.value)) <= 300


# -- a complete provider call that cannot encode ------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("bad", [float("nan"), "\ud800"], ids=["nan", "surrogate"])
async def test_a_complete_call_that_cannot_encode_blocks_only_that_call(bad: Any) -> None:
    """The call is measured as recorded: it is blocked, the other call runs, the run goes on."""
    log: list[Any] = []
    turn = [
        provider_tool_call(tool_call_content("c1", "echo", {"x": bad})),
        provider_tool_call(tool_call_content("c2", "echo", {"n": 2})),
        provider_done(),
    ]
    agent = scripted_agent([turn, text_turn("done")], tools=[echo_tool(log=log)])
    session = agent.create_session()
    sub = session.subscribe()
    result = await session.run("x")
    events = [e async for e in sub]
    assert result.status == "succeeded"
    assert log == [("echo", {"n": 2})]
    (blocked,) = [e for e in events if e.type == "tool_execution_blocked"]
    assert blocked.tool_call_id == "c1"
    assert blocked.reason == "invalid_json_arguments"


# -- the event loop ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_run_that_never_awaits_still_yields_to_the_event_loop() -> None:
    """A provider that asks for a tool every turn and an async tool that awaits nothing: the
    host's deadline cancels the run and another task keeps running meanwhile."""
    ticks = 0

    async def instant(args: dict[str, Any], context: Any) -> str:
        return "again"

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    requests = 0

    def count(request: Any) -> None:
        # A run that never yields would never see the deadline: fail it instead of hanging.
        nonlocal requests
        requests += 1
        if requests > 5000:
            raise RuntimeError("the run never yielded to the event loop")

    agent = create_agent(
        model=MODEL,
        provider=create_mock_provider(turns=[tool_turn(("c1", "loop", {}))], on_request=count),
        tools=[ToolDefinition("loop", instant)],
    )
    session = agent.create_session()
    started = anyio.current_time()
    async with anyio.create_task_group() as group:
        group.start_soon(ticker)
        with anyio.move_on_after(0.3) as scope:
            await session.run("go")
        group.cancel_scope.cancel()
    assert scope.cancelled_caught
    assert anyio.current_time() - started < 5
    assert requests <= 5000
    assert ticks > 10


# -- logging --------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_run_loop_logs_turns_and_refusals_without_secrets(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``prism_core.runs`` logs turns at debug level and blocked calls and failures as
    warnings, naming codes and ids, never a secret or an argument."""
    world = World()
    agent = world.agent(
        [tool_turn(("c1", "echo", {"password": "hunter2"})), text_turn("ok")],
        tools=[echo_tool()],
        redactor=create_secret_redactor(["hunter2"]),
    )
    with caplog.at_level(logging.DEBUG, logger="prism_core.runs"):
        await agent.create_session(id="s1").run(
            "x", run_state=world.run_state(interrupt_before_tool=True)
        )
        with pytest.raises(PrismError):
            await (
                scripted_agent(
                    [tool_turn(*[(f"c{i}", "ask", {}) for i in range(33)])],
                    id="a",
                    tools=[
                        ToolDefinition("ask", lambda a, c: None, elicitation={"type": "object"})
                    ],
                )
                .create_session()
                .run("x", run_state=world.run_state())
            )
    runs = [r for r in caplog.records if r.name == "prism_core.runs"]
    messages = [r.getMessage() for r in runs]
    assert any(r.levelno == logging.DEBUG and "turn 1" in r.getMessage() for r in runs)
    assert any("unapprovable_arguments" in m for m in messages)
    assert any(
        r.levelno == logging.WARNING and "ERR_PRISM_DECISION_LIMIT" in r.getMessage() for r in runs
    )
    assert not any("hunter2" in m or "password" in m for m in messages)


# -- pack rules refused where they are written ----------------------------------------------------


def test_a_pack_rule_with_an_invalid_regex_is_refused_when_built() -> None:
    """The message names the rule and says how to fix it."""
    with pytest.raises(GuardrailPackError) as caught:
        PackRule(id="shell", pattern="rm (")
    assert "rule 'shell'" in str(caught.value)
    assert "fix the regular expression" in str(caught.value)
    with pytest.raises(GuardrailPackError, match="rule 'shell'"):
        GuardrailPack(id="house", rules=[{"id": "shell", "pattern": "[a-"}])


def test_a_deny_predicate_that_asks_is_refused_when_built() -> None:
    """A predicate cannot ask: the message names the rule and the two ways out."""

    def deny(args: dict[str, Any], ctx: Any) -> bool:
        return True

    with pytest.raises(GuardrailPackError) as caught:
        PackRule(id="shell", deny=deny, action="ask")
    assert "rule 'shell'" in str(caught.value)
    assert "action='deny'" in str(caught.value)
    with pytest.raises(GuardrailPackError, match="rule 'shell'"):
        GuardrailPack(id="house", rules=[{"id": "shell", "deny": deny, "action": "ask"}])
    PackRule(id="shell", deny=deny, action="tripwire")
