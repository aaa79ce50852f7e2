"""Sub-agents: ``agent.as_tool()``, the child run in its own session on the parent's store, its
result, its events at the parent's subscribers, the shared budget, the parent's guards, and
aborts."""

from __future__ import annotations

from typing import Any

import anyio
import attrs
import pytest

from prism_core import (
    AgentConfigError,
    AgentRunError,
    Guardrail,
    SubAgentEvent,
    ToolDefinition,
    create_agent,
    dispatch_tool_call,
    tool_call_content,
)
from prism_core.tools import ToolExecutionContext

from ..helpers import MODEL, scripted_agent, text_turn, tool_turn
from ..subagent_support import Team, child_of, lookup_tool


def test_as_tool_names_the_agent_and_takes_one_input() -> None:
    """Name defaults to the agent's id; the parameters are exactly ``{"input": string}``;
    ``name=`` and ``description=`` replace the defaults."""
    agent = scripted_agent([text_turn("hi")], id="researcher", name="Researcher")
    tool = agent.as_tool()
    assert tool.name == "researcher"
    assert tool.parameters == {
        "type": "object",
        "properties": {"input": {"type": "string"}},
        "required": ["input"],
    }
    assert tool.description is not None
    assert "Researcher" in tool.description
    other = agent.as_tool(name="ask_research", description="Ask the research team.")
    assert (other.name, other.description) == ("ask_research", "Ask the research team.")
    with pytest.raises(AgentConfigError, match="name="):
        scripted_agent([text_turn("hi")]).as_tool()


def test_as_tool_describes_the_agent_by_its_description() -> None:
    """Without ``description=``, the tool's description is the agent's ``description``; the
    instructions never become it."""
    agent = scripted_agent(
        [text_turn("hi")],
        id="researcher",
        description="Finds sources and summarises them.",
        instructions="Internal: cite only the paid archive.",
    )
    assert agent.as_tool().description == "Finds sources and summarises them."
    assert agent.as_tool(description="Ask it.").description == "Ask it."
    bare = scripted_agent([text_turn("hi")], id="researcher", instructions="Internal: secret.")
    assert bare.as_tool().description is not None
    assert "secret" not in bare.as_tool().description


@pytest.mark.anyio
async def test_a_sub_agent_tool_refuses_to_run_outside_a_run() -> None:
    tool = scripted_agent([text_turn("hi")], id="researcher").as_tool()
    context = ToolExecutionContext(
        session_id="s", run_id="r", tool_call_id="c", tool_name="researcher"
    )
    result = await dispatch_tool_call(
        tool_call_content("c", "researcher", {"input": "x"}),
        registry=create_agent(model=MODEL, tools=[tool]).registry,
        context=context,
    )
    assert result.error is not None
    assert "runs inside an agent run" in result.error.message


@pytest.mark.anyio
async def test_the_child_runs_in_its_own_session_on_the_parents_store() -> None:
    """The child's final text is the call's result; its session is a new one in the parent's
    session store, holding the task as its user input; the child's tool ran in the child run."""
    team = Team()
    lead = team.lead()
    result = await lead.create_session(id="s1").run("what is x?")
    assert result.text == "the answer is 42"
    entries = await team.world.sessions.list("s1")
    tool_results = [
        block
        for entry in entries
        if entry.message is not None and entry.message.role == "tool"
        for block in entry.message.content
    ]
    assert [(b.tool_call_id, b.value) for b in tool_results] == [("p1", "x is 42")]
    assert team.log == [("lookup", {"q": "x"}, child_of(result.run_id))]


@pytest.mark.anyio
async def test_the_child_session_is_stored_with_the_task() -> None:
    team = Team()
    result = await team.lead().create_session(id="s1").run("what is x?")
    from prism_core.durable import child_session_id

    entries = await team.world.sessions.list(child_session_id(result.run_id, "p1"))
    messages = [e.message for e in entries if e.message is not None]
    assert messages[0].role == "user"
    assert messages[0].text == "find x"
    assert messages[-1].text == "x is 42"


@pytest.mark.anyio
async def test_a_child_with_output_type_answers_with_its_output() -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"type": "integer"}},
        "required": ["x"],
    }
    team = Team(child_turns=[text_turn('{"x": 42}')], child_config={"output_type": schema})
    lead = team.lead()
    session = lead.create_session(id="s1")
    await session.run("what is x?")
    entries = await team.world.sessions.list("s1")
    values = [
        block.value
        for entry in entries
        if entry.message is not None and entry.message.role == "tool"
        for block in entry.message.content
    ]
    assert values == [{"x": 42}]


@attrs.frozen
class Finding:
    """What the researcher found."""

    x: int
    source: str


@pytest.mark.anyio
async def test_a_child_with_a_class_output_type_answers_with_its_json() -> None:
    """The child's output is an instance; the parent's call gets its JSON form."""
    team = Team(
        child_turns=[text_turn('{"x": 42, "source": "ledger"}')],
        child_config={"output_type": Finding},
    )
    await team.lead().create_session(id="s1").run("what is x?")
    entries = await team.world.sessions.list("s1")
    values = [
        block.value
        for entry in entries
        if entry.message is not None and entry.message.role == "tool"
        for block in entry.message.content
    ]
    assert values == [{"x": 42, "source": "ledger"}]


@pytest.mark.anyio
async def test_child_events_reach_the_parent_stream_and_subscribers_tagged() -> None:
    """Each child event arrives wrapped in a ``subagent_event`` carrying the parent's ids, the
    call, and the child's run and session ids, in order, between the call's start and
    finish; a subscriber of the parent session sees the same events."""
    team = Team()
    session = team.lead().create_session(id="s1")
    subscription = session.subscribe()
    stream = session.stream("what is x?")
    events = [event async for event in stream]
    seen = [event async for event in subscription]
    assert [e.type for e in seen] == [e.type for e in events]
    run_id = stream.run_id
    assert run_id is not None
    wrapped = [e for e in events if isinstance(e, SubAgentEvent)]
    assert {(e.run_id, e.session_id, e.tool_call_id) for e in wrapped} == {(run_id, "s1", "p1")}
    assert {e.child_run_id for e in wrapped} == {child_of(run_id)}
    assert {e.event.run_id for e in wrapped} == {child_of(run_id)}
    inner = [e.event.type for e in wrapped]
    assert inner[0] == "agent_started"
    assert inner[-1] == "agent_finished"
    assert "tool_execution_finished" in inner
    kinds = [e.type for e in events]
    first, last = kinds.index("subagent_event"), len(kinds) - kinds[::-1].index("subagent_event")
    assert kinds[first - 1] == "tool_execution_started"
    assert kinds[last] == "tool_execution_finished"


@pytest.mark.anyio
async def test_a_failing_child_is_an_error_result_the_parent_sees() -> None:
    """A child whose provider fails ends ``failed``; the parent's call gets an error result
    naming it and the parent goes on."""
    from prism_core import ErrorInfo, provider_error

    failing = [[provider_error(ErrorInfo("model is down", code="boom"))]]
    team = Team(child_turns=failing)
    result = await team.lead().create_session(id="s1").run("what is x?")
    assert result.status == "succeeded"
    entries = await team.world.sessions.list("s1")
    errors = [
        block.error
        for entry in entries
        if entry.message is not None and entry.message.role == "tool"
        for block in entry.message.content
    ]
    assert len(errors) == 1
    assert errors[0] is not None
    assert errors[0].message.startswith("the sub-agent run ended failed")


# -- one budget ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_parents_tool_call_limit_is_shared_with_the_child() -> None:
    """Parent limit 2, its own call 1: the child may make one call; its second fails the
    child and the parent, with the parent's axis; the second lookup never ran."""
    turns = [tool_turn(("k1", "lookup", {"q": "a"})), tool_turn(("k2", "lookup", {"q": "b"}))]
    team = Team(child_turns=turns, lead_config={"limits": {"max_tool_calls": 2}})
    with pytest.raises(AgentRunError) as caught:
        await team.lead().create_session(id="s1").run("go")
    result = caught.value.result
    assert result.limit is not None
    assert result.limit.axis == "max_tool_calls"
    assert result.limit.observed == 3
    assert [entry[1] for entry in team.log] == [{"q": "a"}]


@pytest.mark.anyio
async def test_the_parents_turn_limit_is_shared_with_the_child() -> None:
    turns = [tool_turn(("k1", "lookup", {"q": "a"})), tool_turn(("k2", "lookup", {"q": "b"}))]
    team = Team(child_turns=turns, lead_config={"limits": {"max_turns": 2}})
    with pytest.raises(AgentRunError) as caught:
        await team.lead().create_session(id="s1").run("go")
    assert caught.value.result.limit is not None
    assert caught.value.result.limit.axis == "max_turns"
    assert len(team.log) == 1


@pytest.mark.anyio
async def test_the_parents_cost_limit_counts_the_childs_spend() -> None:
    """Each child turn costs 0.4; parent max_cost 1.0 after its own 0.4: the child's second
    turn crosses it."""
    from prism_core import Usage, provider_done, provider_tool_call

    def costly(*calls: tuple[str, str, dict[str, Any]]) -> list[Any]:
        events: list[Any] = [provider_tool_call(tool_call_content(*call)) for call in calls]
        events.append(provider_done(Usage(input_tokens=1, output_tokens=1, cost=0.4)))
        return events

    child_turns = [costly(("k1", "lookup", {"q": "a"})), costly(("k2", "lookup", {"q": "b"}))]
    lead_turns = [costly(("p1", "researcher", {"input": "go"})), text_turn("done")]
    team = Team(
        child_turns=child_turns, lead_turns=lead_turns, lead_config={"limits": {"max_cost": 1.0}}
    )
    with pytest.raises(AgentRunError) as caught:
        await team.lead().create_session(id="s1").run("go")
    limit = caught.value.result.limit
    assert limit is not None
    assert limit.axis == "max_cost"
    assert [entry[1] for entry in team.log] == [{"q": "a"}]


@pytest.mark.anyio
async def test_the_parents_wall_time_bounds_the_child() -> None:
    """A child tool that would outlast the parent's wall time: the parent fails on its limit
    and the child's tool is cancelled."""
    finished: list[str] = []

    async def slow(args: dict[str, Any], context: Any) -> str:
        await anyio.sleep(30)
        finished.append("slow")
        return "late"

    team = Team(
        child_turns=[tool_turn(("k1", "slow", {})), text_turn("done")],
        child_config={"tools": [ToolDefinition("slow", slow)]},
        lead_config={"limits": {"max_wall_time_ms": 300}},
    )
    with pytest.raises(AgentRunError) as caught:
        await team.lead().create_session(id="s1").run("go")
    assert caught.value.result.limit is not None
    assert caught.value.result.limit.axis == "max_wall_time_ms"
    assert finished == []


# -- guards -------------------------------------------------------------------------------


def _no_delete(context: Any) -> Any:
    if context.tool_name == "delete":
        return {"action": "block", "reason": "deleting is not allowed here"}
    return {"action": "allow"}


@pytest.mark.anyio
async def test_the_parents_tool_guards_apply_to_the_childs_calls() -> None:
    """The lead agent's tool-input guard blocks the child's ``delete`` before it runs; the
    child's ``lookup`` passes it."""
    deleted: list[Any] = []
    child_turns = [
        tool_turn(("k1", "delete", {"path": "/"}), ("k2", "lookup", {"q": "x"})),
        text_turn("could not delete"),
    ]
    team = Team(
        child_turns=child_turns,
        child_config={"tools": [lookup_tool([]), lookup_tool(deleted, "delete")]},
        lead_config={"guardrails": [Guardrail("no-delete", "tool_input", _no_delete)]},
    )
    events = [e async for e in team.lead().create_session(id="s1").stream("go")]
    inner = [e.event for e in events if isinstance(e, SubAgentEvent)]
    blocked = [e for e in inner if e.type == "tool_execution_blocked"]
    assert [(e.tool_call_id, e.reason) for e in blocked] == [("k1", "guardrail_blocked")]
    assert deleted == []
    finished = [e.tool_call_id for e in inner if e.type == "tool_execution_finished"]
    assert finished == ["k2"]


@pytest.mark.anyio
async def test_a_run_guard_of_the_parent_applies_to_the_child_too() -> None:
    deleted: list[Any] = []
    team = Team(
        child_turns=[tool_turn(("k1", "delete", {"path": "/"})), text_turn("no")],
        child_config={"tools": [lookup_tool(deleted, "delete")]},
    )
    guard = Guardrail("no-delete", "tool_input", _no_delete)
    await team.lead().create_session(id="s1").run("go", guardrails=[guard])
    assert deleted == []


# -- abort --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_aborting_the_parent_aborts_the_child() -> None:
    """The child's tool waits; the parent session is aborted: the parent ends aborted and the
    child's tool is cancelled; the child's side-effecting call was under way, so its record
    stays ``running`` with that call in doubt."""
    started = anyio.Event()

    async def wait(args: dict[str, Any], context: Any) -> str:
        started.set()
        await anyio.sleep(30)
        return "never"

    team = Team(
        child_turns=[tool_turn(("k1", "wait", {})), text_turn("done")],
        child_config={"tools": [ToolDefinition("wait", wait)]},
    )
    session = team.lead().create_session(id="s1")
    outcome: list[Any] = []

    async def run() -> None:
        try:
            await session.run("go", run_state=team.world.run_state(checkpoint_policy="every-turn"))
        except AgentRunError as exc:
            outcome.append(exc.result)

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await started.wait()
        assert session.abort("stop")
    [result] = outcome
    assert result.status == "aborted"
    status = await team.child_status(result.run_id)
    assert status is not None
    assert status.state.status == "running"
    assert [c.tool_call_id for c in status.state.pending_calls if c.status == "dispatched"] == [
        "k1"
    ]


@pytest.mark.anyio
async def test_a_non_durable_parent_cannot_hold_a_childs_decision() -> None:
    """A child that suspends (its own run_state) under a parent without one fails the parent:
    the decision could never be taken."""
    from ..subagent_support import ASK

    team = Team()
    team.child_config = {"guardrails": [ASK], "run_state": team.world.run_state()}
    with pytest.raises(AgentRunError) as caught:
        await team.lead().create_session(id="s1").run("go")
    error = caught.value.result.error
    assert error is not None
    assert error.code == "ERR_PRISM_SUBAGENT_SUSPENDED"
    assert team.log == []


@pytest.mark.anyio
async def test_a_child_with_its_own_store_under_a_durable_parent_is_refused() -> None:
    from prism_core import RunStateOptions, create_memory_checkpoint_store

    team = Team()
    team.child_config = {"run_state": RunStateOptions(create_memory_checkpoint_store(), "other")}
    with pytest.raises(AgentRunError) as caught:
        await team.lead().create_session(id="s1").run("go", run_state=team.world.run_state())
    error = caught.value.result.error
    assert error is not None
    assert error.code == "ERR_PRISM_SUBAGENT_RUN_STATE"
    assert team.log == []
