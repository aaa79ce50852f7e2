"""Durable runs and their effect ledger, on any pair of stores that keeps one.

Each scenario runs real agents on ``(checkpoints, sessions)`` and checks the effect records
the API promises (``EffectRecord``'s fields, every status, the filters of ``list_effects``,
``export_audit``). Each writes under an owner of its own, so the stores may be shared; the
backends' test modules call them with their stores (memory, SQLite, PostgreSQL, Redis).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from typing import Any

import pytest

from prism_core import (
    RECONCILE_NOT_STARTED,
    AgentRunStateError,
    ProviderEvent,
    ProviderRequest,
    RunStateOptions,
    ToolDefinition,
    ToolResult,
    create_agent,
    create_mock_provider,
    create_secret_redactor,
    export_audit,
    list_agent_runs,
    list_effects,
    load_agent_run_state,
    resume_agent_run,
)
from prism_core.codec import dumps
from prism_core.durable._receipts import process_actor
from tests.core.helpers import text_turn, tool_turn

__all__ = (
    "SECRET",
    "a_crash_inside_a_tool_is_in_doubt_then_resolved",
    "a_runs_effects_and_every_filter",
    "crash_team",
    "team",
    "reconcile_settles_as_the_kernel",
    "sub_agent_effects_name_their_parent",
)

REVISION = "ledger-1"
#: A value the redactor hides: it must never reach the ledger.
SECRET = "sk-ledger-7f3a9c"


class WorkerDied(BaseException):
    """Stands in for SIGKILL: nothing in the run may catch it."""


def by_history(turns: Sequence[Sequence[ProviderEvent]]) -> Any:
    """A provider whose turn is the number of assistant messages in the request."""

    def events(request: ProviderRequest) -> Sequence[ProviderEvent]:
        index = sum(1 for m in request.messages if m.role == "assistant")
        return turns[min(index, len(turns) - 1)]

    return create_mock_provider(events)


def owner() -> dict[str, str]:
    """An owner no other scenario writes under."""
    return {"tenant_id": f"t-{uuid.uuid4().hex}"}


def result_hash(call_id: str, name: str, value: Any = None, error: Any = None) -> str:
    """sha256 hex of a result's canonical JSON (what ``result_hash`` is, by the API)."""
    return hashlib.sha256(dumps(ToolResult(call_id, name, value, error))).hexdigest()


def args_hash(arguments: dict[str, Any]) -> str:
    """sha256 hex of canonical JSON arguments (the spec's ``arguments_hash``)."""
    return hashlib.sha256(dumps(arguments)).hexdigest()


async def _all(checkpoints: Any, **filters: Any) -> list[Any]:
    found: list[Any] = []
    cursor = None
    while True:
        page = await list_effects(checkpoints, cursor=cursor, **filters)
        found.extend(page.effects)
        cursor = page.cursor
        if cursor is None:
            return found


async def a_runs_effects_and_every_filter(checkpoints: Any, sessions: Any) -> None:
    """Read-only calls leave no record; an idempotent one, an approved one and a failing one
    each leave one with its status, hashes, key, token, executor and approvers; arguments
    are redacted; every filter narrows to the expected calls; the audit export holds the
    approval and the effects."""
    me = owner()
    seen: dict[str, Any] = {}
    session_id = f"s-{uuid.uuid4().hex[:12]}"

    def tool(name: str, **options: Any) -> ToolDefinition:
        def execute(args: dict[str, Any], context: Any) -> Any:
            seen[context.tool_call_id] = (context.idempotency_key, context.fencing_token)
            if name == "fail":
                raise RuntimeError("card declined")
            return {"done": name}

        return ToolDefinition(name, execute, **options)

    script = [
        tool_turn(("c1", "lookup", {"q": "a"}), ("c2", "ensure", {"token": SECRET})),
        tool_turn(("c3", "refund", {"order": "A-3", "amount": 12})),
        tool_turn(("c4", "fail", {"order": "A-4", "amount": 12})),
        text_turn("done"),
    ]
    agent = create_agent(
        id="bank",
        model={"provider": "mock", "model": "m"},
        provider=by_history(script),
        store=sessions,
        redactor=create_secret_redactor([SECRET]),
        tools=[
            tool("lookup", effect="read"),
            tool("ensure", idempotent=True),
            tool("refund", needs_approval=True),
            tool("fail"),
        ],
    )
    options = RunStateOptions(checkpoints, REVISION, checkpoint_policy="every-turn", ownership=me)
    suspended = await agent.create_session(id=session_id).run("go", run_state=options)
    assert suspended.status == "suspended"
    assert suspended.run_state is not None
    assert [e.tool_call_id for e in await _all(checkpoints, ownership=me)] == ["c2"]
    resumed = await resume_agent_run(
        agent,
        {"run_id": suspended.run_id, "session_id": session_id},
        {
            "expected_version": suspended.run_state.version,
            "decision": "approve",
            "actor": "ana@bank.test",
            "channel": "cli",
            "reason": "customer called",
        },
        checkpoints=checkpoints,
        definition_revision=REVISION,
        ownership=me,
    )
    assert resumed.status == "succeeded"
    effects = {e.tool_call_id: e for e in await _all(checkpoints, ownership=me)}
    assert list(effects) == ["c2", "c3", "c4"]
    run_id = suspended.run_id
    for call_id, name, status, arguments, approved in (
        ("c2", "ensure", "completed", {"token": "[REDACTED]"}, ()),
        ("c3", "refund", "completed", {"order": "A-3", "amount": 12}, ("ana@bank.test",)),
        ("c4", "fail", "failed", {"order": "A-4", "amount": 12}, ()),
    ):
        effect = effects[call_id]
        key, token = seen[call_id]
        assert (effect.run_id, effect.session_id, effect.agent_id) == (run_id, session_id, "bank")
        assert (effect.tool_name, effect.status, effect.arguments) == (name, status, arguments)
        assert effect.approved_by == approved
        assert (effect.idempotency_key, effect.fencing_token) == (key, token)
        assert effect.executed_by == process_actor()
        assert effect.parent_run_id is None
        assert effect.ownership == me
        assert effect.finished_at is not None
        assert effect.started_at <= effect.finished_at
    assert effects["c3"].arguments_hash == args_hash({"order": "A-3", "amount": 12})
    assert effects["c3"].result_hash == result_hash("c3", "refund", {"done": "refund"})
    assert effects["c2"].arguments_hash == args_hash({"token": SECRET})
    assert SECRET not in repr(await _all(checkpoints, ownership=me))

    async def calls(**filters: Any) -> list[str]:
        return [e.tool_call_id for e in await _all(checkpoints, ownership=me, **filters)]

    assert await calls(tool_name="refund") == ["c3"]
    assert await calls(actor="ana@bank.test") == ["c3"]
    assert await calls(arguments={"order": "A-3"}) == ["c3"]
    assert await calls(arguments={"amount": 12}) == ["c3", "c4"]
    assert await calls(idempotency_key=seen["c4"][0]) == ["c4"]
    assert await calls(run_id=run_id) == ["c2", "c3", "c4"]
    assert await calls(status="failed") == ["c4"]
    assert await calls(since=effects["c3"].started_at) == ["c3", "c4"]
    assert await calls(until=effects["c3"].started_at) == ["c2"]
    assert await _all(checkpoints, ownership=owner()) == []
    page = await list_effects(checkpoints, ownership=me, limit=2)
    assert [e.tool_call_id for e in page.effects] == ["c2", "c3"]
    assert page.cursor is not None
    rows = [row async for row in export_audit(checkpoints, ownership=me)]
    decisions = [row for row in rows if row["kind"] == "decision"]
    # The decision, then the receipt of the allowed call that ran.
    assert [(d["tool_call_id"], d["outcome"], d["actor"], d["channel"]) for d in decisions] == [
        ("c3", "allow_once", "ana@bank.test", "cli"),
        ("c3", "executed", process_actor(), "worker"),
    ]
    assert decisions[0]["reason"] == "customer called"
    assert [row["tool_call_id"] for row in rows if row["kind"] == "effect"] == ["c2", "c3", "c4"]


def _pay(effects: dict[str, int], *, die: str | None = None, **options: Any) -> ToolDefinition:
    """A payment tool keyed on the idempotency key; with ``die``, the worker dies inside that
    call after its effect."""

    def execute(args: dict[str, Any], context: Any) -> Any:
        effects[context.idempotency_key] = effects.get(context.idempotency_key, 0) + 1
        if context.tool_call_id == die:
            raise WorkerDied()
        return {"paid": args["amount"]}

    return ToolDefinition("pay", execute, **options)


PAY_SCRIPT = [
    tool_turn(("c0", "pay", {"amount": 5}), ("c1", "pay", {"amount": 7})),
    text_turn("paid"),
]


async def _crash(checkpoints: Any, sessions: Any, me: dict[str, str], **tool: Any) -> Any:
    """An every-turn run whose worker dies inside ``c0``; its run id and version."""
    effects: dict[str, int] = {}
    session_id = f"s-{uuid.uuid4().hex[:12]}"
    agent = create_agent(
        id="payer",
        model={"provider": "mock", "model": "m"},
        provider=by_history(PAY_SCRIPT),
        store=sessions,
        tools=[_pay(effects, die="c0", **tool)],
    )
    options = RunStateOptions(checkpoints, REVISION, checkpoint_policy="every-turn", ownership=me)
    with pytest.raises(WorkerDied):
        await agent.create_session(id=session_id).run("pay", run_state=options)
    page = await list_agent_runs(checkpoints, ownership=me)
    (run,) = page.runs
    return run.run_id, session_id, run.version


async def _continue(
    checkpoints: Any, sessions: Any, me: dict[str, str], run: tuple[str, str, int], **extra: Any
) -> Any:
    tool = extra.pop("tool", {})
    agent = create_agent(
        id="payer",
        model={"provider": "mock", "model": "m"},
        provider=by_history(PAY_SCRIPT),
        store=sessions,
        tools=[_pay({}, **tool)],
    )
    run_id, session_id, _ = run
    status = await load_agent_run_state(checkpoints, {"run_id": run_id}, ownership=me)
    assert status is not None
    return await resume_agent_run(
        agent,
        {"run_id": run_id, "session_id": session_id},
        {"expected_version": status.version, "decision": "continue", **extra},
        checkpoints=checkpoints,
        definition_revision=REVISION,
        ownership=me,
    )


async def _statuses(checkpoints: Any, me: dict[str, str]) -> dict[str, str]:
    return {e.tool_call_id: e.status for e in await _all(checkpoints, ownership=me)}


async def a_crash_inside_a_tool_is_in_doubt_then_resolved(checkpoints: Any, sessions: Any) -> None:
    """A crash inside ``c0`` leaves it ``dispatched``; a continue that cannot settle it is
    refused and marks it ``in_doubt``; an operator's resolution reads ``resolved_*``: each
    outcome on a run of its own."""
    for outcome, resolution, final in (
        ("completed", {"result": {"paid": 5}}, "resolved_completed"),
        ("failed", {"reason": "bank says no"}, "resolved_failed"),
        ("not_started", {}, "completed"),
    ):
        me = owner()
        run = await _crash(checkpoints, sessions, me)
        assert await _statuses(checkpoints, me) == {"c0": "dispatched"}
        with pytest.raises(AgentRunStateError) as refused:
            await _continue(checkpoints, sessions, me, run)
        assert refused.value.code == "ERR_PRISM_TOOL_IN_DOUBT"
        assert await _statuses(checkpoints, me) == {"c0": "in_doubt"}
        entry = {"tool_call_id": "c0", "outcome": outcome, **resolution}
        result = await _continue(
            checkpoints, sessions, me, run, resolutions=[entry], actor="ops", channel="cli"
        )
        assert result.status == "succeeded"
        assert await _statuses(checkpoints, me) == {"c0": final, "c1": "completed"}
        found = await _all(checkpoints, ownership=me, status=final, run_id=run[0])
        (c0,) = [effect for effect in found if effect.tool_call_id == "c0"]
        if outcome == "completed":
            assert c0.result_hash == result_hash("c0", "pay", {"paid": 5})


async def reconcile_settles_as_the_kernel(checkpoints: Any, sessions: Any) -> None:
    """A tool's ``reconcile`` settles the in-doubt call after the claim: its record reads
    ``resolved_completed`` (or ``resolved_not_started`` then ``completed`` when it ran again)
    and the decision is the kernel's (actor ``prism``, channel ``kernel``)."""
    for answer, final in (({"paid": 5}, "resolved_completed"), (None, "completed")):
        me = owner()
        run = await _crash(checkpoints, sessions, me)

        def reconcile(call: Any, context: Any, answer: Any = answer) -> Any:
            return answer if answer is not None else RECONCILE_NOT_STARTED

        result = await _continue(checkpoints, sessions, me, run, tool={"reconcile": reconcile})
        assert result.status == "succeeded"
        assert await _statuses(checkpoints, me) == {"c0": final, "c1": "completed"}
        rows = [row async for row in export_audit(checkpoints, ownership=me)]
        kernel = [(r["actor"], r["channel"], r["reason"]) for r in rows if r["kind"] == "decision"]
        assert kernel == [("prism", "kernel", "reconcile")]


async def sub_agent_effects_name_their_parent(checkpoints: Any, sessions: Any) -> None:
    """A sub-agent's calls carry the parent run's id; the listing tells top-level runs from
    sub-agent runs, and ``parent_run_id`` finds a parent's children."""
    me = owner()
    child = create_agent(
        id="researcher",
        model={"provider": "mock", "model": "m"},
        provider=by_history([tool_turn(("k1", "charge", {"amount": 3})), text_turn("charged")]),
        tools=[ToolDefinition("charge", lambda args, context: {"ok": True})],
    )
    lead = create_agent(
        id="lead",
        model={"provider": "mock", "model": "m"},
        provider=by_history([tool_turn(("p1", "researcher", {"input": "go"})), text_turn("ok")]),
        store=sessions,
        tools=[child.as_tool()],
    )
    options = RunStateOptions(checkpoints, REVISION, checkpoint_policy="every-turn", ownership=me)
    result = await lead.create_session(id=f"s-{uuid.uuid4().hex[:12]}").run("go", run_state=options)
    assert result.status == "succeeded"
    effects = {e.tool_call_id: e for e in await _all(checkpoints, ownership=me)}
    assert set(effects) == {"p1", "k1"}
    assert effects["p1"].parent_run_id is None
    assert effects["p1"].run_id == result.run_id
    assert effects["k1"].parent_run_id == result.run_id
    assert effects["k1"].run_id != result.run_id
    top = await list_agent_runs(checkpoints, ownership=me, top_level=True)
    assert [r.run_id for r in top.runs] == [result.run_id]
    children = await list_agent_runs(checkpoints, ownership=me, parent_run_id=result.run_id)
    assert [r.run_id for r in children.runs] == [effects["k1"].run_id]
    assert children.runs[0].parent_run_id == result.run_id
    nested = await list_agent_runs(checkpoints, ownership=me, top_level=False)
    assert [r.run_id for r in nested.runs] == [effects["k1"].run_id]


def team(sessions: Any, die: dict[str, bool]) -> Any:
    """A lead whose ``researcher`` sub-agent charges once (dying inside while ``die``)."""

    def charge(args: dict[str, Any], context: Any) -> Any:
        if die["on"]:
            raise WorkerDied()
        return {"ok": True}

    child = create_agent(
        id="researcher",
        model={"provider": "mock", "model": "m"},
        provider=by_history([tool_turn(("k1", "charge", {"amount": 3})), text_turn("charged")]),
        tools=[ToolDefinition("charge", charge)],
    )
    return create_agent(
        id="lead",
        model={"provider": "mock", "model": "m"},
        provider=by_history([tool_turn(("p1", "researcher", {"input": "go"})), text_turn("ok")]),
        store=sessions,
        tools=[child.as_tool()],
    )


async def crash_team(
    checkpoints: Any, sessions: Any, me: dict[str, str]
) -> tuple[Any, dict[str, str], int]:
    """A lead run whose worker died inside its sub-agent's ``charge`` (``k1``): a lead agent
    that charges without dying, the lead run's ref and its version."""
    die = {"on": True}
    session_id = f"s-{uuid.uuid4().hex[:12]}"
    options = RunStateOptions(checkpoints, REVISION, checkpoint_policy="every-turn", ownership=me)
    with pytest.raises(WorkerDied):
        await team(sessions, die).create_session(id=session_id).run("go", run_state=options)
    (lead,) = (await list_agent_runs(checkpoints, ownership=me, top_level=True)).runs
    die["on"] = False
    return team(sessions, die), {"run_id": lead.run_id, "session_id": session_id}, lead.version
