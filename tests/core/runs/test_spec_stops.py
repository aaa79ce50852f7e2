"""Stops on purpose, as the spec describes them: the stop-hook cap and its default, and
continuing a durable run that a turn policy or the stop-hook cap stopped."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import (
    DEFAULT_MAX_STOP_CONTINUATIONS,
    ProviderRequest,
    ToolDefinition,
    TurnPolicyContext,
    resume_agent_run,
)
from prism_core.durable import AGENT_RUN_NAMESPACE

from ..durable_support import World
from ..helpers import scripted_agent, text_turn, tool_turn

pytestmark = pytest.mark.anyio


def always_continue(calls: list[int]) -> Any:
    def hook(context: Any) -> Any:
        calls.append(context.continuations)
        return {"action": "continue", "message": f"keep going ({context.continuations})"}

    return hook


async def test_stop_hooks_continue_at_most_three_times_by_default() -> None:
    """limits.max_stop_continuations defaults to 3: a hook that always continues gets three
    extra turns, and the fourth ask ends the run with finish_reason "hook_limit"."""
    assert DEFAULT_MAX_STOP_CONTINUATIONS == 3
    calls: list[int] = []
    agent = scripted_agent([text_turn("answer")], stop_hooks=[always_continue(calls)])
    events = [e async for e in agent.create_session().stream("go")]
    finished = events[-1]
    assert (finished.type, finished.finish_reason) == ("agent_finished", "hook_limit")
    assert calls == [0, 1, 2, 3]
    assert len(agent.provider.requests) == 4  # type: ignore[union-attr]


async def test_a_zero_cap_lets_hooks_observe_only_and_none_means_no_cap() -> None:
    """With max_stop_continuations 0 the hooks are consulted but cannot continue (the run ends
    "hook_limit" after one turn); with None they continue until they let the run finish."""
    calls: list[int] = []
    agent = scripted_agent(
        [text_turn("answer")],
        stop_hooks=[always_continue(calls)],
        limits={"max_stop_continuations": 0},
    )
    result = await agent.create_session().run("go")
    assert (result.status, result.stop_reason, calls) == ("succeeded", "hook_limit", [0])
    assert len(agent.provider.requests) == 1  # type: ignore[union-attr]

    seen: list[int] = []

    def five_more(context: Any) -> Any:
        seen.append(context.continuations)
        if context.continuations < 5:
            return {"action": "continue", "message": "again"}
        return None

    uncapped = scripted_agent(
        [text_turn("answer")], stop_hooks=[five_more], limits={"max_stop_continuations": None}
    )
    result = await uncapped.create_session().run("go")
    assert (result.stop_reason, seen) == (None, [0, 1, 2, 3, 4, 5])
    assert len(uncapped.provider.requests) == 6  # type: ignore[union-attr]


async def test_a_hook_capped_durable_run_is_continuable() -> None:
    """A run that stopped at the stop-hook cap records succeeded/"hook_limit" and a continue
    runs its next turn; a run that finished on its own is not continuable."""
    world = World()
    calls: list[int] = []
    script = [text_turn("first"), text_turn("second"), text_turn("third")]
    options: dict[str, Any] = {
        "stop_hooks": [always_continue(calls)],
        "limits": {"max_stop_continuations": 1},
    }
    agent = world.agent(script, **options)
    session = agent.create_session(id="s1")
    first = await session.run("go", run_state=world.run_state(checkpoint_policy="every-turn"))
    assert (first.status, first.stop_reason, first.text) == ("succeeded", "hook_limit", "second")
    record = await world.checkpoints.inner.load(AGENT_RUN_NAMESPACE, first.run_id)
    assert record is not None
    assert (record.value["status"], record.value["stop_reason"]) == ("succeeded", "hook_limit")
    resumed = await resume_agent_run(
        world.agent(script, **options),
        {"run_id": first.run_id, "session_id": "s1"},
        {"decision": "continue", "expected_version": record.version},
        **world.resume_options(),
    )
    # The continuation count rides the checkpoint: the resumed turn's finish asks again and
    # meets the cap at once.
    assert (resumed.status, resumed.text, resumed.stop_reason) == (
        "succeeded",
        "third",
        "hook_limit",
    )

    plain = world.agent([text_turn("done")])
    natural = await plain.create_session().run(
        "go", run_state=world.run_state(checkpoint_policy="every-turn")
    )
    assert natural.stop_reason is None
    done = await world.checkpoints.inner.load(AGENT_RUN_NAMESPACE, natural.run_id)
    assert done is not None
    assert "stop_reason" not in done.value
    saves = world.checkpoints.saves
    with pytest.raises(Exception, match="Stale or non-running agent run resume"):
        await resume_agent_run(
            plain,
            {"run_id": natural.run_id, "session_id": natural.session_id},
            {"decision": "continue", "expected_version": done.version},
            **world.resume_options(),
        )
    assert world.checkpoints.saves == saves


async def test_a_steer_sent_in_the_stopped_leg_reaches_the_resumed_leg_once() -> None:
    """A message steered while a tool runs is applied at the next boundary, before the policy
    stops the run; the continued run's next request holds it exactly once."""
    world = World()
    box: list[Any] = []

    def look(args: dict[str, Any], context: Any) -> str:
        box[0].steer("also check the tests")
        return "looked"

    stops: list[int] = []

    def stop(context: TurnPolicyContext) -> Any:
        if context.turns == 1 and not stops:
            stops.append(1)
            return {"action": "stop", "reason": "budget review"}
        return None

    script = [tool_turn(("c1", "look", {})), text_turn("checked")]
    tools = [ToolDefinition("look", look)]
    agent = world.agent(script, tools=tools, turn_policy=stop)
    session = agent.create_session(id="s1")
    box.append(session)
    first = await session.run("go", run_state=world.run_state(checkpoint_policy="every-turn"))
    assert (first.stop_reason, first.stop_detail) == ("host_policy", "budget review")
    record = await world.checkpoints.inner.load(AGENT_RUN_NAMESPACE, first.run_id)
    assert record is not None

    second = world.agent(script, tools=tools, turn_policy=stop)
    resumed = await resume_agent_run(
        second,
        {"run_id": first.run_id, "session_id": "s1"},
        {"decision": "continue", "expected_version": record.version},
        **world.resume_options(),
    )
    assert (resumed.status, resumed.text) == ("succeeded", "checked")
    requests: list[ProviderRequest] = list(second.provider.requests)  # type: ignore[union-attr]
    assert len(requests) == 1
    steered = [m.text for m in requests[0].messages if m.role == "user"]
    assert steered.count("also check the tests") == 1
    assert requests[0].messages[-1].text == "also check the tests"
