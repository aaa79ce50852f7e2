"""Callers: one identity on every door (API.md, fourth round, "Callers").

A :class:`~prism_core.Principal` scopes runs by its ``ownership`` and names its ``actor`` and
``channel``, the actor never part of the match; every decision records the actor and channel;
the run's starter and the call's approvals reach the tool."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import (
    AgentDecisionError,
    InvalidPrincipalError,
    Principal,
    ToolDefinition,
    coerce_principal,
    list_agent_runs,
    load_agent_run_state,
    resume_agent_run,
)
from prism_core.errors import PrismError

from .durable_support import World
from .helpers import text_turn, tool_turn

SCRIPT = [tool_turn(("c1", "refund", {"order": "A-3", "eur": 120})), text_turn("refunded")]


def refund_tool(seen: list[Any]) -> ToolDefinition:
    """A ``refund`` tool needing approval that records what its context says."""

    def execute(args: dict[str, Any], context: Any) -> dict[str, Any]:
        seen.append(
            {
                "started_by": context.started_by,
                "approvals": [(r.actor, r.channel, r.outcome) for r in context.approvals],
            }
        )
        return {"refunded": args["order"]}

    return ToolDefinition(
        "refund",
        execute,
        parameters={
            "type": "object",
            "properties": {"order": {"type": "string"}, "eur": {"type": "number"}},
        },
        needs_approval=True,
    )


def test_a_principal_keeps_the_actor_out_of_the_ownership() -> None:
    """``Principal(ownership, actor, channel)``: the scope a store matches is the ownership
    alone; the defaults are no ownership, no actor and the ``api`` channel."""
    team = Principal({"tenant_id": "acme"}, actor="ana@acme.test", channel="console")
    assert team.scope == {"tenant_id": "acme"}
    assert (team.actor, team.channel) == ("ana@acme.test", "console")
    assert Principal() == Principal(ownership=None, actor=None, channel="api")
    assert Principal({}).scope is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"actor": ""},
        {"actor": "x" * 257},
        {"actor": "é" * 129},
        {"actor": 7},
        {"channel": "Console"},
        {"channel": ""},
        {"channel": "c" * 33},
        {"ownership": {"tenant": 1}},
        {"ownership": ["tenant"]},
    ],
)
def test_a_malformed_principal_is_a_typed_refusal(kwargs: dict[str, Any]) -> None:
    """An actor over 256 UTF-8 bytes, an empty one, a channel that is not a short lower-case
    name or an ownership that is not strings to strings is refused with a stable code."""
    with pytest.raises(InvalidPrincipalError) as caught:
        Principal(**kwargs)
    assert caught.value.code == "ERR_PRISM_PRINCIPAL_INVALID"
    assert isinstance(caught.value, PrismError)


def test_an_ownership_mapping_names_its_actor_and_keeps_it_in_the_match() -> None:
    """What ``authorize`` returned before principals existed: a mapping's ``actor``, else its
    ``sub``, names the actor and stays part of the ownership; a ``Principal`` keeps its own
    actor and takes the face's channel when it left the default."""
    mapped = coerce_principal({"tenant_id": "acme", "sub": "u-7"}, channel="agui")
    assert mapped == Principal({"tenant_id": "acme", "sub": "u-7"}, "u-7", "agui")
    assert coerce_principal({}, channel="api", default_actor="api") == Principal(None, "api")
    given = Principal({"tenant_id": "acme"}, actor="ana")
    assert coerce_principal(given, channel="a2a").channel == "a2a"
    own = Principal({"tenant_id": "acme"}, actor="ana", channel="slack")
    assert coerce_principal(own, channel="a2a") == own
    with pytest.raises(InvalidPrincipalError):
        coerce_principal("root", channel="api")


async def _suspended(world: World, seen: list[Any], **run: Any) -> tuple[str, int]:
    agent = world.agent(SCRIPT, tools=[refund_tool(seen)])
    result = await agent.create_session(id="s1").run(
        "refund A-3", run_state=world.run_state(), **run
    )
    assert result.status == "suspended"
    assert result.run_state is not None
    return result.run_id, result.run_state.version


async def _resume(world: World, seen: list[Any], run_id: str, resume: Any) -> Any:
    agent = world.agent(SCRIPT, tools=[refund_tool(seen)])
    return await resume_agent_run(
        agent, {"run_id": run_id, "session_id": "s1"}, resume, **world.resume_options()
    )


@pytest.mark.anyio
async def test_the_starter_and_the_approvals_reach_the_tool_across_a_resume() -> None:
    """A run started with ``actor="bob"`` and approved by ana on the console: the tool's
    context names bob as the starter and ana's allow as its approval; the summary lists bob."""
    world, seen = World(), []
    run_id, version = await _suspended(world, seen, actor="bob")
    page = await list_agent_runs(world.checkpoints)
    assert [summary.started_by for summary in page.runs] == ["bob"]
    result = await _resume(
        world,
        seen,
        run_id,
        {"expected_version": version, "decision": "approve", "actor": "ana", "channel": "console"},
    )
    assert result.status == "succeeded"
    assert seen == [{"started_by": "bob", "approvals": [("ana", "console", "allow_once")]}]
    status = await load_agent_run_state(world.checkpoints, {"run_id": run_id})
    assert status is not None
    assert status.state.started_by == "bob"
    # Ana's allow, then the receipt of the refund that ran (channel "worker").
    assert (status.audit[0].actor, status.audit[0].channel) == ("ana", "console")
    assert [(r.outcome, r.channel) for r in status.audit[1:]] == [("executed", "worker")]


@pytest.mark.anyio
async def test_a_decision_without_a_channel_records_host() -> None:
    """A resume input that names no channel is a host calling the API: ``host``; a run
    started without an actor has no starter."""
    world, seen = World(), []
    run_id, version = await _suspended(world, seen)
    await _resume(world, seen, run_id, {"expected_version": version, "decision": "approve"})
    status = await load_agent_run_state(world.checkpoints, {"run_id": run_id})
    assert status is not None
    assert (status.audit[0].actor, status.audit[0].channel) == (None, "host")
    assert [r.outcome for r in status.audit] == ["allow_once", "executed"]
    assert seen == [{"started_by": None, "approvals": [(None, "host", "allow_once")]}]


@pytest.mark.anyio
async def test_a_malformed_channel_or_actor_is_refused_before_any_write() -> None:
    """A channel that is not a short lower-case name is a decision error; the run option
    ``actor`` over 256 bytes is refused before the run starts."""
    world, seen = World(), []
    run_id, version = await _suspended(world, seen)
    before = await world.checkpoints.raw(run_id)
    with pytest.raises(AgentDecisionError):
        await _resume(
            world,
            seen,
            run_id,
            {"expected_version": version, "decision": "approve", "channel": "Bad Channel"},
        )
    assert await world.checkpoints.raw(run_id) == before
    assert seen == []
    agent = world.agent(SCRIPT, tools=[refund_tool(seen)])
    with pytest.raises(PrismError) as caught:
        await agent.create_session().run("x", actor="a" * 257)
    assert caught.value.code == "ERR_PRISM_INVALID_OPTIONS"
