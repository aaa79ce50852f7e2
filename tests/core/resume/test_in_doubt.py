"""In-doubt tool calls: a crash between a call's dispatched mark and its stored result, and
the ways a continue settles it (idempotent tools, ``reconcile``, operator resolutions)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import attrs
import pytest

from prism_core import (
    RECONCILE_NOT_STARTED,
    AgentDecisionError,
    AgentRunStateError,
    CheckpointConflictError,
    ToolDefinition,
    create_agent,
    load_agent_run_state,
    resume_agent_run,
    tool,
)
from prism_core.durable import in_doubt_calls

from ..durable_support import World, by_history, rewrite_as_in_doubt
from ..helpers import text_turn, tool_turn

SCRIPT = [
    tool_turn(("c0", "pay", {"amount": 5}), ("c1", "pay", {"amount": 7})),
    text_turn("paid"),
]


class WorkerDied(BaseException):
    """Stands in for SIGKILL: nothing in the run may catch it."""


class Host:
    """The host's payment system: effects keyed on the idempotency key, and every attempt."""

    def __init__(self) -> None:
        self.effects: dict[str, int] = {}
        self.attempts: list[tuple[str, str]] = []

    def pay(
        self, *, die: str | None = None, after_effect: bool = True, **options: Any
    ) -> ToolDefinition:
        """The ``pay`` tool; with ``die``, the worker dies inside that call (after or before
        its effect)."""

        def execute(args: dict[str, Any], context: Any) -> dict[str, Any]:
            self.attempts.append((context.tool_call_id, context.idempotency_key))
            if context.tool_call_id == die and not after_effect:
                raise WorkerDied()
            self.effects[context.idempotency_key] = self.effects.get(context.idempotency_key, 0) + 1
            if context.tool_call_id == die:
                raise WorkerDied()
            return {"paid": args["amount"]}

        return ToolDefinition("pay", execute, **options)

    def reconcile(self, answer_unknown: bool = False, asynchronous: bool = False) -> Any:
        """A reconcile that asks the payment system whether the keyed payment happened."""

        def reconcile(call: Any, context: Any) -> Any:
            assert context.tool_call_id == call.id
            if answer_unknown:
                return None
            if context.idempotency_key in self.effects:
                return {"paid": call.arguments["amount"], "reconciled": True}
            return RECONCILE_NOT_STARTED

        async def reconcile_async(call: Any, context: Any) -> Any:
            await anyio.lowlevel.checkpoint()
            return reconcile(call, context)

        return reconcile_async if asynchronous else reconcile


async def crash(
    world: World, host: Host, *, die: str = "c0", after_effect: bool = True, **run_state: Any
) -> tuple[str, int]:
    """An every-turn run whose worker dies inside call ``die``; its run id and version."""
    agent = world.agent(SCRIPT, tools=[host.pay(die=die, after_effect=after_effect)])
    run_ids: list[str] = []
    stream = agent.create_session(id="s1").stream(
        "pay both", run_state=world.run_state(checkpoint_policy="every-turn", **run_state)
    )

    async def consume() -> None:
        async for event in stream:
            run_ids.append(event.run_id)

    with pytest.raises(WorkerDied):
        await consume()
    status = await load_agent_run_state(world.checkpoints, ref(run_ids[-1]))
    assert status is not None
    return run_ids[-1], status.version


def ref(run_id: str) -> dict[str, str]:
    """The run reference in session s1."""
    return {"run_id": run_id, "session_id": "s1"}


async def tool_results(world: World) -> dict[str, Any]:
    """Each stored tool result by call id (value or error message)."""
    found: dict[str, Any] = {}
    for entry in await world.sessions.list("s1"):
        if entry.message is not None and entry.message.role == "tool":
            for block in entry.message.content:
                found[block.tool_call_id] = (
                    block.error.message if block.error is not None else block.value
                )
    return found


async def continue_run(world: World, host: Host, run_id: str, version: int, **extra: Any) -> Any:
    pay = extra.pop("pay", None) or host.pay()
    return await resume_agent_run(
        world.agent(SCRIPT, tools=[pay]),
        ref(run_id),
        {"expected_version": version, "decision": "continue", **extra},
        **world.resume_options(),
    )


@pytest.mark.anyio
async def test_the_crashed_call_is_in_doubt_and_the_next_never_started() -> None:
    """Only the marked call is in doubt; the next call of the round was never marked."""
    world, host = World(), Host()
    run_id, version = await crash(world, host)
    status = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert status is not None
    assert in_doubt_calls(status.state) == ("c0",)
    raw = await world.checkpoints.inner.load("prism.agent-run", run_id)
    assert in_doubt_calls(raw.value) == ("c0",)
    assert version == 2


async def idempotent_in_doubt(world: World, host: Host) -> tuple[str, int]:
    """A run of an idempotent ``pay`` whose record holds ``c0`` in doubt (an idempotent tool
    takes no mark of its own: the record is written as a crash after ``c0``'s mark would)."""
    agent = world.agent(SCRIPT, tools=[host.pay(idempotent=True)])
    suspended = await agent.create_session(id="s1").run(
        "pay both", run_state=world.run_state(interrupt_before_tool=True)
    )
    await rewrite_as_in_doubt(world.checkpoints, suspended.run_id, call_id="c0")
    status = await load_agent_run_state(world.checkpoints, ref(suspended.run_id))
    assert status is not None
    assert in_doubt_calls(status.state) == ("c0",)
    return suspended.run_id, status.version


@pytest.mark.anyio
async def test_idempotent_tool_is_redispatched_once_with_the_same_key() -> None:
    """An in-doubt call of a tool declared idempotent runs again, once, same id and key."""
    world, host = World(), Host()
    run_id, version = await idempotent_in_doubt(world, host)
    result = await continue_run(world, host, run_id, version, pay=host.pay(idempotent=True))
    assert result.status == "succeeded"
    assert Counter(call for call, _ in host.attempts) == {"c0": 1, "c1": 1}
    final = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert final is not None
    audit = [(r.tool_call_id, r.outcome, r.source) for r in final.state.resolutions]
    assert audit == [("c0", "not_started", "idempotent")]


@pytest.mark.anyio
async def test_redeclaring_a_tool_idempotent_does_not_rerun_its_in_doubt_call() -> None:
    """``idempotent`` is part of the fingerprint: a continue with the tool redeclared
    idempotent is refused as a mismatch (nothing written, nothing run) instead of sending the
    in-doubt call again; the definition the run recorded still meets the in-doubt refusal."""
    world, host = World(), Host()
    run_id, version = await crash(world, host)
    saves = world.checkpoints.saves
    with pytest.raises(AgentRunStateError) as refused:
        await continue_run(world, host, run_id, version, pay=host.pay(idempotent=True))
    assert refused.value.code == "ERR_PRISM_AGENT_RUN_STATE"
    assert "fingerprint mismatch" in str(refused.value)
    assert "tool 'pay' differs" in str(refused.value)
    assert Counter(call for call, _ in host.attempts) == {"c0": 1}
    assert sum(host.effects.values()) == 1
    assert world.checkpoints.saves == saves
    with pytest.raises(AgentRunStateError) as in_doubt:
        await continue_run(world, host, run_id, version)
    assert in_doubt.value.in_doubt == ("c0",)


@pytest.mark.anyio
async def test_idempotent_call_without_mark_simply_reruns() -> None:
    """A crash inside an idempotent call leaves no mark: the continue reruns the round's
    unfinished calls, nothing is in doubt."""
    world, host = World(), Host()
    agent = world.agent(SCRIPT, tools=[host.pay(die="c0", idempotent=True)])
    with pytest.raises(WorkerDied):
        await agent.create_session(id="s1").run(
            "pay", run_state=world.run_state(checkpoint_policy="every-turn")
        )
    run_id = (await world.checkpoints.inner.list("prism.agent-run")).records[0].key
    status = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert status is not None
    assert in_doubt_calls(status.state) == ()
    result = await continue_run(world, host, run_id, status.version, pay=host.pay(idempotent=True))
    assert result.status == "succeeded"
    assert Counter(call for call, _ in host.attempts) == {"c0": 2, "c1": 1}
    assert len({key for call, key in host.attempts if call == "c0"}) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("asynchronous", [False, True])
async def test_reconcile_result_is_stored_without_running_the_tool(asynchronous: bool) -> None:
    """Sync (in a worker thread) or async: the reconciled result stands for the call."""
    world, host = World(), Host()
    run_id, version = await crash(world, host, after_effect=True)
    reconcile = host.reconcile(asynchronous=asynchronous)
    result = await continue_run(world, host, run_id, version, pay=host.pay(reconcile=reconcile))
    assert result.status == "succeeded"
    assert Counter(call for call, _ in host.attempts) == {"c0": 1, "c1": 1}
    assert all(count == 1 for count in host.effects.values())
    results = await tool_results(world)
    assert results["c0"] == {"paid": 5, "reconciled": True}
    assert results["c1"] == {"paid": 7}
    final = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert final is not None
    assert [(r.tool_call_id, r.outcome, r.source) for r in final.state.resolutions] == [
        ("c0", "completed", "reconcile")
    ]


@pytest.mark.anyio
async def test_reconcile_not_started_runs_the_call_once() -> None:
    """Killed between the mark and the effect: reconcile says not started; it runs once."""
    world, host = World(), Host()
    run_id, version = await crash(world, host, after_effect=False)
    assert host.effects == {}
    result = await continue_run(
        world, host, run_id, version, pay=host.pay(reconcile=host.reconcile())
    )
    assert result.status == "succeeded"
    assert sorted(host.effects.values()) == [1, 1]
    c0 = {key for call, key in host.attempts if call == "c0"}
    assert len(c0) == 1
    assert (await tool_results(world))["c0"] == {"paid": 5}


@pytest.mark.anyio
async def test_reconcile_unknown_refuses_and_leaves_the_run_in_doubt() -> None:
    """``None`` from reconcile: refused with the in-doubt ids; nothing runs, no session
    write; the record stays in doubt (at the claim's version)."""
    world, host = World(), Host()
    run_id, version = await crash(world, host)
    entries = len(await world.sessions.list("s1"))
    before = await load_agent_run_state(world.checkpoints, ref(run_id))
    with pytest.raises(AgentRunStateError) as info:
        await continue_run(
            world, host, run_id, version, pay=host.pay(reconcile=host.reconcile(True))
        )
    assert info.value.code == "ERR_PRISM_TOOL_IN_DOUBT"
    assert info.value.in_doubt == ("c0",)
    assert len(await world.sessions.list("s1")) == entries
    assert Counter(call for call, _ in host.attempts) == {"c0": 1}
    after = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert after is not None
    assert before is not None
    assert after.state.status == "running"
    assert after.state.pending_calls == before.state.pending_calls
    assert in_doubt_calls(after.state) == ("c0",)
    assert f"expected_version {after.version}" in str(info.value)
    # The operator settles it at the version the refusal names.
    done = await continue_run(
        world,
        host,
        run_id,
        after.version,
        resolutions=[{"tool_call_id": "c0", "outcome": "completed", "result": {"paid": 5}}],
    )
    assert done.status == "succeeded"


@pytest.mark.anyio
@pytest.mark.parametrize("outcome", ["completed", "not_started", "failed"])
async def test_operator_resolution(outcome: str) -> None:
    """Each outcome: completed stores the given result, not_started runs the call once,
    failed stores an error result with the (redacted) reason; all audited."""
    world, host = World(), Host()
    run_id, version = await crash(world, host, after_effect=outcome == "completed")
    entry: dict[str, Any] = {"tool_call_id": "c0", "outcome": outcome}
    if outcome == "completed":
        entry["result"] = {"paid": 5, "by": "operator"}
    if outcome == "failed":
        entry["reason"] = "card declined; see ticket 42"
    result = await continue_run(world, host, run_id, version, resolutions=[entry])
    assert result.status == "succeeded"
    results = await tool_results(world)
    attempts = Counter(call for call, _ in host.attempts)
    if outcome == "completed":
        assert results["c0"] == {"paid": 5, "by": "operator"}
        assert attempts == {"c0": 1, "c1": 1}
    elif outcome == "not_started":
        assert results["c0"] == {"paid": 5}
        assert attempts == {"c0": 2, "c1": 1}
        assert sorted(host.effects.values()) == [1, 1]
    else:
        assert "card declined; see ticket 42" in results["c0"]
        assert attempts == {"c0": 1, "c1": 1}
    final = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert final is not None
    [audit] = final.state.resolutions
    assert (audit.tool_call_id, audit.outcome, audit.source) == ("c0", outcome, "operator")
    assert audit.at > 0


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("resolutions", "code"),
    [
        ([{"tool_call_id": "nope", "outcome": "not_started"}], "ERR_PRISM_DECISION_UNKNOWN"),
        ([{"tool_call_id": "c1", "outcome": "not_started"}], "ERR_PRISM_DECISION_SCOPE"),
        (
            [
                {"tool_call_id": "c0", "outcome": "not_started"},
                {"tool_call_id": "c0", "outcome": "failed", "reason": "x"},
            ],
            "ERR_PRISM_DECISION_DUPLICATE",
        ),
        ([{"tool_call_id": "c0", "outcome": "completed"}], "ERR_PRISM_DECISION_INVALID"),
        ([{"tool_call_id": "c0", "outcome": "failed"}], "ERR_PRISM_DECISION_INVALID"),
        ([{"tool_call_id": "c0", "outcome": "maybe"}], "ERR_PRISM_DECISION_INVALID"),
        ([{"tool_call_id": "c0", "outcome": "not_started", "x": 1}], "ERR_PRISM_DECISION_INVALID"),
        ([], "ERR_PRISM_DECISION_INVALID"),
        (
            [{"tool_call_id": "c0", "outcome": "completed", "result": "x" * 70000}],
            "ERR_PRISM_DECISION_LIMIT",
        ),
        (
            [{"tool_call_id": "c0", "outcome": "completed", "result": "x" * 20000}],
            "ERR_PRISM_DECISION_LIMIT",
        ),
    ],
)
async def test_refused_resolutions_write_nothing(resolutions: Any, code: str) -> None:
    """Unknown, not in doubt, duplicate, malformed and oversized (the last one over this
    run's 16 KiB state cap) resolutions refuse with a typed code; the record is
    byte-identical and nothing ran."""
    world, host = World(), Host()
    run_id, version = await crash(world, host, max_state_bytes=16384)
    before = await world.checkpoints.raw(run_id)
    entries = len(await world.sessions.list("s1"))
    world.checkpoints.saves = 0
    with pytest.raises(AgentDecisionError) as info:
        await continue_run(world, host, run_id, version, resolutions=resolutions)
    assert info.value.code == code
    assert world.checkpoints.saves == 0
    assert await world.checkpoints.raw(run_id) == before
    assert len(await world.sessions.list("s1")) == entries
    assert Counter(call for call, _ in host.attempts) == {"c0": 1}


@pytest.mark.anyio
async def test_resolutions_travel_with_continue_only() -> None:
    from prism_core.resume import validate_resume_input

    with pytest.raises(AgentDecisionError) as info:
        validate_resume_input(
            {
                "expected_version": 1,
                "decision": "approve",
                "resolutions": [{"tool_call_id": "c0", "outcome": "not_started"}],
            }
        )
    assert info.value.code == "ERR_PRISM_DECISION_INVALID"


@pytest.mark.anyio
async def test_racing_continues_run_a_not_started_call_once() -> None:
    """Two continues race on one in-doubt call cleared to run: one claim wins, the call runs
    once; the other is refused."""
    world, host = World(), Host()
    run_id, version = await crash(world, host, after_effect=False)
    outcomes: list[Any] = []

    async def attempt() -> None:
        try:
            outcomes.append(
                await continue_run(
                    world, host, run_id, version, pay=host.pay(reconcile=host.reconcile())
                )
            )
        except (CheckpointConflictError, AgentRunStateError) as exc:
            outcomes.append(exc)

    async with anyio.create_task_group() as group:
        group.start_soon(attempt)
        group.start_soon(attempt)
    assert sorted(type(o).__name__ for o in outcomes) in (
        ["AgentRunResult", "CheckpointConflictError"],
        ["AgentRunResult", "AgentRunStateError"],
    )
    assert sorted(host.effects.values()) == [1, 1]
    assert Counter(call for call, _ in host.attempts) == {"c0": 2, "c1": 1}


@pytest.mark.anyio
async def test_a_later_call_of_the_round_in_doubt_keeps_the_earlier_result() -> None:
    """Dying in the round's second call: the first is kept, only the second is in doubt."""
    world, host = World(), Host()
    run_id, version = await crash(world, host, die="c1")
    status = await load_agent_run_state(world.checkpoints, ref(run_id))
    assert status is not None
    assert in_doubt_calls(status.state) == ("c1",)
    result = await continue_run(
        world, host, run_id, version, pay=host.pay(reconcile=host.reconcile())
    )
    assert result.status == "succeeded"
    assert Counter(call for call, _ in host.attempts) == {"c0": 1, "c1": 1}
    assert final_counts(await load_agent_run_state(world.checkpoints, ref(run_id))) == (2, 1, 2)


def final_counts(status: Any) -> tuple[int, int, int]:
    counters = status.state.counters
    return counters.turns, counters.tool_rounds, counters.tool_calls


@pytest.mark.anyio
async def test_idempotency_key_differs_between_runs_with_the_same_call_ids() -> None:
    world, host = World(), Host()
    agent = world.agent(SCRIPT, tools=[host.pay()])
    for session in ("a", "b"):
        await agent.create_session(id=session).run("pay")
    keys = [key for call, key in host.attempts if call == "c0"]
    assert len(keys) == 2
    assert keys[0] != keys[1]


def test_tool_decorator_takes_reconcile() -> None:
    def check(call: Any, context: Any) -> Any:
        return RECONCILE_NOT_STARTED

    @tool(idempotent=False, reconcile=check)
    def refund(amount: int) -> str:
        """Refund an amount."""
        return "ok"

    assert refund.reconcile is check
    assert refund.needs_dispatch_mark
    assert not attrs.evolve(refund, effect="read").needs_dispatch_mark
    with pytest.raises(TypeError):
        ToolDefinition("x", lambda a, c: None, reconcile="nope")  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_a_sync_reconcile_runs_in_a_thread_under_the_agent_limiter() -> None:
    """``reconcile`` is host code like a tool: sync, it runs in a worker thread holding a
    token of the agent's ``thread_limiter``."""
    import threading

    world, host = World(), Host()
    run_id, version = await crash(world, host, after_effect=True)
    limiter = anyio.CapacityLimiter(1)
    seen: list[tuple[int, float]] = []
    answer = host.reconcile()

    def reconcile(call: Any, context: Any) -> Any:
        seen.append((threading.get_ident(), limiter.borrowed_tokens))
        return answer(call, context)

    agent = create_agent(
        id="investigator",
        model={"provider": "mock", "model": "demo"},
        provider=by_history(SCRIPT),
        store=world.sessions,
        tools=[host.pay(reconcile=reconcile)],
        thread_limiter=limiter,
    )
    result = await resume_agent_run(
        agent,
        ref(run_id),
        {"expected_version": version, "decision": "continue"},
        **world.resume_options(),
    )
    assert result.status == "succeeded"
    assert seen == [(seen[0][0], 1)]
    assert seen[0][0] != threading.get_ident()
