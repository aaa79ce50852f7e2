"""Turn policies, stop hooks, stop reasons and provider finish reasons."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import (
    MAX_STOP_DETAIL_BYTES,
    AgentConfigError,
    AgentRunError,
    AgentRunStateError,
    InvalidOptionsError,
    ProviderRequest,
    ToolDefinition,
    TurnPolicy,
    TurnPolicyContext,
    create_agent,
    create_mock_provider,
    create_secret_redactor,
    provider_done,
    provider_text_delta,
    resume_agent_run,
)
from prism_core.durable import AGENT_RUN_NAMESPACE

from ..durable_support import World
from ..helpers import echo_tool, scripted_agent, text_turn, tool_turn

pytestmark = pytest.mark.anyio

LOOPING = [tool_turn(("c1", "echo", {"n": 1})), tool_turn(("c2", "echo", {"n": 2}))]


async def test_a_policy_stop_ends_the_run_succeeded_with_exactly_the_requests_made() -> None:
    """stop() is called once per boundary with the counters; a stop succeeds the run."""
    seen: list[TurnPolicyContext] = []

    def stop(context: TurnPolicyContext) -> Any:
        seen.append(context)
        if context.tool_calls >= 2:
            return {"action": "stop", "reason": "budget reached"}
        return {"action": "continue"}

    log: list[Any] = []
    agent = scripted_agent(LOOPING, tools=[echo_tool(log=log)], turn_policy={"stop": stop})
    session = agent.create_session()
    events: list[Any] = []
    async for event in session.stream("go"):
        events.append(event)
    finished = events[-1]
    assert finished.type == "agent_finished"
    assert (finished.finish_reason, finished.stop_detail) == ("host_policy", "budget reached")
    assert finished.stop_reason == "host_policy"
    # Two provider turns ran, each called a tool; the third boundary stopped the run.
    assert len(agent.provider.requests) == 2  # type: ignore[union-attr]
    assert len(log) == 2
    assert [c.turns for c in seen] == [0, 1, 2]
    assert [c.tool_calls for c in seen] == [0, 1, 2]


async def test_the_result_carries_the_policy_stop() -> None:
    """run() returns succeeded with stop_reason/stop_detail."""

    def stop(context: TurnPolicyContext) -> Any:
        return {"action": "stop", "reason": "enough"} if context.turns == 1 else None

    agent = scripted_agent(LOOPING, tools=[echo_tool()])
    result = await agent.create_session().run("go", turn_policy=TurnPolicy(stop=stop))
    assert (result.status, result.stop_reason, result.stop_detail) == (
        "succeeded",
        "host_policy",
        "enough",
    )
    assert len(agent.provider.requests) == 1  # type: ignore[union-attr]


async def test_max_turns_stops_gracefully_and_a_run_option_overrides_the_agent() -> None:
    """turn_policy.max_turns ends the run succeeded after that many provider turns, with stop
    reason "turn_limit" and detail "max_turns"."""
    agent = scripted_agent(LOOPING, tools=[echo_tool()], turn_policy={"max_turns": 5})
    events = [e async for e in agent.create_session().stream("go", turn_policy={"max_turns": 3})]
    finished = events[-1]
    assert (finished.type, finished.finish_reason, finished.stop_detail) == (
        "agent_finished",
        "turn_limit",
        "max_turns",
    )
    result = await agent.create_session().run("go", turn_policy={"max_turns": 2})
    assert result.status == "succeeded"
    assert (result.stop_reason, result.stop_detail) == ("turn_limit", "max_turns")
    assert len(agent.provider.requests) == 5  # type: ignore[union-attr]


async def test_a_throwing_policy_fails_closed() -> None:
    """A policy that raises (or answers nonsense) fails the run with ERR_PRISM_TURN_POLICY."""

    def broken(context: TurnPolicyContext) -> Any:
        if context.turns:
            raise RuntimeError("policy backend down")
        return None

    agent = scripted_agent(LOOPING, tools=[echo_tool()], turn_policy=broken)
    with pytest.raises(AgentRunError) as caught:
        await agent.create_session().run("go")
    assert caught.value.code == "ERR_PRISM_TURN_POLICY"
    # A throwing policy leaves no stop reason: the run failed, it was not stopped.
    assert (caught.value.result.stop_reason, caught.value.result.stop_detail) == (None, None)
    assert len(agent.provider.requests) == 1  # type: ignore[union-attr]

    nonsense = scripted_agent(LOOPING, tools=[echo_tool()], turn_policy=lambda c: "stop")
    with pytest.raises(AgentRunError) as caught:
        await nonsense.create_session().run("go")
    assert caught.value.code == "ERR_PRISM_TURN_POLICY"
    assert nonsense.provider.requests == []  # type: ignore[union-attr]


async def test_the_stop_detail_is_redacted_and_an_oversized_one_is_refused() -> None:
    """A policy reason is redacted; one over MAX_STOP_DETAIL_BYTES (256) UTF-8 bytes once
    redacted, or an empty one, fails the run with ERR_PRISM_TURN_POLICY (never cut)."""
    assert MAX_STOP_DETAIL_BYTES == 256
    secret = "sk-live-123"
    agent = scripted_agent(
        LOOPING,
        tools=[echo_tool()],
        redactor=create_secret_redactor([secret]),
        turn_policy=lambda c: {"action": "stop", "reason": f"{secret} spent"},
    )
    result = await agent.create_session().run("go")
    assert result.stop_detail == "[REDACTED] spent"
    for reason in ("é" * 129, ""):
        refusing = scripted_agent(
            LOOPING,
            tools=[echo_tool()],
            turn_policy=lambda c, reason=reason: {"action": "stop", "reason": reason},
        )
        with pytest.raises(AgentRunError) as caught:
            await refusing.create_session().run("go")
        assert caught.value.code == "ERR_PRISM_TURN_POLICY"
        assert caught.value.result.stop_reason is None
    exact = scripted_agent(
        LOOPING, tools=[echo_tool()], turn_policy=lambda c: {"action": "stop", "reason": "é" * 128}
    )
    assert (await exact.create_session().run("go")).stop_detail == "é" * 128


async def test_a_stop_that_answers_with_an_awaitable_fails_closed() -> None:
    """turn_policy.stop answers synchronously: an async stop fails ERR_PRISM_TURN_POLICY
    before any provider request."""

    async def stop(context: TurnPolicyContext) -> Any:
        return {"action": "continue"}

    agent = scripted_agent(LOOPING, tools=[echo_tool()], turn_policy={"stop": stop})
    with pytest.raises(AgentRunError) as caught:
        await agent.create_session().run("go")
    assert caught.value.code == "ERR_PRISM_TURN_POLICY"
    assert agent.provider.requests == []  # type: ignore[union-attr]


async def test_a_run_policy_may_not_widen_limits_max_turns() -> None:
    """turn_policy.max_turns wider than limits.max_turns is refused ("cannot widen
    limits.max_turns"), on the agent and per run, before any provider work."""
    agent = scripted_agent(LOOPING, tools=[echo_tool()], limits={"max_turns": 4})
    with pytest.raises(InvalidOptionsError, match=r"cannot widen limits\.max_turns"):
        await agent.create_session().run("go", turn_policy={"max_turns": 5})
    with pytest.raises(InvalidOptionsError, match=r"cannot widen limits\.max_turns"):
        await (
            scripted_agent(LOOPING)
            .create_session()
            .run("go", limits={"max_turns": 2}, turn_policy={"max_turns": 3})
        )
    assert agent.provider.requests == []  # type: ignore[union-attr]
    with pytest.raises(AgentConfigError, match=r"cannot widen limits\.max_turns"):
        scripted_agent(LOOPING, limits={"max_turns": 1}, turn_policy={"max_turns": 2})
    narrower = await agent.create_session().run("go", turn_policy={"max_turns": 4})
    assert narrower.stop_reason == "turn_limit"


async def test_a_steer_queued_before_a_policy_stop_is_kept() -> None:
    """Steers are applied at the boundary before the policy is asked, so a stop keeps them in
    the history (none is still pending when the policy looks)."""
    box: list[Any] = []

    def look(args: dict[str, Any], context: Any) -> str:
        box[0].steer("and one more thing")
        return "ok"

    seen: list[int] = []

    def stop(context: TurnPolicyContext) -> Any:
        seen.append(context.pending_steers)
        return {"action": "stop", "reason": "done"} if context.turns else None

    agent = scripted_agent(
        [tool_turn(("c1", "look", {})), text_turn("fine")],
        tools=[ToolDefinition("look", look)],
        turn_policy=stop,
    )
    session = agent.create_session()
    box.append(session)
    result = await session.run("go")
    assert result.stop_reason == "host_policy"
    assert seen == [0, 0]
    texts = [e.message.text for e in await session.entries() if e.message is not None]
    assert texts.count("and one more thing") == 1
    assert texts[-1] == "and one more thing"


async def test_a_natural_end_has_no_finish_reason() -> None:
    """agent_finished.finish_reason is absent on a natural end, even when the provider gave
    one; the provider's own finish reason stays on message_finished."""
    agent = scripted_agent([[provider_text_delta("cut"), provider_done(finish_reason="length")]])
    events = [event async for event in agent.create_session().stream("hi")]
    finished = events[-1]
    assert finished.type == "agent_finished"
    assert (finished.finish_reason, finished.stop_reason, finished.stop_detail) == (
        None,
        None,
        None,
    )
    message = next(e for e in events if e.type == "message_finished")
    assert message.finish_reason == "length"
    plain = scripted_agent([text_turn("ok")])
    result = await plain.create_session().run("hi")
    assert (result.stop_reason, result.stop_detail) == (None, None)


async def test_stop_hooks_continue_a_finishing_run_within_the_bound() -> None:
    """A stop hook's continue appends its message and runs another turn, at most
    limits.max_stop_continuations times; asking once more ends the run with "hook_limit"."""
    calls: list[int] = []

    def keep_going(context: Any) -> Any:
        calls.append(context.continuations)
        return {"action": "continue", "message": f"check again ({context.continuations})"}

    agent = scripted_agent(
        [text_turn("first"), text_turn("second"), text_turn("third")],
        stop_hooks=[keep_going],
        limits={"max_stop_continuations": 2},
    )
    session = agent.create_session()
    result = await session.run("go")
    assert result.status == "succeeded"
    assert (result.text, result.stop_reason) == ("third", "hook_limit")
    assert calls == [0, 1, 2]
    assert len(agent.provider.requests) == 3  # type: ignore[union-attr]
    last_request = agent.provider.requests[-1]  # type: ignore[union-attr]
    assert last_request.messages[-1].text == "check again (1)"


async def test_stop_hooks_that_let_the_run_finish_and_a_broken_hook() -> None:
    """None or finish lets the run end; a raising hook fails closed."""
    agent = scripted_agent(
        [text_turn("done")], stop_hooks=[lambda c: None, lambda c: {"action": "finish"}]
    )
    result = await agent.create_session().run("go")
    assert (result.status, len(agent.provider.requests)) == ("succeeded", 1)  # type: ignore[union-attr]

    def broken(context: Any) -> Any:
        raise ValueError("no")

    failing = scripted_agent([text_turn("done")], stop_hooks=broken)
    with pytest.raises(AgentRunError) as caught:
        await failing.create_session().run("go")
    assert caught.value.code == "ERR_PRISM_TURN_POLICY"


async def test_a_policy_stopped_durable_run_is_continuable() -> None:
    """The terminal checkpoint records the stop (succeeded, host_policy); a continue on it runs
    the next turn of the same run. A run stopped by turn_policy.max_turns is final."""
    world = World()
    paused: list[bool] = []

    def stop(context: TurnPolicyContext) -> Any:
        if context.turns == 1 and not paused:
            paused.append(True)
            return {"action": "stop", "reason": "pause"}
        return None

    log: list[Any] = []
    script = [
        tool_turn(("c1", "echo", {"n": 1})),
        tool_turn(("c2", "echo", {"n": 2})),
        text_turn("done"),
    ]
    agent = world.agent(script, tools=[echo_tool(log=log)], turn_policy=stop)
    session = agent.create_session()
    result = await session.run("go", run_state=world.run_state(checkpoint_policy="every-turn"))
    assert (result.status, result.stop_reason) == ("succeeded", "host_policy")
    record = await world.checkpoints.inner.load(AGENT_RUN_NAMESPACE, result.run_id)
    assert record is not None
    assert record.value["status"] == "succeeded"
    assert (record.value["stop_reason"], record.value["stop_detail"]) == ("host_policy", "pause")
    resumed = await resume_agent_run(
        agent,
        {"run_id": result.run_id, "session_id": session.id},
        {"decision": "continue", "expected_version": record.version},
        **world.resume_options(),
    )
    assert (resumed.status, resumed.run_id, resumed.text) == ("succeeded", result.run_id, "done")
    assert resumed.stop_reason is None
    assert [args for _, args in log] == [{"n": 1}, {"n": 2}]

    limited = world.agent(LOOPING, tools=[echo_tool()], turn_policy={"max_turns": 1})
    ended = await limited.create_session().run(
        "go", run_state=world.run_state(checkpoint_policy="every-turn")
    )
    assert ended.stop_reason == "turn_limit"
    final = await world.checkpoints.inner.load(AGENT_RUN_NAMESPACE, ended.run_id)
    assert final is not None
    saves = world.checkpoints.saves
    with pytest.raises(AgentRunStateError, match="Stale or non-running agent run resume"):
        await resume_agent_run(
            limited,
            {"run_id": ended.run_id, "session_id": ended.session_id},
            {"decision": "continue", "expected_version": final.version},
            **world.resume_options(),
        )
    assert world.checkpoints.saves == saves


async def test_a_resumed_run_consults_the_agents_turn_policy() -> None:
    """After an approval the resumed run's boundaries ask the agent's policy, with the
    recorded counters."""
    world = World()
    seen: list[int] = []

    def stop(context: TurnPolicyContext) -> Any:
        seen.append(context.tool_calls)
        return {"action": "stop", "reason": "two calls"} if context.tool_calls >= 2 else None

    log: list[Any] = []
    agent = world.agent(LOOPING, tools=[echo_tool(log=log)], turn_policy=stop)
    session = agent.create_session(id="s1")
    first = await session.run("go", run_state=world.run_state(interrupt_before_tool=True))
    assert first.status == "suspended"
    second = await resume_agent_run(
        agent,
        {"run_id": first.run_id, "session_id": "s1"},
        {"decision": "approve", "expected_version": first.run_state.version},
        **world.resume_options(),
    )
    assert second.status == "suspended"
    third = await resume_agent_run(
        agent,
        {"run_id": first.run_id, "session_id": "s1"},
        {"decision": "approve", "expected_version": second.run_state.version},
        **world.resume_options(),
    )
    assert (third.status, third.stop_reason, third.stop_detail) == (
        "succeeded",
        "host_policy",
        "two calls",
    )
    assert len(log) == 2
    assert seen[-1] == 2


async def test_a_provider_finish_reason_is_redacted_and_bounded_everywhere() -> None:
    """A provider finish reason carrying a secret and 100 KB is redacted and cut to
    MAX_STOP_DETAIL_BYTES on message_finished and the stop hook's context; it is no stop, so
    agent_finished and the terminal checkpoint carry none."""
    secret = "sk-live-456"
    reason = f"{secret} " + "x" * 100_000
    seen: list[str | None] = []

    def hook(context: Any) -> Any:
        seen.append(context.finish_reason)
        return None

    world = World()
    agent = world.agent(
        [[provider_text_delta("cut"), provider_done(finish_reason=reason)]],
        redactor=create_secret_redactor([secret]),
        stop_hooks=[hook],
    )
    session = agent.create_session()
    events = [
        event
        async for event in session.stream(
            "hi", run_state=world.run_state(checkpoint_policy="every-turn")
        )
    ]
    finished = events[-1]
    message_finished = next(e for e in events if e.type == "message_finished")
    assert finished.type == "agent_finished"
    assert finished.finish_reason is None
    record = await world.checkpoints.inner.load(AGENT_RUN_NAMESPACE, finished.run_id)
    assert record is not None
    assert "stop_detail" not in record.value
    for value in (message_finished.finish_reason, seen[0]):
        assert value is not None
        assert secret not in value
        assert value.startswith("[REDACTED] xxx")
        assert len(value.encode("utf-8")) <= MAX_STOP_DETAIL_BYTES


async def test_stop_continuations_hold_across_a_suspension() -> None:
    """A continuation spent before a suspension still counts after the resume: with a bound
    of 2, one before and one after, and the run then finishes."""
    world = World()
    calls: list[int] = []

    def keep_going(context: Any) -> Any:
        calls.append(context.continuations)
        return {"action": "continue", "message": f"again ({context.continuations})"}

    script = [
        text_turn("first"),
        tool_turn(("c1", "echo", {"n": 1})),
        text_turn("second"),
        text_turn("third"),
        text_turn("fourth"),
    ]
    log: list[Any] = []
    agent = world.agent(
        script,
        tools=[echo_tool(log=log)],
        stop_hooks=[keep_going],
        limits={"max_stop_continuations": 2},
    )
    session = agent.create_session(id="s1")
    first = await session.run("go", run_state=world.run_state(interrupt_before_tool=True))
    assert first.status == "suspended"
    assert calls == [0]
    record = await world.checkpoints.inner.load(AGENT_RUN_NAMESPACE, first.run_id)
    assert record is not None
    assert record.value["counters"]["stop_continuations"] == 1

    resumed_agent = world.agent(
        script,
        tools=[echo_tool(log=log)],
        stop_hooks=[keep_going],
        limits={"max_stop_continuations": 2},
    )
    second = await resume_agent_run(
        resumed_agent,
        {"run_id": first.run_id, "session_id": "s1"},
        {"decision": "approve", "expected_version": first.run_state.version},
        **world.resume_options(),
    )
    assert (second.status, second.text, second.stop_reason) == ("succeeded", "third", "hook_limit")
    assert calls == [0, 1, 2]
    assert len(log) == 1
    # The resumed run made the tool round's follow-up turn and one continued turn, no more.
    assert len(resumed_agent.provider.requests) == 2  # type: ignore[union-attr]


async def test_a_run_without_stop_continuations_keeps_its_counters_shape() -> None:
    """Zero continuations are left out of the stored counters, so older records and new ones
    of runs without stop hooks have the same bytes."""
    world = World()
    agent = world.agent(LOOPING, tools=[echo_tool()])
    session = agent.create_session(id="s1")
    first = await session.run("go", run_state=world.run_state(interrupt_before_tool=True))
    record = await world.checkpoints.inner.load(AGENT_RUN_NAMESPACE, first.run_id)
    assert record is not None
    assert set(record.value["counters"]) == {
        "turns",
        "provider_attempts",
        "tool_rounds",
        "tool_calls",
        "usage",
    }


class _WorkerDied(BaseException):
    """Stands in for SIGKILL: nothing in the run may catch it."""


async def test_stop_continuations_hold_across_a_crash_continue() -> None:
    """A worker dies after one continuation; the continued run may continue once more only."""
    world = World()
    calls: list[int] = []

    def keep_going(context: Any) -> Any:
        calls.append(context.continuations)
        return {"action": "continue", "message": f"again ({context.continuations})"}

    script = [text_turn("first"), text_turn("second"), text_turn("third"), text_turn("fourth")]

    def dying(request: ProviderRequest) -> Any:
        if sum(1 for m in request.messages if m.role == "assistant") == 1:
            raise _WorkerDied()
        return script[0]

    options: dict[str, Any] = {
        "id": "investigator",
        "model": {"provider": "mock", "model": "demo"},
        "store": world.sessions,
        "stop_hooks": [keep_going],
        "limits": {"max_stop_continuations": 2},
    }
    first = create_agent(provider=create_mock_provider(dying), **options)
    run_ids: list[str] = []

    async def consume() -> None:
        async for event in first.create_session(id="s1").stream(
            "go", run_state=world.run_state(checkpoint_policy="every-turn")
        ):
            run_ids.append(event.run_id)

    with pytest.raises(_WorkerDied):
        await consume()
    assert calls == [0]
    record = await world.checkpoints.inner.load(AGENT_RUN_NAMESPACE, run_ids[-1])
    assert record is not None
    assert record.value["counters"]["stop_continuations"] == 1

    agent = world.agent(script, **{k: v for k, v in options.items() if k != "store"})
    result = await resume_agent_run(
        agent,
        {"run_id": run_ids[-1], "session_id": "s1"},
        {"decision": "continue", "expected_version": record.version},
        **world.resume_options(),
    )
    assert (result.status, result.text, result.stop_reason) == ("succeeded", "third", "hook_limit")
    assert calls == [0, 1, 2]


async def test_stop_hooks_wait_while_a_steered_message_is_queued() -> None:
    """A turn that would finish while a steered message waits runs that message instead of
    asking the hooks; they are asked once the run is really about to finish."""
    box: list[Any] = []
    seen: list[tuple[str, int]] = []

    def turns(request: ProviderRequest) -> Any:
        answered = sum(1 for m in request.messages if m.role == "assistant")
        if answered == 0:
            box[0].steer("also check the tests")
            return text_turn("first")
        return text_turn("second")

    def hook(context: Any) -> Any:
        seen.append((context.text, context.continuations))
        return None

    agent = create_agent(
        model={"provider": "mock", "model": "demo"},
        provider=create_mock_provider(turns),
        stop_hooks=[hook],
        limits={"max_stop_continuations": 1},
    )
    session = agent.create_session()
    box.append(session)
    result = await session.run("go")
    assert (result.status, result.text) == ("succeeded", "second")
    assert seen == [("second", 0)]
    requests = agent.provider.requests  # type: ignore[union-attr]
    assert len(requests) == 2
    assert requests[1].messages[-1].text == "also check the tests"
