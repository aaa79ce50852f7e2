"""Finding durable runs: list_agent_runs, summaries, filters, paging and run ids alone."""

from __future__ import annotations

import time
from typing import Any

import attrs
import pytest

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentRunNotFoundError,
    AgentRunStateError,
    AgentRunSummary,
    CheckpointStatusIndex,
    InvalidCheckpointError,
    create_agent_run_lifecycle,
    list_agent_runs,
    load_agent_run_state,
    resume_agent_run,
)
from prism_core.durable._lease import LEASE_CLOCK_SKEW_MS
from prism_core.resume import is_recoverable

from ..durable_support import REVISION, CountingStore, World
from ..helpers import echo_tool, text_turn, tool_turn

TURNS = [tool_turn(("c1", "echo", {"n": 1}), ("c2", "echo", {"n": 2})), text_turn("done")]
TENANT = {"tenant_id": "t1"}


class RecordCounter(CountingStore):
    """A checkpoint store without a status index that counts the records it hands out."""

    def __init__(self) -> None:
        super().__init__()
        self.records_read = 0

    async def list(self, *args: Any, **kw: Any) -> Any:
        page = await super().list(*args, **kw)
        self.records_read += len(page.records)
        return page


class IndexedRecordCounter(RecordCounter):
    """The same, with the memory store's status index passed through."""

    async def list_by_status(self, *args: Any, **kw: Any) -> Any:
        page = await self.inner.list_by_status(*args, **kw)
        self.records_read += len(page.records)
        return page


async def start(world: World, session_id: str, *, suspend: bool, owner: Any = None) -> Any:
    """One run on ``world``: suspended before its tools, or run to the end (checkpointed at
    every turn, so its record says how it ended)."""
    agent = world.agent(TURNS, tools=[echo_tool()])
    options = {"interrupt_before_tool": True} if suspend else {"checkpoint_policy": "every-turn"}
    return await agent.create_session(id=session_id).run(
        "go", run_state=world.run_state(ownership=owner, **options)
    )


async def strand(world: World, run_id: str) -> None:
    """Rewrite a suspended run as a crashed worker leaves it: running, a call dispatched."""
    store = world.checkpoints.inner
    record = await store.load(AGENT_RUN_NAMESPACE, run_id)
    value = dict(record.value)
    value["status"] = "running"
    value["interruption"] = None
    value["pending_calls"] = [
        {**call, "status": "dispatched" if call["tool_call_id"] == "c1" else "approved"}
        for call in value["pending_calls"]
    ]
    await store.save(
        AGENT_RUN_NAMESPACE, run_id, value, version=record.version + 1, expected_version=1
    )


async def populated(world: World) -> dict[str, Any]:
    """Three unowned runs (suspended, succeeded, stranded) and one of tenant t1."""
    runs = {
        "suspended": await start(world, "s-a", suspend=True),
        "succeeded": await start(world, "s-b", suspend=False),
        "stranded": await start(world, "s-c", suspend=True),
        "tenant": await start(world, "s-d", suspend=True, owner=TENANT),
    }
    await strand(world, runs["stranded"].run_id)
    return runs


def by_run(page: Any) -> dict[str, AgentRunSummary]:
    return {summary.run_id: summary for summary in page.runs}


@pytest.mark.anyio
async def test_summaries_say_what_each_run_waits_for() -> None:
    """Every summary field is read from the stored run state and record."""
    world = World()
    runs = await populated(world)
    before = time.time()
    page = await list_agent_runs(world.checkpoints)
    assert page.cursor is None
    found = by_run(page)
    assert set(found) == {runs[name].run_id for name in ("suspended", "succeeded", "stranded")}
    suspended = found[runs["suspended"].run_id]
    assert (suspended.session_id, suspended.agent_id) == ("s-a", "investigator")
    assert (suspended.status, suspended.version) == ("suspended", 1)
    assert (suspended.pending_decisions, suspended.in_doubt) == (2, ())
    assert suspended.lease_expires_at is None
    assert before - 60 < suspended.updated_at <= time.time()
    succeeded = found[runs["succeeded"].run_id]
    assert (succeeded.status, succeeded.pending_decisions, succeeded.in_doubt) == (
        "succeeded",
        0,
        (),
    )
    assert succeeded.version == runs["succeeded"].run_state.version
    stranded = found[runs["stranded"].run_id]
    assert (stranded.status, stranded.version, stranded.in_doubt) == ("running", 2, ("c1",))
    assert stranded.to_json() == {
        "run_id": stranded.run_id,
        "session_id": "s-c",
        "agent_id": "investigator",
        "status": "running",
        "version": 2,
        "updated_at": stranded.updated_at,
        "pending_decisions": 0,
        "in_doubt": ["c1"],
        "lease_expires_at": None,
        "started_by": None,
        "parent_run_id": None,
    }
    assert [s.run_id for s in page.runs] == sorted(found)


@pytest.mark.anyio
async def test_foreign_tenants_runs_are_invisible() -> None:
    """Ownership is matched exactly: each owner sees only its own runs."""
    world = World()
    runs = await populated(world)
    mine = await list_agent_runs(world.checkpoints, ownership=TENANT)
    assert [s.run_id for s in mine.runs] == [runs["tenant"].run_id]
    assert runs["tenant"].run_id not in by_run(await list_agent_runs(world.checkpoints))
    stranger = await list_agent_runs(world.checkpoints, ownership={"tenant_id": "t2"})
    assert stranger.runs == ()
    assert (await list_agent_runs(world.checkpoints, ownership={})).runs == (
        await list_agent_runs(world.checkpoints)
    ).runs


@pytest.mark.anyio
async def test_status_and_recoverable_filters() -> None:
    """A status keeps runs of that status; recoverable keeps running runs no worker holds."""
    world = World()
    runs = await populated(world)
    for status, name in (
        ("suspended", "suspended"),
        ("succeeded", "succeeded"),
        ("running", "stranded"),
    ):
        page = await list_agent_runs(world.checkpoints, status=status)
        assert [s.run_id for s in page.runs] == [runs[name].run_id]
    assert (await list_agent_runs(world.checkpoints, status="failed")).runs == ()
    recoverable = await list_agent_runs(world.checkpoints, recoverable=True)
    assert [s.run_id for s in recoverable.runs] == [runs["stranded"].run_id]
    held = await list_agent_runs(world.checkpoints, recoverable=False)
    assert {s.run_id for s in held.runs} == {
        runs["suspended"].run_id,
        runs["succeeded"].run_id,
    }
    assert (
        await list_agent_runs(world.checkpoints, status="suspended", recoverable=True)
    ).runs == ()
    summary = recoverable.runs[0]
    now = time.time()
    assert is_recoverable(summary, now=now)
    assert not is_recoverable(attrs.evolve(summary, lease_expires_at=now + 30), now=now)
    # A lease stays live for the clock-skew tolerance a continue applies, then has expired.
    skew = LEASE_CLOCK_SKEW_MS / 1000
    assert not is_recoverable(attrs.evolve(summary, lease_expires_at=now - skew / 2), now=now)
    assert is_recoverable(attrs.evolve(summary, lease_expires_at=now - skew - 1), now=now)
    assert not is_recoverable(attrs.evolve(summary, status="suspended"), now=now)


@pytest.mark.anyio
async def test_the_status_index_reads_only_matching_records() -> None:
    """With the index, a status filter reads only that status's records; without it, every
    record is decoded. Both give the same runs."""
    plain, indexed = World(), World()
    plain.checkpoints = RecordCounter()
    indexed.checkpoints = IndexedRecordCounter()
    assert not isinstance(plain.checkpoints, CheckpointStatusIndex)
    assert isinstance(indexed.checkpoints, CheckpointStatusIndex)
    for world in (plain, indexed):
        for index in range(6):
            await start(world, f"s-{index}", suspend=index < 5)
    results = []
    for world in (plain, indexed):
        store = world.checkpoints
        assert isinstance(store, RecordCounter)
        store.records_read = 0
        page = await list_agent_runs(store, status="succeeded")
        results.append(([s.session_id for s in page.runs], store.records_read))
    assert results == [(["s-5"], 6), (["s-5"], 1)]


@pytest.mark.anyio
@pytest.mark.parametrize("indexed", [True, False])
async def test_pages_cover_every_run_once(indexed: bool) -> None:
    """Paging with the cursor returns each matching run exactly once, with or without index."""
    world = World()
    if indexed:
        world.checkpoints = IndexedRecordCounter()
    for index in range(7):
        await start(world, f"s-{index}", suspend=index % 3 != 0)
    for filters, expected in (
        ({}, 7),
        ({"status": "suspended"}, 4),
        ({"recoverable": False}, 7),
    ):
        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            page = await list_agent_runs(world.checkpoints, limit=2, cursor=cursor, **filters)
            assert len(page.runs) <= 2
            seen.extend(s.run_id for s in page.runs)
            pages += 1
            cursor = page.cursor
            if cursor is None:
                break
        assert len(seen) == expected == len(set(seen))
        assert seen == sorted(seen)
        # A filter the store cannot apply may end on one empty page: more records followed.
        decoded = "recoverable" in filters or (filters and not indexed)
        assert pages - (expected + 1) // 2 in ((0, 1) if decoded else (0,))
    first = await list_agent_runs(world.checkpoints, status="suspended", limit=1)
    assert first.cursor is not None
    if indexed:
        # A status-index cursor is no position in the plain listing.
        with pytest.raises(InvalidCheckpointError):
            await list_agent_runs(world.checkpoints, limit=1, cursor=first.cursor)
    with pytest.raises(InvalidCheckpointError):
        await list_agent_runs(world.checkpoints, cursor="runs1.@@@")


@pytest.mark.anyio
async def test_a_deleted_run_does_not_break_the_next_page() -> None:
    """The run a page ended on may be deleted before the next page is asked for."""
    world = World()
    for index in range(5):
        await start(world, f"s-{index}", suspend=True)
    first = await list_agent_runs(world.checkpoints, recoverable=False, limit=2)
    last = first.runs[-1].run_id
    assert await world.checkpoints.delete(AGENT_RUN_NAMESPACE, last)
    rest = await list_agent_runs(world.checkpoints, recoverable=False, cursor=first.cursor)
    assert len(rest.runs) == 3
    assert all(s.run_id > last for s in rest.runs)


@pytest.mark.anyio
async def test_records_that_are_not_run_states_are_left_out() -> None:
    """A malformed record in the run namespace is skipped, never a failure of the listing."""
    world = World()
    run = await start(world, "s-a", suspend=True)
    await world.checkpoints.save(AGENT_RUN_NAMESPACE, "junk", {"status": "running"}, version=1)
    await world.checkpoints.save("other.namespace", "x", {"status": "suspended"}, version=1)
    page = await list_agent_runs(world.checkpoints)
    assert [s.run_id for s in page.runs] == [run.run_id]
    assert (await list_agent_runs(world.checkpoints, status="running")).runs == ()


@pytest.mark.anyio
@pytest.mark.parametrize(
    "kwargs",
    [
        {"status": "bogus"},
        {"status": 3},
        {"limit": 0},
        {"limit": 1001},
        {"recoverable": "yes"},
        {"cursor": 5},
        {"cursor": "nope"},
        {"ownership": {"tenant_id": 1}},
    ],
)
async def test_malformed_arguments_are_refused(kwargs: dict[str, Any]) -> None:
    """Bad filters and paging arguments raise ``InvalidCheckpointError``."""
    world = World()
    await start(world, "s-a", suspend=True)
    with pytest.raises(InvalidCheckpointError):
        await list_agent_runs(world.checkpoints, **kwargs)


@pytest.mark.anyio
async def test_a_run_id_alone_names_a_run() -> None:
    """Status and resume accept a ref without its session id; with a wrong session id the
    status reads as absent and a resume is refused with "Agent run session mismatch"."""
    world = World()
    run = await start(world, "s-a", suspend=True)
    status = await load_agent_run_state(world.checkpoints, {"run_id": run.run_id})
    assert status is not None
    assert status.state.session_id == "s-a"
    assert (
        await load_agent_run_state(world.checkpoints, {"run_id": run.run_id, "session_id": "s-b"})
        is None
    )
    agent = world.agent(TURNS, tools=[echo_tool()])
    with pytest.raises(AgentRunStateError) as mismatch:
        await resume_agent_run(
            agent,
            {"run_id": run.run_id, "session_id": "s-b"},
            {"expected_version": 1, "decision": "approve"},
            **world.resume_options(),
        )
    assert str(mismatch.value) == "Agent run session mismatch"
    assert not isinstance(mismatch.value, AgentRunNotFoundError)
    assert mismatch.value.code == "ERR_PRISM_AGENT_RUN_STATE"
    done = await resume_agent_run(
        agent,
        {"run_id": run.run_id},
        {"expected_version": 1, "decision": "approve"},
        **world.resume_options(),
    )
    assert (done.status, done.session_id, done.text) == ("succeeded", "s-a", "done")


@pytest.mark.anyio
async def test_a_run_id_alone_is_still_owner_scoped() -> None:
    """A tenant's run cannot be reached by its id without its ownership."""
    world = World()
    run = await start(world, "s-a", suspend=True, owner=TENANT)
    lifecycle = create_agent_run_lifecycle(
        checkpoints=world.checkpoints,
        resolve_agent=lambda agent_id: (world.agent(TURNS, tools=[echo_tool()]), REVISION),
    )
    assert await lifecycle.status({"run_id": run.run_id}) is None
    with pytest.raises(AgentRunStateError) as foreign:
        await lifecycle.resume({"run_id": run.run_id}, {"expected_version": 1, "decision": "deny"})
    # Another owner's run reads as absent: "No durable agent run <run id>".
    assert str(foreign.value) == f"No durable agent run {run.run_id}"
    assert isinstance(foreign.value, AgentRunNotFoundError)
    denied = await lifecycle.resume(
        {"run_id": run.run_id}, {"expected_version": 1, "decision": "deny"}, ownership=TENANT
    )
    assert denied.status == "denied"
