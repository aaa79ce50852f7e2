"""Fencing per claim: claims raise the token, a superseded worker runs no further tool."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import pytest

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentRunStateError,
    CheckpointConflictError,
    create_agent_run_lifecycle,
    create_memory_checkpoint_store,
    create_memory_session_store,
    load_agent_run_state,
    resume_agent_run,
)
from tests.core.durable_support import CountingStore
from tests.core.fencing_support import (
    REVISION,
    Stall,
    check_split_brain,
    ref,
    split_brain,
    worker,
)


async def _suspended_run(store: Any, sessions: Any) -> tuple[str, str, int]:
    """A run suspended before its first tool (a claimable checkpoint)."""
    from prism_core import RunStateOptions

    session_id = f"s-{uuid.uuid4().hex[:6]}"
    result = (
        await worker(sessions, [])
        .create_session(id=session_id)
        .run("go", run_state=RunStateOptions(store, REVISION, interrupt_before_tool=True))
    )
    assert result.status == "suspended"
    assert result.run_state is not None
    return result.run_id, session_id, result.run_state.version


@pytest.mark.anyio
@pytest.mark.parametrize("lease_ms", [None, 1500])
async def test_split_brain_superseded_worker_runs_nothing(lease_ms: int | None) -> None:
    """A stalls in the model call, B continues and finishes, A wakes up and runs no tool."""
    outcome = await split_brain(
        create_memory_checkpoint_store(), create_memory_session_store(), lease_ms=lease_ms
    )
    check_split_brain(outcome)


@pytest.mark.anyio
async def test_every_claim_raises_the_stored_token() -> None:
    """Approve claims with token 1; each later claim adds one; deny claims too."""
    store, sessions = CountingStore(), create_memory_session_store()
    run_id, session_id, version = await _suspended_run(store, sessions)
    record = await store.inner.load(AGENT_RUN_NAMESPACE, run_id)
    assert record is not None
    assert record.fencing_token is None
    await resume_agent_run(
        worker(sessions, []),
        ref(run_id, session_id),
        {"expected_version": version, "decision": "deny"},
        checkpoints=store,
        definition_revision=REVISION,
    )
    record = await store.inner.load(AGENT_RUN_NAMESPACE, run_id)
    assert record is not None
    assert (record.value["status"], record.fencing_token) == ("denied", 1)


@pytest.mark.anyio
async def test_explicit_token_must_be_above_the_stored_one() -> None:
    """fencing_token=8 is written; a later 8 (or lower) is a conflict and writes nothing."""
    store, sessions = CountingStore(), create_memory_session_store()
    run_id, session_id, version = await _suspended_run(store, sessions)
    log: list[Any] = []
    done = await resume_agent_run(
        worker(sessions, log),
        ref(run_id, session_id),
        {"expected_version": version, "decision": "approve"},
        checkpoints=store,
        definition_revision=REVISION,
        fencing_token=8,
    )
    # The approved call ran; the next one suspends again (interrupt_before_tool).
    assert done.status == "suspended"
    assert log == [("echo", {"n": 1})]
    record = await store.inner.load(AGENT_RUN_NAMESPACE, run_id)
    assert record is not None
    assert record.fencing_token == 8
    second, second_session, second_version = await _suspended_run(store, sessions)
    record = await store.inner.load(AGENT_RUN_NAMESPACE, second)
    assert record is not None
    await store.inner.save(
        AGENT_RUN_NAMESPACE,
        second,
        record.value,
        version=record.version + 1,
        expected_version=record.version,
        fencing_token=8,
    )
    before = await store.raw(second)
    saves = store.saves
    for token in (8, 3):
        with pytest.raises(CheckpointConflictError) as info:
            await resume_agent_run(
                worker(sessions, log),
                ref(second, second_session),
                {"expected_version": second_version + 1, "decision": "approve"},
                checkpoints=store,
                definition_revision=REVISION,
                fencing_token=token,
            )
        assert info.value.code == "ERR_PRISM_FENCING_TOKEN"
    assert store.saves == saves
    assert await store.raw(second) == before


@pytest.mark.anyio
async def test_malformed_token_is_refused_before_any_store_access() -> None:
    """A negative, boolean, text or unstorable (above 2**63 - 1) token, or a non-bool force,
    is a typed refusal with no I/O."""
    store, sessions = CountingStore(), create_memory_session_store()
    bads: list[dict[str, Any]] = [
        {"fencing_token": -1},
        {"fencing_token": 2**63},
        {"fencing_token": 10**20},
        {"fencing_token": True},
        {"fencing_token": "9"},
        {"force": 1},
    ]
    for bad in bads:
        with pytest.raises(AgentRunStateError):
            await resume_agent_run(
                worker(sessions, []),
                ref("run_x", "s"),
                {"expected_version": 1, "decision": "continue"},
                checkpoints=store,
                definition_revision=REVISION,
                **bad,
            )
    assert store.calls == 0


@pytest.mark.anyio
async def test_lifecycle_resume_takes_a_fencing_token() -> None:
    """The lifecycle's resume(..., fencing_token=) writes that token."""
    store, sessions = CountingStore(), create_memory_session_store()
    run_id, session_id, version = await _suspended_run(store, sessions)
    lifecycle = create_agent_run_lifecycle(
        checkpoints=store, resolve_agent=lambda agent_id: (worker(sessions, []), REVISION)
    )
    done = await lifecycle.resume(
        ref(run_id, session_id),
        {"expected_version": version, "decision": "approve"},
        fencing_token=41,
    )
    assert done.status == "suspended"
    status = await load_agent_run_state(store, ref(run_id, session_id))
    record = await store.inner.load(AGENT_RUN_NAMESPACE, run_id)
    assert status is not None
    assert record is not None
    assert (status.state.status, record.fencing_token) == ("suspended", 41)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("effect", "counts"),
    [
        # A read-only call gets no dispatched mark: one check (a load) per call, no save.
        ("read", (4, 2)),
        # A side-effecting call gets its mark (a conditional save), which fences it: no load.
        (None, (6, 0)),
    ],
)
async def test_pre_dispatch_check_costs_one_read_and_no_write(
    effect: str | None, counts: tuple[int, int]
) -> None:
    """A call without a dispatched mark is preceded by one load, never by a save; a call
    with one is fenced by the mark's write alone."""
    from prism_core import RunStateOptions
    from tests.core.helpers import echo_tool

    store, sessions = CountingStore(), create_memory_session_store()
    log: list[Any] = []
    agent = worker(sessions, log, stall=Stall(at=99), tools=[echo_tool(log=log, effect=effect)])
    result = await agent.create_session(id="s1").run(
        "go", run_state=RunStateOptions(store, REVISION, checkpoint_policy="every-turn")
    )
    assert result.status == "succeeded"
    assert log == [("echo", {"n": 1}), ("echo", {"n": 2})]
    # Three turn checkpoints and the terminal state, plus a mark per side-effecting call.
    assert (store.saves, store.loads) == counts


@pytest.mark.anyio
async def test_two_continues_of_one_version_claim_once() -> None:
    """Two workers continuing the same checkpoint at once write the same claim with the same
    token; exactly one wins, the other gets the conflict and runs nothing."""
    import anyio

    from prism_core import AgentRunError, RunStateOptions

    store, sessions = CountingStore(), create_memory_session_store()
    stall = Stall(at=1)
    first: list[Any] = []

    async def run_a() -> None:
        with contextlib.suppress(AgentRunError):
            await (
                worker(sessions, first, stall=stall)
                .create_session(id="s")
                .run(
                    "go", run_state=RunStateOptions(store, REVISION, checkpoint_policy="every-turn")
                )
            )

    logs: list[list[Any]] = [[], []]
    outcomes: list[Any] = []
    async with anyio.create_task_group() as group:
        group.start_soon(run_a)
        await stall.entered.wait()
        page = await store.list(AGENT_RUN_NAMESPACE)
        run_id = page.records[0].key
        status = await load_agent_run_state(store, ref(run_id, "s"))
        assert status is not None

        async def claim(index: int) -> None:
            try:
                outcomes.append(
                    await resume_agent_run(
                        worker(sessions, logs[index]),
                        ref(run_id, "s"),
                        {"expected_version": status.version, "decision": "continue"},
                        checkpoints=store,
                        definition_revision=REVISION,
                    )
                )
            except CheckpointConflictError as exc:
                outcomes.append(exc)

        async with anyio.create_task_group() as claims:
            claims.start_soon(claim, 0)
            claims.start_soon(claim, 1)
        stall.release.set()
    assert sorted(type(o).__name__ for o in outcomes) == [
        "AgentRunResult",
        "CheckpointConflictError",
    ]
    assert sorted(map(len, logs)) == [0, 1]
    assert first == [("echo", {"n": 1})]


class StampCountingStore(CountingStore):
    """A counting store that also reads stamps (``CheckpointStampReader``)."""

    def __init__(self) -> None:
        super().__init__()
        self.stamps = 0

    async def load_stamp(self, *args: Any, **kw: Any) -> Any:
        self.calls += 1
        self.stamps += 1
        return await self.inner.load_stamp(*args, **kw)


@pytest.mark.anyio
@pytest.mark.parametrize("stamps", [False, True], ids=["load", "load_stamp"])
async def test_pre_dispatch_check_stops_a_superseded_read_only_call(stamps: bool) -> None:
    """A read-only call gets no dispatched mark, so no write stands between a superseded
    worker and the tool: the pre-dispatch check does. A stalls after its turn checkpoint,
    just before dispatching c2 (in ``tool_call`` middleware); B continues and finishes; A
    wakes up, fails its check and never runs c2. The check is one read: of the stamp alone
    when the store offers it, else of the record."""
    import anyio

    from prism_core import AgentRunError, RunStateOptions, create_agent
    from tests.core.fencing_support import TURNS, scripted
    from tests.core.helpers import echo_tool

    store = StampCountingStore() if stamps else CountingStore()
    sessions = create_memory_session_store()
    entered, release = anyio.Event(), anyio.Event()

    class HoldBeforeC2:
        async def tool_call(self, call: Any, ctx: Any) -> Any:
            if call.id == "c2":
                entered.set()
                await release.wait()
            return call

    a_log: list[Any] = []
    b_log: list[Any] = []
    a_error: list[AgentRunError] = []
    agent_a = create_agent(
        id="fenced",
        model={"provider": "mock", "model": "demo"},
        provider=scripted(TURNS),
        tools=[echo_tool(log=a_log, effect="read")],
        store=sessions,
        middleware=[HoldBeforeC2()],
    )

    async def run_a() -> None:
        try:
            await agent_a.create_session(id="s").run(
                "go", run_state=RunStateOptions(store, REVISION, checkpoint_policy="every-turn")
            )
        except AgentRunError as exc:
            a_error.append(exc)

    async with anyio.create_task_group() as group:
        group.start_soon(run_a)
        with anyio.fail_after(30):
            await entered.wait()
        page = await store.list(AGENT_RUN_NAMESPACE)
        run_id = page.records[0].key
        status = await load_agent_run_state(store, ref(run_id, "s"))
        assert status is not None
        done = await resume_agent_run(
            worker(sessions, b_log, tools=[echo_tool(log=b_log, effect="read")]),
            ref(run_id, "s"),
            {"expected_version": status.version, "decision": "continue"},
            checkpoints=store,
            definition_revision=REVISION,
        )
        loads_before = store.loads
        stamps_before = getattr(store, "stamps", 0)
        release.set()
    assert done.status == "succeeded"
    assert b_log == [("echo", {"n": 2})]
    assert a_log == [("echo", {"n": 1})]
    assert [e.code for e in a_error] == ["ERR_PRISM_CHECKPOINT_CONFLICT"]
    # A's one check: a stamp read where the store has one, else a load.
    assert store.loads == loads_before + (0 if stamps else 1)
    assert getattr(store, "stamps", 0) == stamps_before + (1 if stamps else 0)
    record = await store.inner.load(AGENT_RUN_NAMESPACE, run_id)
    assert record is not None
    assert (record.value["status"], record.fencing_token) == ("succeeded", 1)


@pytest.mark.anyio
async def test_tool_and_reconcile_contexts_carry_the_current_fencing_token() -> None:
    """A tool sees ``fencing_token == 0`` before any claim; after a claim, the tool of the
    resumed run and ``reconcile`` see the token the claim wrote (stored + 1, or the host's)."""
    from prism_core import (
        RECONCILE_NOT_STARTED,
        RunStateOptions,
        ToolDefinition,
        create_agent,
        create_mock_provider,
    )
    from tests.core.helpers import text_turn, tool_turn

    seen: list[tuple[str, int]] = []

    def pay(args: dict[str, Any], context: Any) -> Any:
        seen.append(("execute", context.fencing_token))
        if len(seen) == 1:
            raise KeyboardInterrupt  # the worker dies inside the tool: the call is in doubt
        return "paid"

    def reconcile(call: Any, context: Any) -> Any:
        seen.append(("reconcile", context.fencing_token))
        return RECONCILE_NOT_STARTED

    checkpoints, sessions = create_memory_checkpoint_store(), create_memory_session_store()
    agent = create_agent(
        id="fenced",
        model={"provider": "mock", "model": "m"},
        provider=create_mock_provider(turns=[tool_turn(("p1", "pay", {})), text_turn("ok")]),
        tools=[ToolDefinition("pay", pay, reconcile=reconcile)],
        store=sessions,
    )
    options = RunStateOptions(checkpoints, REVISION, checkpoint_policy="every-turn")
    with contextlib.suppress(KeyboardInterrupt):
        await agent.create_session(id="s1").run("go", run_state=options)
    page = await checkpoints.list(AGENT_RUN_NAMESPACE)
    run = {"run_id": page.records[0].key, "session_id": "s1"}
    status = await load_agent_run_state(checkpoints, run)
    assert status is not None
    result = await resume_agent_run(
        agent,
        run,
        {"expected_version": status.version, "decision": "continue"},
        checkpoints=checkpoints,
        definition_revision=REVISION,
        fencing_token=41,
    )
    assert result.status == "succeeded"
    assert seen == [("execute", 0), ("reconcile", 41), ("execute", 41)]
