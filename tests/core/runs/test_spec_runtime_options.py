"""The seed's runtime options: session.follow_up, the signal run option, input_layout,
tool_result_fold and budget_exhausted."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import (
    AbortSignal,
    AgentConfigError,
    AgentRunError,
    InvalidOptionsError,
    Skill,
    ToolDefinition,
)

from ..helpers import scripted_agent, text_turn, tool_turn

pytestmark = pytest.mark.anyio


async def test_follow_up_is_a_new_run_refused_while_one_is_active() -> None:
    """session.follow_up(input) runs a new run on the session (it sees the conversation); a
    follow_up while a run is active is refused like run() (ERR_PRISM_RUN_ACTIVE)."""
    box: list[Any] = []
    refused: list[str] = []

    async def probe(args: dict[str, Any], context: Any) -> str:
        with pytest.raises(AgentRunError) as caught:
            await box[0].follow_up("and now?")
        refused.append(caught.value.code)
        return "ok"

    agent = scripted_agent(
        [tool_turn(("c1", "probe", {})), text_turn("first answer"), text_turn("second answer")],
        tools=[ToolDefinition("probe", probe)],
    )
    session = agent.create_session()
    box.append(session)
    first = await session.run("go")
    assert (first.status, refused) == ("succeeded", ["ERR_PRISM_RUN_ACTIVE"])
    second = await session.follow_up("and now?")
    assert (second.status, second.text) == ("succeeded", "second answer")
    assert second.run_id != first.run_id
    last_request = agent.provider.requests[-1]  # type: ignore[union-attr]
    assert [m.text for m in last_request.messages if m.role == "user"] == ["go", "and now?"]


async def test_a_pre_aborted_signal_ends_the_run_aborted_before_any_request() -> None:
    """signal= an already fired AbortSignal: the run ends aborted (its reason kept), and the
    provider is never asked."""
    agent = scripted_agent([text_turn("never")])
    signal = AbortSignal()
    signal.abort("host shutting down")
    with pytest.raises(AgentRunError) as caught:
        await agent.create_session().run("go", signal=signal)
    result = caught.value.result
    assert (result.status, result.abort_reason) == ("aborted", "host shutting down")
    assert agent.provider.requests == []  # type: ignore[union-attr]


async def test_a_signal_fired_from_a_tool_aborts_the_run() -> None:
    """A tool that fires the run's host signal aborts the run as session.abort() does: no
    further provider turn."""
    signal = AbortSignal()

    def stop(args: dict[str, Any], context: Any) -> str:
        signal.abort("operator pressed stop")
        return "stopping"

    agent = scripted_agent(
        [tool_turn(("c1", "stop", {})), text_turn("should not run")],
        tools=[ToolDefinition("stop", stop)],
    )
    with pytest.raises(AgentRunError) as caught:
        await agent.create_session().run("go", signal=signal)
    assert caught.value.result.status == "aborted"
    assert caught.value.result.abort_reason == "operator pressed stop"
    assert len(agent.provider.requests) == 1  # type: ignore[union-attr]


async def test_a_signal_that_is_not_one_is_refused() -> None:
    with pytest.raises(InvalidOptionsError):
        await scripted_agent([text_turn("x")]).create_session().run("go", signal="stop")


SKILL = Skill("review", "Review the diff line by line.", description="code review")


async def test_cache_aware_puts_what_is_stable_before_what_changes() -> None:
    """cache_aware (the default): the agent's prompt and the skill catalogue, then the run's
    own prompt layer. legacy: the run's layer before the skills. The run's layout wins."""
    agent = scripted_agent(
        [text_turn("ok")], instructions="You are careful.", skills=[SKILL], activate_all_skills=True
    )
    await agent.create_session().run("go", system_prompt=["Today: Tuesday."])
    await agent.create_session().run("go", system_prompt=["Today: Tuesday."], input_layout="legacy")
    cache_aware, legacy = (r.system for r in agent.provider.requests)  # type: ignore[union-attr]
    assert cache_aware.index("Available skills") < cache_aware.index("Today: Tuesday.")
    assert cache_aware.startswith("You are careful.")
    assert legacy.index("Today: Tuesday.") < legacy.index("Available skills")

    on_legacy = scripted_agent(
        [text_turn("ok")], skills=[SKILL], activate_all_skills=True, input_layout="legacy"
    )
    await on_legacy.create_session().run("go", system_prompt=["Now."], input_layout="cache_aware")
    (request,) = on_legacy.provider.requests  # type: ignore[union-attr]
    assert request.system.index("Available skills") < request.system.index("Now.")


async def test_an_unknown_input_layout_is_refused_at_configuration() -> None:
    with pytest.raises(AgentConfigError, match="input_layout"):
        scripted_agent([text_turn("x")], input_layout="compact")
    agent = scripted_agent([text_turn("x")])
    with pytest.raises(InvalidOptionsError, match="input_layout"):
        await agent.create_session().run("go", input_layout="newest_first")
    assert agent.provider.requests == []  # type: ignore[union-attr]


def big(tag: str, size: int = 9000) -> dict[str, str]:
    return {"report": tag + "x" * size}


def reporting_tool() -> ToolDefinition:
    return ToolDefinition("report", lambda args, ctx: big(args["tag"], args.get("size", 9000)))


FOUR_ROUNDS = [
    tool_turn(("c1", "report", {"tag": "one"})),
    tool_turn(("c2", "report", {"tag": "two", "size": 10})),
    tool_turn(("c3", "report", {"tag": "three"})),
    tool_turn(("c4", "report", {"tag": "four"})),
    text_turn("done"),
]


def result_values(request: Any) -> dict[str, Any]:
    return {
        block.tool_call_id: block.value
        for message in request.messages
        if message.role == "tool"
        for block in message.content
    }


async def test_tool_result_fold_summarizes_aged_large_results_in_the_request_only() -> None:
    """With summarize, a result older than the newest keep_last (2) tool turns and larger
    than min_bytes (8192) reaches the provider as summarize(text)'s answer; smaller or newer
    results are whole; the stored transcript keeps every result whole; each is summarized
    once."""
    seen: list[str] = []

    async def summarize(text: str) -> str:
        seen.append(text[:5])
        return f"summary of {len(text)} bytes"

    agent = scripted_agent(
        FOUR_ROUNDS, tools=[reporting_tool()], tool_result_fold={"summarize": summarize}
    )
    session = agent.create_session()
    await session.run("go")
    requests = agent.provider.requests  # type: ignore[union-attr]
    last = result_values(requests[-1])
    # The text is the value's canonical JSON: {"report":"one" + 9000 x}, 9016 bytes.
    assert last["c1"] == "summary of 9016 bytes"
    assert isinstance(last["c2"], dict)  # small: kept whole
    assert isinstance(last["c3"], dict)  # the newest two tool turns
    assert isinstance(last["c4"], dict)
    assert isinstance(result_values(requests[2])["c1"], dict)  # not yet aged at turn 3
    assert seen == ['{"rep']
    stored = [
        block.value
        for entry in await session.entries()
        if entry.message is not None and entry.message.role == "tool"
        for block in entry.message.content
    ]
    assert all(isinstance(value, dict) for value in stored)


async def test_tool_result_fold_is_off_without_summarize_and_a_run_may_turn_it_off() -> None:
    """No summarize: off. A run's False (or its own mapping without summarize) turns the
    agent's fold off; a run's keep_last widens what is kept."""
    calls: list[str] = []

    def summarize(text: str) -> str:
        calls.append("s")
        return "short"

    async def last_values(fold: Any, **run_options: Any) -> dict[str, Any]:
        agent = scripted_agent(FOUR_ROUNDS, tools=[reporting_tool()], tool_result_fold=fold)
        await agent.create_session().run("go", **run_options)
        return result_values(agent.provider.requests[-1])  # type: ignore[union-attr]

    folding = {"summarize": summarize}
    assert isinstance((await last_values(folding, tool_result_fold=False))["c1"], dict)
    assert isinstance((await last_values(folding, tool_result_fold={"keep_last": 1}))["c1"], dict)
    assert calls == []
    wider = await last_values(folding, tool_result_fold={"summarize": summarize, "keep_last": 4})
    assert isinstance(wider["c1"], dict)
    assert isinstance((await last_values({"keep_last": 1}))["c1"], dict)
    assert calls == []
    assert (await last_values(folding))["c1"] == "short"


async def test_a_summarizer_that_raises_fails_the_run_closed() -> None:
    def summarize(text: str) -> str:
        raise RuntimeError("summary service down")

    agent = scripted_agent(
        FOUR_ROUNDS, tools=[reporting_tool()], tool_result_fold={"summarize": summarize}
    )
    with pytest.raises(AgentRunError) as caught:
        await agent.create_session().run("go")
    assert caught.value.code == "ERR_PRISM_TOOL_RESULT_FOLD"


async def test_a_malformed_fold_is_refused_at_configuration() -> None:
    with pytest.raises(AgentConfigError):
        scripted_agent([text_turn("x")], tool_result_fold={"summarize": "not callable"})
    with pytest.raises(AgentConfigError):
        scripted_agent([text_turn("x")], tool_result_fold={"summarize": str, "depth": 2})
    with pytest.raises(InvalidOptionsError):
        await (
            scripted_agent([text_turn("x")])
            .create_session()
            .run("go", tool_result_fold={"summarize": str, "keep_last": -1})
        )


async def test_budget_exhausted_follows_run_limit_exceeded_with_the_recent_calls() -> None:
    """A limit ends the run: run_limit_exceeded, then budget_exhausted (the axis, what was
    consumed, the other axes nearest their limits, the last dispatched calls as hashes), then
    error."""
    turns = [tool_turn((f"c{i}", "report", {"tag": f"t{i}", "size": 1})) for i in range(12)]
    agent = scripted_agent(
        turns,
        tools=[reporting_tool()],
        limits={"max_tool_calls": 11, "max_turns": 20, "max_tool_rounds": 12},
    )
    events = [e async for e in agent.create_session().stream("go")]
    kinds = [e.type for e in events]
    assert kinds[-3:] == ["run_limit_exceeded", "budget_exhausted", "error"]
    budget = events[-2]
    assert budget.limit == "max_tool_calls"
    assert budget.consumed["max_tool_calls"] == 12
    assert budget.consumed["max_turns"] == 12
    assert [row["axis"] for row in budget.closest_other_axes][:1] == ["max_tool_rounds"]
    assert budget.closest_other_axes[0]["ratio"] == 1.0
    recent = budget.recent_tool_calls
    assert len(recent) == 10
    assert [row["tool_call_id"] for row in recent] == [f"c{i}" for i in range(1, 11)]
    assert all(row["tool_name"] == "report" for row in recent)
    assert all(row["arg_hash"].startswith("sha256:") for row in recent)
    assert all(len(row["arg_hash"]) == len("sha256:") + 64 for row in recent)
