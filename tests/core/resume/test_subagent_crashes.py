"""A worker that dies while a sub-agent runs: the parent's ``continue`` continues the same child
run, and no tool of either runs twice (in-process; the SIGKILL test is in tests/integration)."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import (
    AgentRunStateError,
    ProviderRequest,
    ToolDefinition,
    create_agent,
    create_mock_provider,
    load_agent_run_state,
    resume_agent_run,
)

from ..durable_support import REVISION
from ..helpers import MODEL, text_turn, tool_turn
from ..subagent_support import ASK, Team, child_of, delegate_turn


class WorkerDied(BaseException):
    """Stands in for SIGKILL: nothing in the run may catch it."""


def child_script(die: dict[str, int]) -> Any:
    """The researcher's turns by history; it kills the worker at turn ``die["turn"]``."""
    turns = [
        tool_turn(("k1", "lookup", {"q": "x"})),
        tool_turn(("k2", "lookup", {"q": "y"})),
        text_turn("x is 42"),
    ]

    def events(request: ProviderRequest) -> list[Any]:
        index = sum(1 for m in request.messages if m.role == "assistant")
        if index == die.get("turn"):
            raise WorkerDied()
        return turns[min(index, len(turns) - 1)]

    return create_mock_provider(events)


class CrashTeam(Team):
    """A team whose researcher may kill the worker (``die``)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.die: dict[str, int] = {}

    def child(self) -> Any:
        config = {"tools": [self.tool()], **self.child_config}
        return create_agent(id="researcher", model=MODEL, provider=child_script(self.die), **config)

    def tool(self) -> ToolDefinition:
        log = self.log

        def lookup(args: dict[str, Any], context: Any) -> Any:
            log.append((args["q"], context.run_id))
            if self.die.get("in_tool") == len(log):
                raise WorkerDied()
            return {"found": args["q"]}

        return ToolDefinition("lookup", lookup)


async def start(team: CrashTeam) -> str:
    """Start the lead run under every-turn checkpoints; it dies; return its run id."""
    stream = (
        team.lead()
        .create_session(id="s1")
        .stream("what is x?", run_state=team.world.run_state(checkpoint_policy="every-turn"))
    )
    seen: list[str] = []

    async def consume() -> None:
        async for event in stream:
            seen.append(event.run_id)

    with pytest.raises(WorkerDied):
        await consume()
    return seen[0]


async def continue_lead(team: CrashTeam, run_id: str, **resume: Any) -> Any:
    status = await load_agent_run_state(team.world.checkpoints, {"run_id": run_id})
    assert status is not None
    assert status.state.status == "running"
    return await resume_agent_run(
        team.lead(),
        {"run_id": run_id, "session_id": "s1"},
        {"expected_version": status.version, "decision": "continue", **resume},
        checkpoints=team.world.checkpoints,
        definition_revision=REVISION,
    )


@pytest.mark.anyio
async def test_a_crash_between_the_childs_turns_is_continued_in_the_same_child() -> None:
    """The worker dies at the child's third turn (both lookups done, and the parent's own
    ``note`` before the delegation); the parent's continue continues the same child run from
    its last checkpoint: no lookup and no note runs again."""
    notes: list[str] = []

    def note(args: dict[str, Any], context: Any) -> str:
        notes.append(context.run_id)
        return "noted"

    team = CrashTeam(
        lead_turns=[tool_turn(("n1", "note", {})), delegate_turn(), text_turn("the answer is 42")]
    )
    team.lead_config = {"tools": [ToolDefinition("note", note), team.child().as_tool()]}
    team.die["turn"] = 2
    run_id = await start(team)
    child_id = child_of(run_id)
    assert notes == [run_id]
    assert team.log == [("x", child_id), ("y", child_id)]
    child = await load_agent_run_state(team.world.checkpoints, {"run_id": child_id})
    assert child is not None
    assert child.state.status == "running"
    team.die.clear()
    team.lead_config = {"tools": [ToolDefinition("note", note), team.child().as_tool()]}
    result = await continue_lead(team, run_id)
    assert result.status == "succeeded"
    assert result.text == "the answer is 42"
    assert team.log == [("x", child_id), ("y", child_id)]
    assert notes == [run_id]
    child = await load_agent_run_state(team.world.checkpoints, {"run_id": child_id})
    assert child is not None
    assert child.state.status == "succeeded"


@pytest.mark.anyio
async def test_a_crash_inside_a_childs_tool_refuses_the_parents_continue_until_resolved() -> None:
    """The worker dies inside the child's second lookup: that call is in doubt in the child,
    so the parent's continue is refused (``ERR_PRISM_TOOL_IN_DOUBT``, naming the child's call,
    at the parent's version) and writes nothing; a continue of the parent whose resolutions
    settle the child's call finishes both, without running it again."""
    team = CrashTeam()
    team.die["in_tool"] = 2
    run_id = await start(team)
    child_id = child_of(run_id)
    team.die.clear()
    before = (
        await team.world.checkpoints.raw(run_id),
        await team.world.checkpoints.raw(child_id),
    )
    status = await load_agent_run_state(team.world.checkpoints, {"run_id": run_id})
    assert status is not None
    with pytest.raises(AgentRunStateError) as caught:
        await continue_lead(team, run_id)
    assert caught.value.code == "ERR_PRISM_TOOL_IN_DOUBT"
    assert caught.value.in_doubt == ("k2",)
    assert f"expected_version {status.version}" in caught.value.message
    assert (
        await team.world.checkpoints.raw(run_id),
        await team.world.checkpoints.raw(child_id),
    ) == before
    resolved = {"tool_call_id": "k2", "outcome": "completed", "result": {"found": "y"}}
    result = await continue_lead(team, run_id, resolutions=[resolved])
    assert result.status == "succeeded"
    assert team.log == [("x", child_id), ("y", child_id)]


@pytest.mark.anyio
async def test_a_resolution_naming_no_call_of_either_run_is_refused() -> None:
    """Nothing runs: the continue is refused before the claim."""
    team = CrashTeam()
    team.die["in_tool"] = 2
    run_id = await start(team)
    team.die.clear()
    from prism_core import AgentDecisionError

    with pytest.raises(AgentDecisionError) as caught:
        await continue_lead(
            team,
            run_id,
            resolutions=[
                {"tool_call_id": "k2", "outcome": "not_started"},
                {"tool_call_id": "nope", "outcome": "not_started"},
            ],
        )
    assert caught.value.code == "ERR_PRISM_DECISION_UNKNOWN"
    assert len(team.log) == 2


@pytest.mark.anyio
async def test_a_crash_after_the_nested_decision_continues_the_resumed_child() -> None:
    """The child asks; the human approves at the parent; the resumed child runs its lookup
    and the worker dies at its next turn; the parent's continue continues that child: the
    approved lookup does not run again."""
    team = CrashTeam()
    team.child_config = {"guardrails": [ASK]}
    team.child_turns = []
    suspended = (
        await team.lead()
        .create_session(id="s1")
        .run("what is x?", run_state=team.world.run_state(checkpoint_policy="every-turn"))
    )
    assert suspended.status == "suspended"
    child_id = child_of(suspended.run_id)
    team.die["turn"] = 1
    with pytest.raises(WorkerDied):
        await resume_agent_run(
            team.lead(),
            {"run_id": suspended.run_id, "session_id": "s1"},
            {"expected_version": suspended.run_state.version, "decision": "approve"},
            checkpoints=team.world.checkpoints,
            definition_revision=REVISION,
        )
    assert team.log == [("x", child_id)]
    team.die.clear()
    result = await continue_lead(team, suspended.run_id)
    assert result.status == "succeeded"
    assert team.log == [("x", child_id), ("y", child_id)]


@pytest.mark.anyio
async def test_an_operator_settling_the_parents_call_leaves_the_child_alone() -> None:
    """The child is in doubt, but the operator resolves the parent's own call: the parent
    goes on with that result, and its child is neither continued nor asked about."""
    team = CrashTeam()
    team.die["in_tool"] = 2
    run_id = await start(team)
    child_id = child_of(run_id)
    team.die.clear()
    settled = {"tool_call_id": "p1", "outcome": "completed", "result": "x is 42"}
    result = await continue_lead(team, run_id, resolutions=[settled])
    assert result.status == "succeeded"
    assert team.log == [("x", child_id), ("y", child_id)]
    child = await load_agent_run_state(team.world.checkpoints, {"run_id": child_id})
    assert child is not None
    assert child.state.status == "running"
