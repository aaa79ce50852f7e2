"""``approvers=N``: a held call runs only after allows from N distinct actors; each allow is
audited and the run stays suspended on the same decision until the last; a repeated or an
anonymous approver is refused and nothing is written; one reject ends the call."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import (
    AgentDecisionError,
    ToolDefinition,
    create_agent_run_lifecycle,
    load_agent_run_state,
    resume_agent_run,
)

from ..durable_support import REVISION, World
from ..helpers import text_turn, tool_turn
from ..subagent_support import Team, child_of, delegate_turn

APPROVER = "ERR_PRISM_DECISION_APPROVER"


def _wire_tool(log: list[Any], seen: list[Any]) -> ToolDefinition:
    def wire(args: dict[str, Any], context: Any) -> str:
        log.append(args["amount"])
        seen.append(tuple((r.actor, r.outcome) for r in context.approvals))
        return "sent"

    return ToolDefinition("wire", wire, needs_approval=True, approvers=2)


class Desk:
    """A billing agent whose ``wire`` tool needs two approvers, on one world's stores."""

    def __init__(self) -> None:
        self.world = World()
        self.log: list[Any] = []
        self.seen: list[Any] = []

    def agent(self) -> Any:
        return self.world.agent(
            [tool_turn(("w1", "wire", {"amount": 250})), text_turn("wired")],
            id="billing",
            tools=[_wire_tool(self.log, self.seen)],
        )

    async def suspend(self) -> Any:
        result = (
            await self.agent()
            .create_session(id="s1")
            .run("wire 250", run_state=self.world.run_state())
        )
        assert result.status == "suspended"
        return result

    async def decide(self, run_id: str, version: int, **resume: Any) -> Any:
        return await resume_agent_run(
            self.agent(),
            {"run_id": run_id, "session_id": "s1"},
            {"expected_version": version, **resume},
            **self.world.resume_options(),
        )

    async def status(self, run_id: str) -> Any:
        found = await load_agent_run_state(self.world.checkpoints, {"run_id": run_id})
        assert found is not None
        return found


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["approve", "batch"])
async def test_two_distinct_allows_run_the_call_once(how: str) -> None:
    """Alice's allow is audited and leaves the run suspended on the same decision, which now
    lists her; Bob's runs the call once, and the tool sees both allows."""
    desk = Desk()
    first = await desk.suspend()
    (pending,) = first.interruption.pending_decisions
    assert pending.approvers == 2
    assert pending.approved_by is None

    def resume(actor: str) -> dict[str, Any]:
        if how == "approve":
            return {"decision": "approve", "actor": actor}
        return {
            "decisions": [{"approval_id": pending.approval_id, "outcome": "allow_once"}],
            "actor": actor,
        }

    after_alice = await desk.decide(first.run_id, first.run_state.version, **resume("alice"))
    assert after_alice.status == "suspended"
    assert desk.log == []
    (still,) = after_alice.interruption.pending_decisions
    assert still.approval_id == pending.approval_id
    assert still.approved_by == ("alice",)
    assert after_alice.interruption.reason == first.interruption.reason
    stored = await desk.status(first.run_id)
    assert stored.state.status == "suspended"
    assert [(r.actor, r.outcome, r.approval_id) for r in stored.audit] == [
        ("alice", "allow_once", pending.approval_id)
    ]
    assert stored.state.pending_calls[0].status == "pending"

    done = await desk.decide(first.run_id, after_alice.run_state.version, **resume("bob"))
    assert done.status == "succeeded"
    assert desk.log == [250]
    assert desk.seen == [(("alice", "allow_once"), ("bob", "allow_once"))]
    final = await desk.status(first.run_id)
    allows = [(r.actor, r.outcome) for r in final.audit if r.outcome.startswith("allow")]
    assert allows == [("alice", "allow_once"), ("bob", "allow_once")]


@pytest.mark.anyio
@pytest.mark.parametrize("actor", ["alice", None], ids=["repeated", "anonymous"])
async def test_a_repeated_or_anonymous_approver_is_refused_and_nothing_is_written(
    actor: str | None,
) -> None:
    """After Alice's allow, another allow by Alice (or by nobody named) is refused with
    ``ERR_PRISM_DECISION_APPROVER``; the stored record is the same, byte for byte."""
    desk = Desk()
    first = await desk.suspend()
    after = await desk.decide(
        first.run_id, first.run_state.version, decision="approve", actor="alice"
    )
    before = await desk.world.checkpoints.raw(first.run_id)
    saves = desk.world.checkpoints.saves
    resume: dict[str, Any] = {"decision": "approve"}
    if actor is not None:
        resume["actor"] = actor
    with pytest.raises(AgentDecisionError) as caught:
        await desk.decide(first.run_id, after.run_state.version, **resume)
    assert caught.value.code == APPROVER
    assert await desk.world.checkpoints.raw(first.run_id) == before
    assert desk.world.checkpoints.saves == saves
    assert desk.log == []


@pytest.mark.anyio
async def test_a_first_allow_without_an_actor_is_refused() -> None:
    desk = Desk()
    first = await desk.suspend()
    before = await desk.world.checkpoints.raw(first.run_id)
    with pytest.raises(AgentDecisionError) as caught:
        await desk.decide(first.run_id, first.run_state.version, decision="approve")
    assert caught.value.code == APPROVER
    assert await desk.world.checkpoints.raw(first.run_id) == before


@pytest.mark.anyio
async def test_one_reject_ends_the_call() -> None:
    """After Alice's allow, Bob's reject answers the call with a rejection; it never runs."""
    desk = Desk()
    first = await desk.suspend()
    (pending,) = first.interruption.pending_decisions
    after = await desk.decide(
        first.run_id, first.run_state.version, decision="approve", actor="alice"
    )
    done = await desk.decide(
        first.run_id,
        after.run_state.version,
        decisions=[{"approval_id": pending.approval_id, "outcome": "reject_once", "reason": "no"}],
        actor="bob",
    )
    assert done.status == "succeeded"
    assert desk.log == []
    final = await desk.status(first.run_id)
    assert [(r.actor, r.outcome) for r in final.audit] == [
        ("alice", "allow_once"),
        ("bob", "reject_once"),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "entry",
    [
        {"outcome": "allow_for_run"},
        {"outcome": "allow_once", "modified_arguments": {"amount": 1}},
    ],
    ids=["for-run", "edited"],
)
async def test_a_call_of_several_approvers_is_allowed_once_as_asked(entry: dict[str, Any]) -> None:
    """``allow_for_run`` and edits are refused on such a call (each approver allows exactly
    the call that runs), before anything is written."""
    desk = Desk()
    first = await desk.suspend()
    (pending,) = first.interruption.pending_decisions
    before = await desk.world.checkpoints.raw(first.run_id)
    with pytest.raises(AgentDecisionError) as caught:
        await desk.decide(
            first.run_id,
            first.run_state.version,
            decisions=[{"approval_id": pending.approval_id, **entry}],
            actor="alice",
        )
    assert caught.value.code == "ERR_PRISM_DECISION_SCOPE"
    assert await desk.world.checkpoints.raw(first.run_id) == before


@pytest.mark.anyio
async def test_the_lifecycle_counts_approvers_too() -> None:
    desk = Desk()
    first = await desk.suspend()
    lifecycle = create_agent_run_lifecycle(
        checkpoints=desk.world.checkpoints,
        resolve_agent=lambda agent_id: (desk.agent(), REVISION),
    )
    ref = {"run_id": first.run_id, "session_id": "s1"}
    one = await lifecycle.resume(
        ref, {"expected_version": first.run_state.version, "decision": "approve", "actor": "a"}
    )
    assert one.status == "suspended"
    two = await lifecycle.resume(
        ref, {"expected_version": one.run_state.version, "decision": "approve", "actor": "b"}
    )
    assert two.status == "succeeded"
    assert desk.log == [250]


@pytest.mark.anyio
async def test_runs_that_need_one_approver_keep_their_bytes() -> None:
    """A suspension of a one-approver tool records none of the new keys."""
    world = World()
    agent = world.agent(
        [tool_turn(("w1", "wire", {"amount": 1})), text_turn("ok")],
        tools=[ToolDefinition("wire", lambda a, c: "ok", needs_approval=True)],
    )
    result = await agent.create_session(id="s1").run("x", run_state=world.run_state())
    record = await world.checkpoints.load("prism.agent-run", result.run_id, ownership=None)
    (decision,) = record.value["interruption"]["pending_decisions"]
    assert not {"approvers", "approved_by", "pending_since", "expires_at"} & set(decision)
    assert "approval_timeout_ms" not in record.value


@pytest.mark.anyio
async def test_a_sub_agents_call_of_two_approvers_is_counted_through_its_parent() -> None:
    """The parent mirrors the child's decision (``approvers``); Alice's allow at the parent
    is recorded in the child and the parent (both still suspended, listing her); Alice again
    is refused with nothing written; Bob's allow runs the child's call once."""
    team = Team(lead_turns=[delegate_turn(), text_turn("done")])
    team.child_config = {
        "tools": [ToolDefinition("lookup", _lookup(team.log), needs_approval=True, approvers=2)]
    }
    lead = team.lead()
    first = await lead.create_session(id="s1").run("x?", run_state=team.world.run_state())
    assert first.status == "suspended"
    (nested,) = first.interruption.pending_decisions
    assert nested.approvers == 2
    ref = {"run_id": first.run_id, "session_id": "s1"}

    async def decide(version: int, actor: str) -> Any:
        return await resume_agent_run(
            team.lead(),
            ref,
            {"expected_version": version, "decision": "approve", "actor": actor},
            **team.world.resume_options(),
        )

    after = await decide(first.run_state.version, "alice")
    assert after.status == "suspended"
    (mirrored,) = after.interruption.pending_decisions
    assert (mirrored.approval_id, mirrored.approved_by) == (nested.approval_id, ("alice",))
    child = await team.child_status(first.run_id)
    assert child.state.status == "suspended"
    (own,) = child.state.interruption.pending_decisions
    assert own.approved_by == ("alice",)
    assert [(r.actor, r.outcome) for r in child.state.audit] == [("alice", "allow_once")]
    parent = await load_agent_run_state(team.world.checkpoints, ref)
    assert [(r.actor, r.outcome) for r in parent.state.audit] == [("alice", "allow_once")]

    before = (
        await team.world.checkpoints.raw(first.run_id),
        await team.world.checkpoints.raw(child_of(first.run_id)),
    )
    with pytest.raises(AgentDecisionError) as caught:
        await decide(after.run_state.version, "alice")
    assert caught.value.code == APPROVER
    after_refusal = (
        await team.world.checkpoints.raw(first.run_id),
        await team.world.checkpoints.raw(child_of(first.run_id)),
    )
    assert after_refusal == before

    done = await decide(after.run_state.version, "bob")
    assert done.status == "succeeded"
    assert [entry[0] for entry in team.log] == ["lookup"]
    child = await team.child_status(first.run_id)
    allows = [(r.actor, r.outcome) for r in child.state.audit if r.outcome.startswith("allow")]
    assert allows == [("alice", "allow_once"), ("bob", "allow_once")]


def _lookup(log: list[Any]) -> Any:
    def lookup(args: dict[str, Any], context: Any) -> Any:
        log.append(("lookup", dict(args), context.run_id))
        return {"found": args.get("q")}

    return lookup
