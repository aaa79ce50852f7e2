"""The kernel's own settlements name who decided and say what happened: a sub-agent call a
``continue`` runs again, the child's calls settled by the parent's operator, and the deny of a
run whose agent definition is no longer served."""

from __future__ import annotations

import pytest

from prism_core import (
    AgentRunStateError,
    RunStateOptions,
    ToolDefinition,
    create_agent,
    create_agent_run_lifecycle,
    create_memory_checkpoint_store,
    create_memory_session_store,
    export_audit,
    list_agent_runs,
    load_agent_run_state,
    resume_agent_run,
)
from tests.core.helpers import text_turn, tool_turn
from tests.ledger_scenarios import WorkerDied, by_history, team

MODEL = {"provider": "mock", "model": "m"}


@pytest.mark.anyio
async def test_a_sub_agent_call_settled_by_a_continue_names_kernel_and_operator() -> None:
    """The parent's call is settled by the kernel (actor ``prism``, channel ``kernel``, a
    reason saying its child run continues); the child's call is settled by the operator who
    continued the parent, on their channel, with their reason."""
    checkpoints, sessions = create_memory_checkpoint_store(), create_memory_session_store()
    die = {"on": True}
    options = RunStateOptions(checkpoints, "r1", checkpoint_policy="every-turn")
    with pytest.raises(WorkerDied):
        await team(sessions, die).create_session(id="s1").run("go", run_state=options)
    (parent,) = (await list_agent_runs(checkpoints, top_level=True)).runs
    die["on"] = False
    status = await load_agent_run_state(checkpoints, {"run_id": parent.run_id})
    assert status is not None
    resume = {"expected_version": status.version, "decision": "continue"}
    with pytest.raises(AgentRunStateError) as refused:
        await resume_agent_run(
            team(sessions, die),
            {"run_id": parent.run_id},
            resume,
            checkpoints=checkpoints,
            definition_revision="r1",
        )
    assert refused.value.code == "ERR_PRISM_TOOL_IN_DOUBT"
    result = await resume_agent_run(
        team(sessions, die),
        {"run_id": parent.run_id},
        {
            **resume,
            "actor": "ops@bank.test",
            "channel": "cli",
            "reason": "the charge never reached the bank",
            "resolutions": [{"tool_call_id": "k1", "outcome": "not_started"}],
        },
        checkpoints=checkpoints,
        definition_revision="r1",
    )
    assert result.status == "succeeded"
    lead = await load_agent_run_state(checkpoints, {"run_id": parent.run_id})
    assert lead is not None
    (settled,) = lead.state.audit
    assert (settled.tool_call_id, settled.outcome, settled.actor, settled.channel) == (
        "p1",
        "not_started",
        "prism",
        "kernel",
    )
    assert settled.reason == "sub-agent call: it runs again, continuing its child run"
    (child,) = (await list_agent_runs(checkpoints, parent_run_id=parent.run_id)).runs
    child_state = await load_agent_run_state(checkpoints, {"run_id": child.run_id})
    assert child_state is not None
    (operator,) = child_state.state.audit
    assert (operator.tool_call_id, operator.outcome, operator.actor, operator.channel) == (
        "k1",
        "not_started",
        "ops@bank.test",
        "cli",
    )
    assert operator.reason == "the charge never reached the bank"
    rows = [row async for row in export_audit(checkpoints)]
    assert sorted(
        (r["run_id"] == child.run_id, r["actor"]) for r in rows if r["kind"] == "decision"
    ) == [
        (False, "prism"),
        (True, "ops@bank.test"),
    ]


@pytest.mark.anyio
async def test_the_deny_of_a_run_whose_agent_is_gone_says_so_and_names_who() -> None:
    """``resolve_agent`` no longer knows the agent: the deny is recorded with the caller's
    actor and channel and, with no reason given, a reason saying the definition is gone."""
    checkpoints, sessions = create_memory_checkpoint_store(), create_memory_session_store()
    agent = create_agent(
        id="bank",
        model=MODEL,
        provider=by_history([tool_turn(("c1", "refund", {"order": "A-3"})), text_turn("ok")]),
        store=sessions,
        tools=[ToolDefinition("refund", lambda a, c: {"ok": True}, needs_approval=True)],
    )
    suspended = await agent.create_session(id="s1").run(
        "refund", run_state=RunStateOptions(checkpoints, "r1")
    )
    assert suspended.status == "suspended"
    assert suspended.run_state is not None
    lifecycle = create_agent_run_lifecycle(
        checkpoints=checkpoints, resolve_agent=lambda agent_id: None
    )
    denied = await lifecycle.resume(
        {"run_id": suspended.run_id},
        {
            "expected_version": suspended.run_state.version,
            "decision": "deny",
            "actor": "ana@bank.test",
            "channel": "console",
        },
    )
    assert denied.status == "denied"
    status = await load_agent_run_state(checkpoints, {"run_id": suspended.run_id})
    assert status is not None
    (record,) = status.state.audit
    assert (record.outcome, record.actor, record.channel, record.tool_call_id) == (
        "deny",
        "ana@bank.test",
        "console",
        "c1",
    )
    assert record.reason == "denied without its agent definition: the agent is no longer served"
