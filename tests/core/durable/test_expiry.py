"""``approval_timeout_ms`` and ``expire_agent_runs``: a decision pending past its deadline is
audited as ``expired`` (actor ``prism``, channel ``kernel``) and treated as ``reject_once``
with the reason ``"approval expired after N s"``; the run is left recoverable and the next
``continue`` takes the rejection to the model."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from prism_core import (
    AGENT_RUN_NAMESPACE,
    ToolDefinition,
    expire_agent_runs,
    list_agent_runs,
    load_agent_run_state,
    resume_agent_run,
    run_worker,
)
from prism_core.durable._work import WORK_NAMESPACE

from ..durable_support import REVISION, CountingStore, World
from ..helpers import text_turn, tool_turn
from ..subagent_support import Team, child_of, delegate_turn

FOUR_HOURS_MS = 4 * 3600 * 1000


def _refund(log: list[Any], **kw: Any) -> ToolDefinition:
    def refund(args: dict[str, Any], context: Any) -> str:
        log.append(args["amount"])
        return "refunded"

    return ToolDefinition("refund", refund, needs_approval=True, **kw)


class Desk:
    """A refund agent on one world's stores; ``seen`` holds each provider request's last tool
    result (what the model was told)."""

    def __init__(self, world: World | None = None, **tool: Any) -> None:
        self.world = world or World()
        self.log: list[Any] = []
        self.tool = tool

    def agent(self, *extra: ToolDefinition) -> Any:
        return self.world.agent(
            [tool_turn(("r1", "refund", {"amount": 900})), text_turn("done")],
            id="desk",
            tools=[_refund(self.log, **self.tool), *extra],
        )

    async def suspend(self, **options: Any) -> Any:
        result = (
            await self.agent()
            .create_session(id="s1")
            .run("refund", run_state=self.world.run_state(**options))
        )
        assert result.status == "suspended"
        return result

    async def status(self, run_id: str) -> Any:
        found = await load_agent_run_state(self.world.checkpoints, {"run_id": run_id})
        assert found is not None
        return found

    async def continue_(self, run_id: str) -> Any:
        found = await self.status(run_id)
        return await resume_agent_run(
            self.agent(),
            {"run_id": run_id, "session_id": "s1"},
            {"expected_version": found.version, "decision": "continue"},
            **self.world.resume_options(),
        )


@pytest.mark.anyio
async def test_an_expired_decision_reaches_the_model_as_a_rejection() -> None:
    """Before its deadline nothing expires (nothing written); at it, the run is written once:
    ``running`` with no lease (listed as recoverable), the call rejected, the audit naming
    ``expired`` by ``prism`` on ``kernel``; the continue answers the call with the rejection
    (the tool never runs) and the run succeeds."""
    desk = Desk()
    result = await desk.suspend(approval_timeout_ms=2000)
    (pending,) = result.interruption.pending_decisions
    assert pending.expires_at is not None
    assert pending.pending_since is not None
    assert pending.expires_at - pending.pending_since == pytest.approx(2.0)
    before = await desk.world.checkpoints.raw(result.run_id)
    assert await expire_agent_runs(desk.world.checkpoints, now=pending.expires_at - 0.5) == 0
    assert await desk.world.checkpoints.raw(result.run_id) == before

    assert await expire_agent_runs(desk.world.checkpoints, now=pending.expires_at) == 1
    stored = await desk.status(result.run_id)
    assert stored.version == result.run_state.version + 1
    assert stored.state.status == "running"
    assert stored.state.interruption is None
    assert stored.state.lease_expires_at is None
    (call,) = stored.state.pending_calls
    assert (call.status, call.reason) == ("rejected", "approval expired after 2 s")
    (record,) = stored.audit
    assert (record.outcome, record.actor, record.channel, record.reason) == (
        "expired",
        "prism",
        "kernel",
        "approval expired after 2 s",
    )
    assert (record.approval_id, record.tool_call_id, record.tool_name) == (
        pending.approval_id,
        "r1",
        "refund",
    )
    page = await list_agent_runs(desk.world.checkpoints, recoverable=True)
    assert [run.run_id for run in page.runs] == [result.run_id]
    # Expiring again finds nothing more to do.
    assert await expire_agent_runs(desk.world.checkpoints, now=pending.expires_at + 60) == 0

    done = await desk.continue_(result.run_id)
    assert done.status == "succeeded"
    assert desk.log == []
    path = await desk.world.sessions.read_branch_path("s1", done.leaf_id)
    results = [
        block
        for entry in path
        if entry.message is not None and entry.message.role == "tool"
        for block in entry.message.content
    ]
    (answer,) = results
    assert answer.error is not None
    assert answer.error.code == "approval_rejected"
    assert answer.error.message == "approval expired after 2 s"


@pytest.mark.anyio
async def test_the_tools_timeout_wins_over_the_runs() -> None:
    desk = Desk(approval_timeout_ms=FOUR_HOURS_MS)
    result = await desk.suspend(approval_timeout_ms=1000)
    (pending,) = result.interruption.pending_decisions
    assert pending.expires_at - pending.pending_since == pytest.approx(14400.0)
    assert await expire_agent_runs(desk.world.checkpoints, now=pending.pending_since + 2) == 0
    assert await expire_agent_runs(desk.world.checkpoints, now=pending.expires_at) == 1
    stored = await desk.status(result.run_id)
    assert stored.audit[-1].reason == "approval expired after 14400 s"


@pytest.mark.anyio
async def test_runs_without_a_timeout_never_expire() -> None:
    desk = Desk()
    result = await desk.suspend()
    (pending,) = result.interruption.pending_decisions
    assert pending.expires_at is None
    assert await expire_agent_runs(desk.world.checkpoints, now=10**12) == 0


class _DecidingStore(CountingStore):
    """A store on which a decision lands right after the expiry read the run: the expiry's
    write then carries a stale version."""

    def __init__(self) -> None:
        super().__init__()
        self.decide: Any = None

    async def load(self, *args: Any, **kw: Any) -> Any:
        record = await super().load(*args, **kw)
        decide, self.decide = self.decide, None
        if decide is not None:
            await decide()
        return record


@pytest.mark.anyio
async def test_a_decision_racing_the_expiry_wins_by_version() -> None:
    """The expiry read the run, then an approval landed: the expiry's compare-and-swap loses,
    nothing of it is written, and the approved call ran once."""
    world = World()
    world.checkpoints = _DecidingStore()
    desk = Desk(world)
    result = await desk.suspend(approval_timeout_ms=1000)
    (pending,) = result.interruption.pending_decisions

    async def approve() -> None:
        await resume_agent_run(
            desk.agent(),
            {"run_id": result.run_id, "session_id": "s1"},
            {"expected_version": result.run_state.version, "decision": "approve", "actor": "a"},
            **desk.world.resume_options(),
        )

    world.checkpoints.decide = approve
    assert await expire_agent_runs(world.checkpoints, now=pending.expires_at + 1) == 0
    stored = await desk.status(result.run_id)
    assert stored.state.status == "succeeded"
    assert desk.log == [900]
    assert "expired" not in [r.outcome for r in stored.audit]


@pytest.mark.anyio
async def test_only_the_due_decision_expires_the_other_still_waits() -> None:
    """Two held calls, one with a short timeout: expiring leaves the run suspended on the
    other (its call still pending); approving it then runs it, and the expired one reaches
    the model as a rejection."""
    world = World()
    log: list[Any] = []
    turns = [
        tool_turn(("r1", "refund", {"amount": 900}), ("v1", "void", {"n": 1})),
        text_turn("done"),
    ]
    tools = [
        _refund(log, approval_timeout_ms=1000),
        ToolDefinition("void", lambda a, c: log.append("void") or "voided", needs_approval=True),
    ]
    agent = world.agent(turns, id="desk", tools=tools)
    result = await agent.create_session(id="s1").run("x", run_state=world.run_state())
    refund, void = result.interruption.pending_decisions
    assert void.expires_at is None
    assert await expire_agent_runs(world.checkpoints, now=refund.expires_at) == 1
    stored = await load_agent_run_state(world.checkpoints, {"run_id": result.run_id})
    assert stored.state.status == "suspended"
    assert [d.approval_id for d in stored.state.interruption.pending_decisions] == [
        void.approval_id
    ]
    assert {c.tool_call_id: c.status for c in stored.state.pending_calls} == {
        "r1": "rejected",
        "v1": "pending",
    }
    done = await resume_agent_run(
        world.agent(turns, id="desk", tools=tools),
        {"run_id": result.run_id, "session_id": "s1"},
        {"expected_version": stored.version, "decision": "approve", "actor": "a"},
        **world.resume_options(),
    )
    assert done.status == "succeeded"
    assert log == ["void"]


@pytest.mark.anyio
async def test_a_partly_approved_call_that_expires_is_rejected() -> None:
    desk = Desk(approvers=2)
    result = await desk.suspend(approval_timeout_ms=1000)
    (pending,) = result.interruption.pending_decisions
    after = await resume_agent_run(
        desk.agent(),
        {"run_id": result.run_id, "session_id": "s1"},
        {"expected_version": result.run_state.version, "decision": "approve", "actor": "ann"},
        **desk.world.resume_options(),
    )
    assert after.status == "suspended"
    assert await expire_agent_runs(desk.world.checkpoints, now=pending.expires_at) == 1
    done = await desk.continue_(result.run_id)
    assert done.status == "succeeded"
    assert desk.log == []
    stored = await desk.status(result.run_id)
    assert [(r.actor, r.outcome) for r in stored.audit] == [
        ("ann", "allow_once"),
        ("prism", "expired"),
    ]


@pytest.mark.anyio
async def test_a_sub_agents_expired_decision_is_expired_in_the_child_then_the_parent() -> None:
    """The child (suspended under its parent) is never expired on its own; through the
    parent, the child's decision expires in the child's checkpoint and the parent's call is
    cleared to run; the parent's continue continues the child, whose model gets the
    rejection, and both finish without the child's tool running."""
    team = Team(lead_turns=[delegate_turn(), text_turn("done")])
    team.child_config = {
        "tools": [
            ToolDefinition("lookup", lambda a, c: team.log.append("lookup"), needs_approval=True)
        ]
    }
    first = (
        await team.lead()
        .create_session(id="s1")
        .run("x?", run_state=team.world.run_state(approval_timeout_ms=1000))
    )
    assert first.status == "suspended"
    (nested,) = first.interruption.pending_decisions
    assert nested.expires_at is not None
    assert await expire_agent_runs(team.world.checkpoints, now=nested.expires_at) == 1
    child = await team.child_status(first.run_id)
    assert child.state.status == "running"
    assert [r.outcome for r in child.state.audit] == ["expired"]
    parent = await load_agent_run_state(team.world.checkpoints, {"run_id": first.run_id})
    assert parent.state.status == "running"
    (call,) = parent.state.pending_calls
    assert (call.status, call.child_run_id) == ("approved", child_of(first.run_id))
    assert [(r.outcome, r.approval_id) for r in parent.state.audit] == [
        ("expired", nested.approval_id)
    ]
    done = await resume_agent_run(
        team.lead(),
        {"run_id": first.run_id, "session_id": "s1"},
        {"expected_version": parent.version, "decision": "continue"},
        **team.world.resume_options(),
    )
    assert done.status == "succeeded"
    assert team.log == []
    child = await team.child_status(first.run_id)
    assert child.state.status == "succeeded"


@pytest.mark.anyio
async def test_foreign_and_unreadable_records_are_left_alone() -> None:
    """Only runs visible to ``ownership`` are expired; a record that is not a run state is
    skipped."""
    desk = Desk()
    result = await desk.suspend(approval_timeout_ms=1000, ownership={"tenant": "t1"})
    (pending,) = result.interruption.pending_decisions
    await desk.world.checkpoints.save(AGENT_RUN_NAMESPACE, "junk", {"x": 1}, version=1)
    assert await expire_agent_runs(desk.world.checkpoints, now=pending.expires_at) == 0
    assert (
        await expire_agent_runs(
            desk.world.checkpoints, now=pending.expires_at, ownership={"tenant": "t1"}
        )
        == 1
    )


@pytest.mark.anyio
async def test_a_worker_takes_an_expired_run_of_any_owner_to_the_model() -> None:
    """An owned run whose decision expired is left with a work mark, as a recorded decision
    is: a ``run_worker`` (which lists no tenant's runs) finds it and the model gets the
    rejection."""
    desk = Desk()
    owner = {"tenant": "t1"}
    result = await desk.suspend(approval_timeout_ms=1000, ownership=owner)
    (pending,) = result.interruption.pending_decisions
    assert (
        await expire_agent_runs(desk.world.checkpoints, now=pending.expires_at, ownership=owner)
        == 1
    )
    marks = await desk.world.checkpoints.list(WORK_NAMESPACE)
    assert [r.value["run_id"] for r in marks.records] == [result.run_id]
    assert marks.records[0].value["ownership"] == owner
    stop = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(
            lambda: run_worker(
                checkpoints=desk.world.checkpoints,
                sessions=desk.world.sessions,
                resolve_agent=lambda agent_id: (desk.agent(), REVISION),
                poll_ms=20,
                stop=stop,
            )
        )
        try:
            with anyio.fail_after(60):
                while True:
                    found = await load_agent_run_state(
                        desk.world.checkpoints, {"run_id": result.run_id}, ownership=owner
                    )
                    if found is not None and found.state.status == "succeeded":
                        break
                    await anyio.sleep(0.02)
        finally:
            stop.set()
    assert desk.log == []
    assert [r.outcome for r in found.audit] == ["expired"]
