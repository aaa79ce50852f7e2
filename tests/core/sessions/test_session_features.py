"""Compaction, steering, skills and the context meter."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from prism_core import (
    CompactionResult,
    Guardrail,
    InvalidOptionsError,
    PrismError,
    ProviderRequest,
    Skill,
    ToolDefinition,
    create_agent,
    create_load_skill_tool,
    create_memory_session_store,
    create_mock_provider,
    create_skill_registry,
    provider_done,
    provider_text_delta,
)
from prism_core.records import COMPACTION_SUMMARY_PREFIX

from ..helpers import MODEL, scripted_agent, text_turn, tool_turn, types


async def filled_session(runs: int = 3, **config: Any) -> Any:
    """A session with ``runs`` question/answer pairs."""
    provider = create_mock_provider(text_turn("answer"))
    agent = create_agent(model=MODEL, provider=provider, **config)
    session = agent.create_session()
    for index in range(runs):
        await session.run(f"question {index}")
    return session


@pytest.mark.anyio
async def test_manual_compact_appends_one_entry_and_rebuilds_history() -> None:
    """compact() appends a compaction entry, emits started/finished, and keeps the recent window."""
    session = await filled_session(3)
    watcher = session.subscribe(across_runs=True)
    result = await session.compact(keep_recent_entries=2)
    assert isinstance(result, CompactionResult)
    entries = await session.entries()
    assert entries[-1].kind == "compaction"
    assert entries[-1].id == result.entry_id == session.leaf_id
    assert entries[-1].first_kept_entry_id == entries[-3].id
    assert "user: question 0" in result.summary
    await session.run("next")
    provider = session.agent.provider
    sent = [m.text for m in provider.requests[-1].messages]
    assert sent[0].startswith(COMPACTION_SUMMARY_PREFIX)
    assert sent[1:] == ["question 2", "answer", "next"]
    watcher.close()
    kinds = types([e async for e in watcher])
    assert kinds[:2] == ["compaction_started", "compaction_finished"]
    assert await session.compact() is None or (await session.entries())[-1].kind == "compaction"


@pytest.mark.anyio
async def test_compaction_never_starts_the_window_on_a_tool_result() -> None:
    """The kept window moves back so a tool result keeps its tool call."""
    from prism_core import tool_call_content

    agent = scripted_agent(
        [tool_turn(("c1", "t", {})), text_turn("done")], tools=[ToolDefinition("t", lambda a, c: 1)]
    )
    session = agent.create_session()
    await session.run("go")
    entries = await session.entries()
    assert [e.message.role for e in entries] == ["user", "assistant", "tool", "assistant"]
    result = await session.compact(keep_recent_entries=2)
    assert result is not None
    assert result.first_kept_entry_id == entries[1].id
    assert tool_call_content  # the kept window starts at the assistant tool call


@pytest.mark.anyio
async def test_compaction_strategy_and_middleware_shape_the_summary() -> None:
    """A host strategy writes the summary; compaction middleware may adjust it."""
    seen: list[int] = []

    def strategy(context: Any) -> str:
        seen.append(len(context.compacted))
        return "custom summary"

    class Edit:
        def compaction(self, result: CompactionResult, ctx: Any) -> CompactionResult:
            import attrs

            return attrs.evolve(result, summary=result.summary + " (edited)")

    session = await filled_session(2, middleware=[Edit()])
    result = await session.compact(keep_recent_entries=1, strategy=strategy)
    assert result is not None
    assert result.summary == "custom summary (edited)"
    assert seen == [3]


@pytest.mark.anyio
async def test_compact_is_rejected_while_a_run_is_active() -> None:
    """Manual compaction fails fast during a run."""
    release = anyio.Event()

    async def wait(args: dict[str, Any], context: Any) -> str:
        await release.wait()
        return "ok"

    agent = scripted_agent(
        [tool_turn(("c1", "wait", {})), text_turn("x")], tools=[ToolDefinition("wait", wait)]
    )
    session = agent.create_session()
    async with anyio.create_task_group() as group:
        group.start_soon(session.run, "go")
        while not session.running:
            await anyio.lowlevel.checkpoint()
        with pytest.raises(PrismError, match="compact"):
            await session.compact()
        release.set()


@pytest.mark.anyio
async def test_auto_compaction_by_entry_threshold_and_run_opt_out() -> None:
    """threshold_entries compacts once per run before assembly; compaction=False skips it."""
    session = await filled_session(3, compaction={"threshold_entries": 5, "keep_recent_entries": 2})
    kinds = [e.kind for e in await session.entries()]
    assert kinds.count("compaction") == 1
    before = len(await session.entries())
    await session.run("no compaction please", compaction=False)
    after = await session.entries()
    assert [e.kind for e in after].count("compaction") == 1
    assert len(after) == before + 2
    with pytest.raises(InvalidOptionsError):
        await session.run("x", compaction={"threshold": 3})


@pytest.mark.anyio
async def test_auto_compaction_by_input_ratio_and_host_trigger() -> None:
    """The latest turn's input tokens against the window, or a host callback, trigger it."""
    provider = create_mock_provider(text_turn("a", input_tokens=90, output_tokens=1))
    agent = create_agent(
        model=MODEL,
        provider=provider,
        compaction={"input_ratio": 0.8, "context_window": 100, "keep_recent_entries": 1},
    )
    session = agent.create_session()
    await session.run("one")
    assert "compaction" not in [e.kind for e in await session.entries()]
    await session.run("two")
    assert "compaction" in [e.kind for e in await session.entries()]

    asked: list[Any] = []
    agent2 = create_agent(
        model=MODEL,
        provider=create_mock_provider(text_turn("a")),
        compaction={
            "trigger": lambda meter: asked.append(meter) or len(asked) > 1,
            "keep_recent_entries": 1,
        },
    )
    session2 = agent2.create_session()
    await session2.run("one")
    await session2.run("two")
    assert [e.kind for e in await session2.entries()].count("compaction") == 1
    assert asked[1].source == "estimate"


@pytest.mark.anyio
async def test_steer_injects_at_the_next_turn_boundary() -> None:
    """A steered message is appended before the next provider turn of the same run."""
    steered = anyio.Event()
    session_box: list[Any] = []

    def tool(args: dict[str, Any], context: Any) -> str:
        session_box[0].steer("also check the database")
        steered.set()
        return "ok"

    agent = scripted_agent(
        [tool_turn(("c1", "look", {})), text_turn("done")], tools=[ToolDefinition("look", tool)]
    )
    session = agent.create_session()
    session_box.append(session)
    result = await session.run("investigate")
    requests = agent.provider.requests  # type: ignore[union-attr]
    assert [m.text for m in requests[1].messages][-1] == "also check the database"
    assert {e.run_id for e in await session.entries()} == {result.run_id}
    with pytest.raises(PrismError, match="No active run"):
        session.steer("late")


@pytest.mark.anyio
async def test_steer_queue_caps_and_blocked_steers() -> None:
    """More than 8 steers, or more than 64 KiB, is refused; a blocked steer is dropped."""
    release = anyio.Event()

    async def wait(args: dict[str, Any], context: Any) -> str:
        await release.wait()
        return "ok"

    def no_shouting(ctx: Any) -> Any:
        text = ctx.value[-1].text
        return {"action": "block", "reason": "shouting"} if text.isupper() else {"action": "allow"}

    agent = scripted_agent(
        [tool_turn(("c1", "wait", {})), text_turn("done")],
        tools=[ToolDefinition("wait", wait)],
        guardrails={"input": [Guardrail("calm", "input", no_shouting)]},
    )
    session = agent.create_session()
    sub = session.subscribe()
    async with anyio.create_task_group() as group:
        group.start_soon(session.run, "go")
        while not session.running:
            await anyio.lowlevel.checkpoint()
        await anyio.sleep(0.01)
        session.steer("STOP NOW")
        for index in range(7):
            session.steer(f"note {index}")
        with pytest.raises(PrismError, match="Too many pending steers"):
            session.steer("one too many")
        release.set()
    events = [e async for e in sub]
    rejected = [e for e in events if e.type == "steer_rejected"]
    assert [e.message.text for e in rejected] == ["STOP NOW"]
    texts = [e.message.text for e in await session.entries() if e.message]
    assert "STOP NOW" not in texts
    assert "note 6" in texts
    big = scripted_agent([text_turn("x")]).create_session()
    from prism_core import Message
    from prism_core.runs._steering import SteerQueue

    queue = SteerQueue()
    with pytest.raises(PrismError, match="bytes"):
        queue.push(Message.user("x" * (64 * 1024 + 1)))
    assert big is not None


@pytest.mark.anyio
async def test_soft_interrupt_cancels_only_the_provider_stream() -> None:
    """soft_interrupt stops the stream in flight; the same run continues with the steer."""
    started = anyio.Event()

    class Provider:
        id = "p"
        calls = 0

        async def generate(self, request: ProviderRequest) -> Any:
            Provider.calls += 1
            if Provider.calls == 1:
                yield provider_text_delta("long answer ")
                started.set()
                await anyio.sleep_forever()
            yield provider_text_delta("short answer")
            yield provider_done()

    session = create_agent(model=MODEL, provider=Provider()).create_session()
    results: list[Any] = []

    async def runner() -> None:
        results.append(await session.run("explain"))

    with anyio.fail_after(3):
        async with anyio.create_task_group() as group:
            group.start_soon(runner)
            await started.wait()
            session.steer("be brief", soft_interrupt=True)
    assert results[0].status == "succeeded"
    assert results[0].text == "short answer"
    texts = [e.message.text for e in await session.entries() if e.message]
    assert texts == ["explain", "long answer ", "be brief", "short answer"]
    assert len({e.run_id for e in await session.entries()}) == 1


@pytest.mark.anyio
async def test_skills_progressive_catalogue_and_load_skill() -> None:
    """Progressive disclosure lists the catalogue; load_skill renders the body afterwards."""
    skills = [
        Skill("triage", "Always check recent deploys first.", description="Incident triage"),
        Skill("sql", "Prefer EXPLAIN before changing queries.", description="SQL tuning"),
    ]
    agent = scripted_agent(
        [tool_turn(("c1", "load_skill", {"name": "triage"})), text_turn("ok")],
        skills=skills,
        tools=[create_load_skill_tool()],
    )
    session = agent.create_session()
    await session.run("help")
    first, second = agent.provider.requests  # type: ignore[union-attr]
    assert "- triage: Incident triage" in first.system
    assert "Always check recent deploys" not in first.system
    assert "Always check recent deploys first." in second.system
    assert session.loaded_skills.names() == ("triage",)


@pytest.mark.anyio
async def test_skills_registry_activation_and_eager_disclosure() -> None:
    """A registry activates nothing unless named or all requested; eager renders bodies."""
    registry = create_skill_registry([Skill("a", "Body A"), Skill("b", "Body B")])
    agent = scripted_agent([text_turn("x")], skills=registry)
    session = agent.create_session()
    requests = agent.provider.requests  # type: ignore[union-attr]
    await session.run("none")
    assert requests[-1].system is None
    await session.run("one", active_skills=["b"], skills_disclosure="eager")
    assert "Body B" in requests[-1].system
    assert "Body A" not in requests[-1].system
    await session.run("all", activate_all_skills=True, skills_disclosure="eager")
    assert "Body A" in requests[-1].system
    with pytest.raises(InvalidOptionsError, match="unknown active_skills"):
        await session.run("x", active_skills=["zzz"])


@pytest.mark.anyio
async def test_load_skill_refuses_inactive_skills() -> None:
    """load_skill of a skill the run did not activate is an error result, not a load."""
    agent = scripted_agent(
        [tool_turn(("c1", "load_skill", {"name": "secret"})), text_turn("ok")],
        skills=create_skill_registry([Skill("secret", "x")]),
        tools=[create_load_skill_tool()],
    )
    session = agent.create_session()
    sub = session.subscribe()
    await session.run("x")
    error = next(e for e in [e async for e in sub] if e.type == "tool_execution_error")
    assert "not active" in error.error.message
    assert session.loaded_skills.names() == ()


@pytest.mark.anyio
async def test_context_meter_reports_or_estimates() -> None:
    """Reported input tokens when the provider gives them, else a labelled estimate."""
    agent = create_agent(
        model=MODEL,
        context_window=1000,
        provider=create_mock_provider(text_turn("x", input_tokens=250)),
    )
    session = agent.create_session()
    assert session.context_meter().source == "none"
    await session.run("hello")
    meter = session.context_meter()
    assert (meter.input_tokens, meter.source, meter.cap, meter.budget, meter.ratio) == (
        250,
        "reported",
        1000,
        750,
        0.25,
    )
    estimating = create_agent(model=MODEL, provider=create_mock_provider(text_turn("x")))
    other = estimating.create_session()
    await other.run("hello there")
    estimate = other.context_meter()
    assert estimate.estimated
    assert estimate.input_tokens is not None
    assert estimate.input_tokens > 0
    assert estimate.cap is None


@pytest.mark.anyio
async def test_snapshot_cache_reuses_an_unchanged_branch() -> None:
    """snapshot() reuses the branch within the TTL, re-reads after a new leaf, and 0 disables
    the cache; a TTL outside 0..30000 ms fails session construction."""
    reads: list[str | None] = []
    store = create_memory_session_store()
    original = store.read_branch_path

    async def counting(session_id: str, leaf_id: str | None) -> Any:
        reads.append(leaf_id)
        return await original(session_id, leaf_id)

    store.read_branch_path = counting  # type: ignore[method-assign]
    agent = create_agent(model=MODEL, provider=create_mock_provider(text_turn("a")), store=store)
    session = agent.create_session(snapshot_cache_ttl_ms=30_000)
    await session.run("hi")
    reads.clear()
    first = await session.snapshot()
    again = await session.snapshot()
    assert first is again
    assert len(reads) == 1
    await session.run("more")
    reads.clear()
    assert len(await session.snapshot()) == 4
    assert len(reads) == 1
    uncached = agent.create_session(snapshot_cache_ttl_ms=0, store=store)
    reads.clear()
    await uncached.snapshot()
    await uncached.snapshot()
    assert len(reads) == 2
    for bad in (-1, 30_001, "1000"):
        with pytest.raises(TypeError):
            agent.create_session(snapshot_cache_ttl_ms=bad)
