"""The decision audit: every decision that settles a pending call is recorded, with who decided
(``actor``), why, on which call and arguments, when and at which version; the records ride
every later checkpoint, survive a restart and are redacted like every reason."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentDecisionError,
    AgentRunStateError,
    DecisionRecord,
    ToolDefinition,
    create_agent_run_lifecycle,
    create_secret_redactor,
    load_agent_run_state,
    resume_agent_run,
)
from prism_core.durable import RECEIPT_OUTCOMES
from prism_core.durable._state import arguments_hash

from ..durable_support import REVISION, World
from ..helpers import text_turn, tool_turn
from .test_in_doubt import Host, continue_run, crash, idempotent_in_doubt

SCRIPT = [
    tool_turn(("c1", "deploy", {"env": "prod"}), ("c2", "deploy", {"env": "staging"})),
    text_turn("done"),
]
SECRET = "sk-live-0123456789"


def deploy(log: list[Any]) -> ToolDefinition:
    """A ``deploy`` tool that logs its arguments."""

    def execute(args: dict[str, Any], context: Any) -> dict[str, Any]:
        log.append(dict(args))
        return {"deployed": args["env"]}

    return ToolDefinition(
        "deploy",
        execute,
        parameters={"type": "object", "properties": {"env": {"type": "string"}}},
        needs_approval=True,
    )


async def suspended(world: World, log: list[Any], **config: Any) -> tuple[str, int]:
    """A durable run suspended before its two deploy calls; its run id and version."""
    agent = world.agent(SCRIPT, tools=[deploy(log)], **config)
    result = await agent.create_session(id="s1").run("ship it", run_state=world.run_state())
    assert result.status == "suspended"
    assert result.run_state is not None
    return result.run_id, result.run_state.version


def decided(audit: Any) -> list[Any]:
    """The decision records of an audit, without the receipts of the calls that ran."""
    return [r for r in audit if r.outcome not in RECEIPT_OUTCOMES]


def approvals(status: Any) -> dict[str, str]:
    """The pending approval id of each tool call."""
    return {d.tool_call_id: d.approval_id for d in status.state.interruption.pending_decisions}


async def resume(
    world: World, log: list[Any], run_id: str, resume_input: Any, **config: Any
) -> Any:
    agent = world.agent(SCRIPT, tools=[deploy(log)], **config)
    return await resume_agent_run(
        agent, {"run_id": run_id, "session_id": "s1"}, resume_input, **world.resume_options()
    )


@pytest.mark.anyio
async def test_approve_records_one_entry_per_call_and_survives_restart() -> None:
    """An approve with an actor and a reason audits both calls; a later process reads them
    back from the finished run's checkpoint."""
    world, log = World(), []
    run_id, version = await suspended(world, log)
    before = await load_agent_run_state(world.checkpoints, {"run_id": run_id})
    assert before is not None
    assert before.audit == ()
    ids = approvals(before)
    result = await resume(
        world,
        log,
        run_id,
        {"expected_version": version, "decision": "approve", "actor": "alice", "reason": "ok"},
    )
    assert result.status == "succeeded"
    assert log == [{"env": "prod"}, {"env": "staging"}]
    status = await load_agent_run_state(world.checkpoints, {"run_id": run_id})
    assert status is not None
    assert status.state.status == "succeeded"
    assert status.version > version
    audit = decided(status.audit)
    assert [type(r) for r in audit] == [DecisionRecord, DecisionRecord]
    # Each allowed call that ran has its receipt, after the decisions, on channel "worker".
    receipts = [r for r in status.audit if r not in audit]
    assert [(r.tool_call_id, r.outcome, r.channel) for r in receipts] == [
        ("c1", "executed", "worker"),
        ("c2", "executed", "worker"),
    ]
    assert [(r.tool_call_id, r.approval_id, r.tool_name, r.outcome) for r in audit] == [
        ("c1", ids["c1"], "deploy", "allow_once"),
        ("c2", ids["c2"], "deploy", "allow_once"),
    ]
    assert {(r.actor, r.reason, r.version) for r in audit} == {("alice", "ok", version)}
    assert audit[0].arguments_hash == arguments_hash({"env": "prod"})
    assert all(isinstance(r.decided_at, float) and r.decided_at > 1.7e9 for r in audit)
    # The lifecycle's status reads the same audit.
    lifecycle = create_agent_run_lifecycle(
        checkpoints=world.checkpoints, resolve_agent=lambda agent_id: (None, REVISION)
    )
    found = await lifecycle.status({"run_id": run_id})
    assert found is not None
    assert found.audit == status.audit


@pytest.mark.anyio
async def test_deny_with_reason_is_audited_as_deny() -> None:
    """A denied run records ``deny`` for each pending call, with the actor and reason."""
    world, log = World(), []
    run_id, version = await suspended(world, log)
    result = await resume(
        world,
        log,
        run_id,
        {"expected_version": version, "decision": "deny", "actor": "bob", "reason": "not today"},
    )
    assert result.status == "denied"
    assert log == []
    status = await load_agent_run_state(world.checkpoints, {"run_id": run_id})
    assert status is not None
    assert status.state.status == "denied"
    assert [(r.tool_call_id, r.outcome, r.actor, r.reason) for r in status.audit] == [
        ("c1", "deny", "bob", "not today"),
        ("c2", "deny", "bob", "not today"),
    ]


@pytest.mark.anyio
async def test_batch_entries_edits_and_partial_batches_are_each_audited() -> None:
    """A partial batch records the entry it decided and re-suspends; the next batch adds its
    own entries (an edit recorded with the edited arguments' hash, a sticky outcome)."""
    world, log = World(), []
    run_id, version = await suspended(world, log)
    status = await load_agent_run_state(world.checkpoints, {"run_id": run_id})
    assert status is not None
    ids = approvals(status)
    first = await resume(
        world,
        log,
        run_id,
        {
            "expected_version": version,
            "decisions": [
                {"approval_id": ids["c1"], "outcome": "reject_once", "reason": "wrong env"}
            ],
            "actor": "carol",
        },
    )
    assert first.status == "suspended"
    after_first = await load_agent_run_state(world.checkpoints, {"run_id": run_id})
    assert after_first is not None
    assert [
        (r.tool_call_id, r.outcome, r.actor, r.reason, r.version) for r in after_first.audit
    ] == [("c1", "reject_once", "carol", "wrong env", version)]
    second = await resume(
        world,
        log,
        run_id,
        {
            "expected_version": after_first.version,
            "decisions": [
                {
                    "approval_id": ids["c2"],
                    "outcome": "allow_for_run",
                    "modified_arguments": {"env": "canary"},
                }
            ],
            "actor": "dave",
            "reason": "canary first",
        },
    )
    assert second.status == "succeeded"
    assert log == [{"env": "canary"}]
    final = await load_agent_run_state(world.checkpoints, {"run_id": run_id})
    assert final is not None
    rows = [(r.tool_call_id, r.outcome, r.actor, r.reason, r.version) for r in decided(final.audit)]
    assert rows == [
        ("c1", "reject_once", "carol", "wrong env", version),
        ("c2", "allow_for_run", "dave", "canary first", after_first.version),
    ]
    assert final.audit[1].arguments_hash == arguments_hash({"env": "canary"})
    # The receipt of the edited call carries the arguments it ran with.
    assert final.audit[2].outcome == "executed"
    assert final.audit[2].arguments_hash == arguments_hash({"env": "canary"})


@pytest.mark.anyio
async def test_in_doubt_resolutions_are_audited_with_the_actor() -> None:
    """A continue's operator resolution records the actor, its channel (``host`` when the
    input names none) and the failure's reason; the call the kernel cleared itself
    (idempotent) names its source, actor ``prism`` and channel ``kernel`` (API.md, fourth
    round: "The kernel's own settlements ... are recorded with actor="prism" and
    channel="kernel")."""
    world, host = World(), Host()
    run_id, version = await crash(world, host)
    result = await continue_run(
        world,
        host,
        run_id,
        version,
        resolutions=[{"tool_call_id": "c0", "outcome": "failed", "reason": "bank said no"}],
        actor="erin",
    )
    assert result.status == "succeeded"
    status = await load_agent_run_state(world.checkpoints, {"run_id": run_id})
    assert status is not None
    assert [
        (
            r.approval_id,
            r.tool_call_id,
            r.tool_name,
            r.outcome,
            r.actor,
            r.channel,
            r.reason,
            r.version,
        )
        for r in status.audit
    ] == [(None, "c0", "pay", "failed", "erin", "host", "bank said no", version)]

    world, host = World(), Host()
    run_id, version = await idempotent_in_doubt(world, host)
    await continue_run(world, host, run_id, version, pay=host.pay(idempotent=True), actor="x")
    status = await load_agent_run_state(world.checkpoints, {"run_id": run_id})
    assert status is not None
    assert [(r.tool_call_id, r.outcome, r.actor, r.channel, r.reason) for r in status.audit] == [
        ("c0", "not_started", "prism", "kernel", "idempotent")
    ]


@pytest.mark.anyio
async def test_actor_and_reason_are_redacted_in_the_stored_audit() -> None:
    """A secret in the actor or the reason never reaches the store."""
    world, log = World(), []
    redactor = create_secret_redactor([SECRET])
    run_id, version = await suspended(world, log, redactor=redactor)
    await resume(
        world,
        log,
        run_id,
        {
            "expected_version": version,
            "decision": "approve",
            "actor": f"ci {SECRET}",
            "reason": f"token {SECRET} rotated",
        },
        redactor=redactor,
    )
    record = await world.checkpoints.inner.load(AGENT_RUN_NAMESPACE, run_id)
    assert SECRET not in repr(record.value)
    status = await load_agent_run_state(world.checkpoints, {"run_id": run_id})
    assert status is not None
    assert len(decided(status.audit)) == 2
    for row in decided(status.audit):
        assert row.actor is not None
        assert row.reason is not None
        assert SECRET not in row.actor
        assert row.actor.startswith("ci ")
        assert SECRET not in row.reason
        assert row.reason.startswith("token ")


@pytest.mark.anyio
@pytest.mark.parametrize("actor", ["a" * 257, "é" * 129, 7])
async def test_an_oversized_or_wrong_actor_is_refused_before_any_write(actor: Any) -> None:
    """An actor over 256 UTF-8 bytes (or not a string) is refused with a stable code and
    nothing is loaded, written or run."""
    world, log = World(), []
    run_id, version = await suspended(world, log)
    before = await world.checkpoints.raw(run_id)
    calls = world.checkpoints.calls
    with pytest.raises(AgentDecisionError) as caught:
        await resume(
            world, log, run_id, {"expected_version": version, "decision": "approve", "actor": actor}
        )
    expected = "ERR_PRISM_DECISION_INVALID" if actor == 7 else "ERR_PRISM_DECISION_LIMIT"
    assert caught.value.code == expected
    assert world.checkpoints.calls == calls
    assert await world.checkpoints.raw(run_id) == before
    assert log == []


@pytest.mark.anyio
async def test_an_actor_of_exactly_256_bytes_is_kept() -> None:
    """The bound is inclusive."""
    world, log = World(), []
    run_id, version = await suspended(world, log)
    actor = "é" * 128
    await resume(
        world, log, run_id, {"expected_version": version, "decision": "deny", "actor": actor}
    )
    status = await load_agent_run_state(world.checkpoints, {"run_id": run_id})
    assert status is not None
    assert {r.actor for r in status.audit} == {actor}


@pytest.mark.anyio
async def test_an_older_checkpoint_without_audit_reads_as_empty() -> None:
    """A record written before the audit (no ``audit`` key) decodes to ``()`` and its next
    decision starts the audit."""
    world, log = World(), []
    run_id, version = await suspended(world, log)
    record = await world.checkpoints.inner.load(AGENT_RUN_NAMESPACE, run_id)
    assert "audit" not in record.value
    value = {k: v for k, v in record.value.items() if k != "fingerprint_parts"}
    await world.checkpoints.inner.save(
        AGENT_RUN_NAMESPACE, run_id, value, version=version + 1, expected_version=version
    )
    status = await load_agent_run_state(world.checkpoints, {"run_id": run_id})
    assert status is not None
    assert status.audit == ()
    await resume(
        world, log, run_id, {"expected_version": version + 1, "decision": "approve", "actor": "z"}
    )
    status = await load_agent_run_state(world.checkpoints, {"run_id": run_id})
    assert status is not None
    assert [r.actor for r in decided(status.audit)] == ["z", "z"]


@pytest.mark.anyio
@pytest.mark.parametrize("decision", ["approve", "deny"])
async def test_a_nested_decision_is_audited_in_the_parent_and_the_child(decision: str) -> None:
    """Deciding a child's decision at the parent records it in both runs' audits, with the
    parent's actor and reason."""
    from ..subagent_support import child_of
    from .test_subagent_decisions import asking_team, ref, suspend

    team = asking_team()
    result = await suspend(team)
    [nested] = result.interruption.pending_decisions
    resumed = await resume_agent_run(
        team.lead(),
        ref(result),
        {
            "expected_version": result.run_state.version,
            "decision": decision,
            "actor": "lead-operator",
            "reason": "checked",
        },
        checkpoints=team.world.checkpoints,
        definition_revision=REVISION,
    )
    outcome = "allow_once" if decision == "approve" else "deny"
    assert resumed.status == ("succeeded" if decision == "approve" else "denied")
    parent = await load_agent_run_state(team.world.checkpoints, ref(result))
    assert parent is not None
    assert [(r.approval_id, r.outcome, r.actor, r.reason) for r in decided(parent.audit)] == [
        (nested.approval_id, outcome, "lead-operator", "checked")
    ]
    child = await team.child_status(result.run_id)
    assert child is not None
    assert child.state.run_id == child_of(result.run_id)
    assert [(r.outcome, r.actor, r.reason) for r in decided(child.audit)] == [
        (outcome, "lead-operator", "checked")
    ]


@pytest.mark.anyio
async def test_a_deny_without_definition_denies_the_child_first() -> None:
    """With no definition served, a parent's deny still denies its suspended child, and
    both are audited."""
    from .test_subagent_decisions import asking_team, ref, suspend

    team = asking_team()
    result = await suspend(team)
    lifecycle = create_agent_run_lifecycle(
        checkpoints=team.world.checkpoints, resolve_agent=lambda agent_id: None
    )
    denied = await lifecycle.resume(
        ref(result),
        {"expected_version": result.run_state.version, "decision": "deny", "actor": "ops"},
    )
    assert denied.status == "denied"
    assert team.log == []
    child = await team.child_status(result.run_id)
    assert child is not None
    assert child.state.status == "denied"
    assert [(r.outcome, r.actor) for r in child.audit] == [("deny", "ops")]
    parent = await load_agent_run_state(team.world.checkpoints, ref(result))
    assert parent is not None
    assert [(r.outcome, r.actor) for r in parent.audit] == [("deny", "ops")]


@pytest.mark.anyio
async def test_a_run_that_decides_more_than_it_keeps_counts_the_older_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The checkpoints keep the newest decision records; the older ones are counted in
    ``audit_omitted``, never dropped without a trace, and a negative count is malformed."""
    from prism_core.durable import _run
    from prism_core.durable._state import state_to_json
    from prism_core.durable._state_parse import parse_state

    monkeypatch.setattr(_run, "MAX_AUDIT_RECORDS", 1)
    world, log = World(), []
    run_id, version = await suspended(world, log)
    result = await resume(
        world, log, run_id, {"expected_version": version, "decision": "approve", "actor": "al"}
    )
    assert result.status == "succeeded"
    status = await load_agent_run_state(world.checkpoints, {"run_id": run_id})
    assert status is not None
    # Two decisions and two receipts: the newest record is kept, three are counted.
    assert [(r.tool_call_id, r.outcome) for r in status.audit] == [("c2", "executed")]
    assert status.audit_omitted == 3
    data = state_to_json(status.state)
    assert data["audit_omitted"] == 3
    with pytest.raises(AgentRunStateError, match="audit_omitted"):
        parse_state({**data, "audit_omitted": -1}, max_bytes=1 << 20)
