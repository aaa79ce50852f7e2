"""Transient store faults and stalls: retried writes, a run that stops without being marked
failed, and store calls bounded by the run's wall time."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentRunError,
    CheckpointStoreUnavailableError,
    RunStateOptions,
    ToolDefinition,
    create_memory_checkpoint_store,
    create_memory_session_store,
    load_agent_run_state,
    resume_agent_run,
)
from prism_core.durable._faults import RETRY_CAP_S, backoff_delay
from prism_core.stores import SaveRequest
from tests.core.durable_support import CountingStore
from tests.core.fencing_support import REVISION, only_run, ref, worker


class FaultyStore(CountingStore):
    """A checkpoint store whose saves fail on demand: ``drop`` makes the next saves raise
    the transient error (``applied=True``: after the write went through), ``down`` makes
    every call fail, ``stall`` makes every call hang."""

    def __init__(self) -> None:
        super().__init__()
        self.drop = 0
        self.applied = False
        self.down = False
        self.stall = False
        self.faults = 0

    async def _gate(self) -> None:
        if self.stall:
            await anyio.sleep_forever()
        if self.down:
            self.faults += 1
            raise CheckpointStoreUnavailableError("connection refused")

    async def load(self, *args: Any, **kw: Any) -> Any:
        await self._gate()
        return await super().load(*args, **kw)

    async def save_request(self, request: SaveRequest) -> Any:
        await self._gate()
        if self.drop:
            self.drop -= 1
            self.faults += 1
            if self.applied:
                await super().save_request(request)
            raise CheckpointStoreUnavailableError("connection reset by peer")
        return await super().save_request(request)


def test_backoff_is_jittered_and_capped() -> None:
    """Every delay lies in 0..min(cap, base * 2**n); delays vary."""
    delays = [backoff_delay(n) for n in range(12) for _ in range(5)]
    assert all(0 <= d <= RETRY_CAP_S for d in delays)
    assert len(set(delays)) > 1


@pytest.mark.anyio
@pytest.mark.parametrize("applied", [False, True])
async def test_dropped_writes_are_retried_and_the_run_finishes(applied: bool) -> None:
    """Two failed saves in a row (applied or not before the answer was lost) are retried;
    every tool runs once and the run succeeds."""
    store, sessions = FaultyStore(), create_memory_session_store()
    log: list[Any] = []

    def drop_next(request: Any) -> None:
        if sum(1 for m in request.messages if m.role == "assistant") == 1:
            store.drop, store.applied = 2, applied

    result = (
        await worker(sessions, log, stall=drop_next)
        .create_session(id="s")
        .run("go", run_state=RunStateOptions(store, REVISION, checkpoint_policy="every-turn"))
    )
    assert result.status == "succeeded"
    assert log == [("echo", {"n": 1}), ("echo", {"n": 2})]
    assert store.faults == 2
    record = await store.inner.load(AGENT_RUN_NAMESPACE, result.run_id)
    assert record is not None
    assert record.value["status"] == "succeeded"


@pytest.mark.anyio
async def test_unreachable_store_stops_the_run_continuable_not_failed() -> None:
    """The store goes down after the first tool: the run stops with the typed error, its
    record stays running, and once the store is back a continue finishes without re-running
    the first tool."""
    store, sessions = FaultyStore(), create_memory_session_store()
    log: list[Any] = []

    def echo(args: dict[str, Any], context: Any) -> Any:
        log.append(("echo", args))
        # The store goes down while the first tool runs.
        store.down = args == {"n": 1}
        return {"echo": args}

    with pytest.raises(AgentRunError) as info:
        await (
            worker(sessions, log, tools=[ToolDefinition("echo", echo)])
            .create_session(id="s")
            .run("go", run_state=RunStateOptions(store, REVISION, checkpoint_policy="every-turn"))
        )
    assert info.value.code == "ERR_PRISM_STORE_UNAVAILABLE"
    assert log == [("echo", {"n": 1})]
    assert store.faults == 5
    store.down = False
    run_id = await only_run(store.inner)
    status = await load_agent_run_state(store, ref(run_id, "s"))
    assert status is not None
    assert status.state.status == "running"
    done = await resume_agent_run(
        worker(sessions, log),
        ref(run_id, "s"),
        {"expected_version": status.version, "decision": "continue"},
        checkpoints=store,
        definition_revision=REVISION,
    )
    assert done.status == "succeeded"
    assert log == [("echo", {"n": 1}), ("echo", {"n": 2})]


@pytest.mark.anyio
@pytest.mark.parametrize("lease_ms", [None, 200])
async def test_stalled_store_does_not_outlive_the_wall_time(lease_ms: int | None) -> None:
    """A store that hangs mid-run cannot keep the run past max_wall_time_ms (plus the short
    grace of the terminal write); the record stays running."""
    store, sessions = FaultyStore(), create_memory_session_store()

    def stall_store(request: Any) -> None:
        if sum(1 for m in request.messages if m.role == "assistant") == 1:
            store.stall = True

    # The stalled store never answers: without the wall-time limit the run would hang, so a
    # generous deadline on the run ending is the check (a busy machine only makes it slower).
    with anyio.fail_after(60), pytest.raises(AgentRunError) as info:
        await (
            worker(sessions, [], stall=stall_store)
            .create_session(id="s")
            .run(
                "go",
                limits={"max_wall_time_ms": 400},
                run_state=RunStateOptions(
                    store, REVISION, checkpoint_policy="every-turn", lease_ms=lease_ms
                ),
            )
        )
    assert info.value.code == "ERR_PRISM_RUN_LIMIT"
    store.stall = False
    run_id = await only_run(store.inner)
    record = await store.inner.load(AGENT_RUN_NAMESPACE, run_id)
    assert record is not None
    assert record.value["status"] == "running"


class DownSessions:
    """A session store that goes down on demand (appends raise the transient error)."""

    def __init__(self) -> None:
        self.inner = create_memory_session_store()
        self.down = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def append(self, entry: Any, **kw: Any) -> Any:
        if self.down:
            raise CheckpointStoreUnavailableError("session store connection dropped")
        return await self.inner.append(entry, **kw)


@pytest.mark.anyio
async def test_unreachable_session_store_leaves_the_run_running() -> None:
    """A run stopped by its session store going down is not marked failed: its record stays
    running, for a continue once the store is back (the tool result that could not be stored
    makes that call in doubt, resolved by the in-doubt rules)."""
    store, sessions = CountingStore(), DownSessions()
    log: list[Any] = []

    def echo(args: dict[str, Any], context: Any) -> Any:
        log.append(("echo", args))
        sessions.down = args == {"n": 1}
        return {"echo": args}

    with pytest.raises(AgentRunError) as info:
        await (
            worker(sessions, log, tools=[ToolDefinition("echo", echo)])
            .create_session(id="s")
            .run("go", run_state=RunStateOptions(store, REVISION, checkpoint_policy="every-turn"))
        )
    assert info.value.code == "ERR_PRISM_STORE_UNAVAILABLE"
    sessions.down = False
    run_id = await only_run(store.inner)
    status = await load_agent_run_state(store, ref(run_id, "s"))
    assert status is not None
    assert status.state.status == "running"
    # The first turn's checkpoint and c1's dispatched mark; nothing after the failed append.
    assert store.saves == 2
    from prism_core.durable import in_doubt_calls

    assert in_doubt_calls(status.state) == ("c1",)


TOOL_SECONDS = 60


@pytest.mark.anyio
async def test_a_durable_run_records_its_wall_time_end_within_the_wall_time() -> None:
    """A durable run whose tool outlasts ``max_wall_time_ms`` stops a little before the
    deadline (a tenth of the wall time, at most a second), so its terminal ``failed``
    checkpoint is written within the wall time: the record says ``failed`` and the run took
    no longer than its limit."""
    store, sessions = create_memory_checkpoint_store(), create_memory_session_store()

    async def slow(args: dict[str, Any], context: Any) -> Any:
        await anyio.sleep(TOOL_SECONDS)
        return "late"

    started = time.monotonic()
    with pytest.raises(AgentRunError) as info:
        await (
            worker(sessions, [], tools=[ToolDefinition("echo", slow)])
            .create_session(id="s")
            .run(
                "go",
                limits={"max_wall_time_ms": 500},
                run_state=RunStateOptions(store, REVISION, checkpoint_policy="every-turn"),
            )
        )
    elapsed = time.monotonic() - started
    assert info.value.code == "ERR_PRISM_RUN_LIMIT"
    assert info.value.result.limit is not None
    assert info.value.result.limit.axis == "max_wall_time_ms"
    # The run ended on its own deadline, not the tool's (bounded by the tool, not by a
    # quiet machine); that the terminal write lands before the deadline is the record below.
    assert elapsed < TOOL_SECONDS
    run_id = await only_run(store)
    record = await store.load(AGENT_RUN_NAMESPACE, run_id)
    assert record is not None
    assert record.value["status"] == "failed"
