"""Operator actions on any pair of stores that keeps an effect ledger: a resume previewed
(nothing written), finished runs purged, a session erased. Each returns what the backend's
own test then checks in its raw storage (files, tables, keys)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import pytest

from prism_core import (
    AgentRunStateError,
    RunStateOptions,
    SessionActiveError,
    ToolDefinition,
    create_agent,
    erase_session,
    export_audit,
    list_agent_runs,
    list_effects,
    preview_resume,
    purge_agent_runs,
    resume_agent_run,
)
from prism_core.durable._receipts import process_actor
from tests.core.helpers import text_turn, tool_turn
from tests.ledger_scenarios import PAY_SCRIPT, WorkerDied, _crash, by_history, crash_team, owner

__all__ = (
    "ERASED_ARGUMENT",
    "ERASED_REASON",
    "a_preview_writes_nothing",
    "a_session_is_erased",
    "finished_runs_are_purged",
)

REVISION = "ledger-1"
#: Bytes that must not survive an erasure anywhere in a store's storage (this process's own,
#: so rows other tests leave in a shared database cannot hold them).
ERASED_ARGUMENT = f"IBAN-DE44-5001-0517-{uuid.uuid4().hex[:12]}"
ERASED_REASON = f"Mrs Jakobsdottir asked on the phone ({uuid.uuid4().hex[:8]})"


@attrs.define
class Suspended:
    """A run suspended for approval of ``refund`` (call ``c1``)."""

    agent: Any
    run_id: str
    session_id: str
    version: int
    owner: dict[str, str]


async def suspend(checkpoints: Any, sessions: Any, *, arguments: Any = None) -> Suspended:
    """A run of agent ``bank`` suspended before ``refund`` (it needs an approval)."""
    me = owner()
    session_id = f"s-{uuid.uuid4().hex[:12]}"
    args = {"order": "A-3", "account": "DE00-1234"} if arguments is None else arguments
    agent = create_agent(
        id="bank",
        model={"provider": "mock", "model": "m"},
        provider=by_history([tool_turn(("c1", "refund", args)), text_turn("refunded")]),
        store=sessions,
        tools=[ToolDefinition("refund", lambda a, c: {"ok": True}, needs_approval=True)],
    )
    options = RunStateOptions(checkpoints, REVISION, checkpoint_policy="every-turn", ownership=me)
    result = await agent.create_session(id=session_id).run("refund", run_state=options)
    assert result.status == "suspended"
    assert result.run_state is not None
    return Suspended(agent, result.run_id, session_id, result.run_state.version, me)


async def a_preview_writes_nothing(checkpoints: Any, sessions: Any, snapshot: Any) -> None:
    """Previews of an approve, a deny, a stale resume and in-doubt continues report what the
    resume would do, and ``snapshot()`` (the backend's raw storage) is unchanged by each."""
    run = await suspend(checkpoints, sessions)
    ref = {"run_id": run.run_id, "session_id": run.session_id}
    options = {"checkpoints": checkpoints, "definition_revision": REVISION, "ownership": run.owner}
    before = await snapshot()
    approve = await preview_resume(
        run.agent, ref, {"expected_version": run.version, "decision": "approve"}, **options
    )
    assert (approve.would_dispatch, approve.would_repeat, approve.in_doubt) == (("c1",), (), ())
    assert approve.refusal is None
    deny = await preview_resume(
        run.agent, ref, {"expected_version": run.version, "decision": "deny"}, **options
    )
    assert (deny.would_dispatch, deny.refusal) == ((), None)
    stale = await preview_resume(
        run.agent, ref, {"expected_version": run.version + 5, "decision": "approve"}, **options
    )
    assert isinstance(stale.refusal, AgentRunStateError)
    malformed = await preview_resume(run.agent, ref, {"decision": "sideways"}, **options)
    assert malformed.refusal is not None
    assert malformed.refusal.code == "ERR_PRISM_DECISION_INVALID"
    assert await snapshot() == before

    me = owner()
    crashed = await _crash(checkpoints, sessions, me)
    crashed_ref = {"run_id": crashed[0], "session_id": crashed[1]}
    plain = create_agent(
        id="payer",
        model={"provider": "mock", "model": "m"},
        provider=by_history(PAY_SCRIPT),
        store=sessions,
        tools=[ToolDefinition("pay", lambda a, c: {"paid": a["amount"]})],
    )
    resume = {"expected_version": crashed[2], "decision": "continue"}
    options = {"checkpoints": checkpoints, "definition_revision": REVISION, "ownership": me}
    before = await snapshot()
    refused = await preview_resume(plain, crashed_ref, resume, **options)
    assert refused.in_doubt == ("c0",)
    assert refused.refusal is not None
    assert refused.refusal.code == "ERR_PRISM_TOOL_IN_DOUBT"
    resolved = await preview_resume(
        plain,
        crashed_ref,
        {**resume, "resolutions": [{"tool_call_id": "c0", "outcome": "completed", "result": 1}]},
        **options,
    )
    assert (resolved.would_dispatch, resolved.refusal) == (("c1",), None)
    assert await snapshot() == before
    # A sub-agent call in doubt runs again (it continues its child run): a repeat.
    crew = owner()
    lead, lead_ref, lead_version = await crash_team(checkpoints, sessions, crew)
    options = {**options, "ownership": crew}
    child_resolved = await preview_resume(
        lead,
        lead_ref,
        {
            "expected_version": lead_version,
            "decision": "continue",
            "resolutions": [{"tool_call_id": "k1", "outcome": "not_started"}],
        },
        **options,
    )
    assert (child_resolved.would_dispatch, child_resolved.would_repeat) == (("p1",), ("p1",))
    assert (child_resolved.in_doubt, child_resolved.refusal) == (("p1",), None)
    before = await snapshot()
    child_refused = await preview_resume(
        lead, lead_ref, {"expected_version": lead_version, "decision": "continue"}, **options
    )
    assert child_refused.refusal is not None
    assert child_refused.refusal.code == "ERR_PRISM_TOOL_IN_DOUBT"
    assert await snapshot() == before
    # The resume itself, unlike its preview, records the doubt.
    options = {**options, "ownership": me}
    with pytest.raises(AgentRunStateError):
        await resume_agent_run(plain, crashed_ref, resume, **options)
    page = await list_effects(checkpoints, ownership=me, run_id=crashed[0])
    assert [e.status for e in page.effects] == ["in_doubt"]


async def finished_runs_are_purged(checkpoints: Any, sessions: Any) -> None:
    """Runs finished before the date go with their transcripts; later and unfinished ones
    stay; every effect and decision record stays."""
    old = await suspend(checkpoints, sessions)
    ref = {"run_id": old.run_id, "session_id": old.session_id}
    done = await resume_agent_run(
        old.agent,
        ref,
        {"expected_version": old.version, "decision": "approve", "actor": "ana"},
        checkpoints=checkpoints,
        definition_revision=REVISION,
        ownership=old.owner,
    )
    assert done.status == "succeeded"
    cutoff = time.time() + 0.001
    waiting = await suspend(checkpoints, sessions)
    for run in (old, waiting):
        assert (
            await purge_agent_runs(
                checkpoints, sessions, finished_before=cutoff - 3600, ownership=run.owner
            )
            == 0
        )
    assert (
        await purge_agent_runs(
            checkpoints, sessions, finished_before=cutoff, ownership=waiting.owner
        )
        == 0
    )
    assert (
        await purge_agent_runs(checkpoints, sessions, finished_before=cutoff, ownership=old.owner)
        == 1
    )
    assert (await list_agent_runs(checkpoints, ownership=old.owner)).runs == ()
    assert await sessions.list(old.session_id) == []
    assert [
        r.run_id for r in (await list_agent_runs(checkpoints, ownership=waiting.owner)).runs
    ] == [waiting.run_id]
    assert await sessions.list(waiting.session_id) != []
    effects = await list_effects(checkpoints, ownership=old.owner)
    assert [(e.tool_call_id, e.status, e.approved_by) for e in effects.effects] == [
        ("c1", "completed", ("ana",))
    ]
    rows = [row async for row in export_audit(checkpoints, ownership=old.owner)]
    assert [(r["kind"], r.get("actor"), r.get("outcome")) for r in rows] == [
        ("decision", "ana", "allow_once"),
        ("decision", process_actor(), "executed"),
        ("effect", None, None),
    ]


async def a_session_is_erased(
    checkpoints: Any, sessions: Any, before_erase: Callable[[], Awaitable[None]] | None = None
) -> tuple[str, Any]:
    """Refused while a run of the session is active (nothing changed); once it ended, its
    transcript and run are gone and its ledger rows keep hashes only. ``before_erase`` runs
    right before the erasure (a backend checks there that its storage holds the text the
    erasure must remove). Returns the session id and the erasure's report."""
    me = owner()
    session_id = f"s-{uuid.uuid4().hex[:12]}"
    script = [
        tool_turn(("c1", "refund", {"order": "A-3", "account": ERASED_ARGUMENT})),
        text_turn("refunded"),
    ]

    def refund(args: dict[str, Any], context: Any) -> Any:
        raise WorkerDied()

    def agent(tool: Any) -> Any:
        return create_agent(
            id="bank",
            model={"provider": "mock", "model": "m"},
            provider=by_history(script),
            store=sessions,
            tools=[ToolDefinition("refund", tool)],
        )

    options = RunStateOptions(checkpoints, REVISION, checkpoint_policy="every-turn", ownership=me)
    with pytest.raises(WorkerDied):
        await agent(refund).create_session(id=session_id).run("refund", run_state=options)
    (run,) = (await list_agent_runs(checkpoints, ownership=me)).runs
    # Running with no lease: nothing shows that no worker holds it.
    with pytest.raises(SessionActiveError):
        await erase_session(checkpoints, sessions, session_id, ownership=me)
    assert await sessions.list(session_id) != []
    assert (await list_agent_runs(checkpoints, ownership=me)).runs == (run,)
    resolved = await resume_agent_run(
        agent(lambda a, c: {"ok": True}),
        {"run_id": run.run_id, "session_id": session_id},
        {
            "expected_version": run.version,
            "decision": "continue",
            "actor": "ana",
            "resolutions": [{"tool_call_id": "c1", "outcome": "failed", "reason": ERASED_REASON}],
        },
        checkpoints=checkpoints,
        definition_revision=REVISION,
        ownership=me,
    )
    assert resolved.status == "succeeded"
    if before_erase is not None:
        await before_erase()
    report = await erase_session(checkpoints, sessions, session_id, ownership=me)
    assert report.session_ids == (session_id,)
    assert report.runs_deleted == 1
    assert report.entries_deleted > 0
    assert report.ledger_rows_erased == 2
    assert await sessions.list(session_id) == []
    assert (await list_agent_runs(checkpoints, ownership=me)).runs == ()
    (effect,) = (await list_effects(checkpoints, ownership=me)).effects
    assert effect.status == "resolved_failed"
    assert effect.arguments == f"sha256:{effect.arguments_hash}"
    rows = [row async for row in export_audit(checkpoints, ownership=me)]
    dumped = repr(rows)
    assert ERASED_ARGUMENT not in dumped
    assert ERASED_REASON not in dumped
    assert [(r["actor"], r["outcome"]) for r in rows if r["kind"] == "decision"] == [
        ("ana", "failed")
    ]
    found = await list_effects(checkpoints, ownership=me, arguments={"order": "A-3"})
    assert found.effects == ()
    return session_id, report
