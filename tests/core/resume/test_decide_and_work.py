"""Decide here, run there (API.md, fourth round): ``decide_agent_run`` records decisions in one
compare-and-swap write and runs nothing; ``run_worker`` claims what was decided, under a
lease, and runs it once; a run a worker cannot continue is left as it is and logged once."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentRunStateError,
    ToolDefinition,
    create_agent_run_lifecycle,
    create_memory_checkpoint_store,
    decide_agent_run,
    list_agent_runs,
    load_agent_run_state,
    run_worker,
)
from prism_core.durable._work import WORK_NAMESPACE
from prism_core.errors import AgentDecisionError, PrismError
from prism_core.workers import WorkerConfigError

from ..durable_support import REVISION, World
from ..helpers import text_turn, tool_turn

SCRIPT = [tool_turn(("c1", "refund", {"order": "A-3"})), text_turn("refunded")]
#: Long enough that a test which waits for a worker's poll would time out first.
SLOW_POLL_MS = 600_000


def refund_tool(log: list[str]) -> ToolDefinition:
    """A ``refund`` tool that needs approval and logs each run."""

    def execute(args: dict[str, Any], context: Any) -> dict[str, Any]:
        log.append(args["order"])
        return {"refunded": args["order"]}

    return ToolDefinition(
        "refund",
        execute,
        parameters={"type": "object", "properties": {"order": {"type": "string"}}},
        needs_approval=True,
    )


class Fixture:
    """A suspended refund run on shared memory stores, and a resolver for workers."""

    def __init__(self, *, checkpoints: Any = None) -> None:
        self.world = World()
        if checkpoints is not None:
            self.world.checkpoints = checkpoints
        self.log: list[str] = []

    def agent(self) -> Any:
        return self.world.agent(SCRIPT, tools=[refund_tool(self.log)])

    def resolve(self, agent_id: str) -> tuple[Any, str]:
        assert agent_id == "investigator"
        return self.agent(), REVISION

    async def suspended(self) -> tuple[str, int]:
        result = (
            await self.agent()
            .create_session(id="s1")
            .run("refund A-3", run_state=self.world.run_state())
        )
        assert result.status == "suspended"
        assert result.run_state is not None
        return result.run_id, result.run_state.version

    async def decide(self, run_id: str, resume: Any) -> Any:
        return await decide_agent_run(
            self.agent(), {"run_id": run_id}, resume, **self.world.resume_options()
        )

    async def marks(self) -> list[str]:
        page = await self.world.checkpoints.list(WORK_NAMESPACE)
        return [record.key for record in page.records]


async def until(condition: Callable[[], Any], *, seconds: float = 60.0) -> None:
    """Wait (generously) for ``condition`` to hold; fail when it never does."""
    with anyio.fail_after(seconds):
        while True:
            if await condition():
                return
            await anyio.sleep(0.01)


@asynccontextmanager
async def worker(fixture: Fixture, **options: Any) -> AsyncIterator[anyio.Event]:
    """A ``run_worker`` on the fixture's stores, stopped when the block ends."""
    stop = anyio.Event()
    options.setdefault("resolve_agent", fixture.resolve)
    async with anyio.create_task_group() as group:
        group.start_soon(
            lambda: run_worker(
                checkpoints=fixture.world.checkpoints,
                sessions=fixture.world.sessions,
                stop=stop,
                **options,
            )
        )
        try:
            yield stop
        finally:
            stop.set()


@pytest.mark.anyio
async def test_a_decision_is_recorded_and_nothing_runs() -> None:
    """An approve through ``decide_agent_run`` is audited in one write, runs no tool, and
    leaves the run ``running`` with no lease: recoverable, and marked for a worker."""
    fixture = Fixture()
    run_id, version = await fixture.suspended()
    writes = fixture.world.checkpoints.saves
    status = await fixture.decide(
        run_id, {"expected_version": version, "decision": "approve", "actor": "ana"}
    )
    assert fixture.log == []
    assert status.state.status == "running"
    assert status.version == version + 1
    assert status.state.lease_expires_at is None
    assert [(r.actor, r.outcome) for r in status.audit] == [("ana", "allow_once")]
    # One compare-and-swap write of the run, then its work mark.
    assert fixture.world.checkpoints.saves == writes + 2
    assert await fixture.marks() == [f"{run_id}@{version + 1}"]
    page = await list_agent_runs(fixture.world.checkpoints, recoverable=True)
    assert [summary.run_id for summary in page.runs] == [run_id]


@pytest.mark.anyio
async def test_a_worker_runs_the_decided_call_once_and_drops_the_mark() -> None:
    """A worker claims the decided run under a lease, runs the approved call once, takes the
    run to its end and deletes the mark."""
    fixture = Fixture()
    run_id, version = await fixture.suspended()
    await fixture.decide(run_id, {"expected_version": version, "decision": "approve"})
    async with worker(fixture, poll_ms=10):

        async def finished() -> bool:
            status = await load_agent_run_state(fixture.world.checkpoints, {"run_id": run_id})
            return status is not None and status.state.status == "succeeded"

        await until(finished)
        await until(lambda: _empty(fixture))
    assert fixture.log == ["A-3"]


async def _empty(fixture: Fixture) -> bool:
    return await fixture.marks() == []


@pytest.mark.anyio
async def test_a_store_wake_up_reaches_an_idle_worker_without_its_poll() -> None:
    """On a store that wakes workers (the memory store does, in-process), a decision reaches
    a worker whose poll interval is far longer than the test may wait."""
    fixture = Fixture(checkpoints=create_memory_checkpoint_store())
    run_id, version = await fixture.suspended()
    async with worker(fixture, poll_ms=SLOW_POLL_MS):
        # Let the worker make its first (empty-handed) sweep and start waiting.
        await anyio.sleep(0.05)
        await fixture.decide(run_id, {"expected_version": version, "decision": "approve"})

        async def ran() -> bool:
            return fixture.log == ["A-3"]

        await until(ran, seconds=SLOW_POLL_MS / 1000 / 10)


@pytest.mark.anyio
async def test_deny_and_a_partial_batch_settle_without_a_mark() -> None:
    """A recorded deny ends the run ``denied``; neither it nor a partial batch leaves work."""
    fixture = Fixture()
    run_id, version = await fixture.suspended()
    status = await fixture.decide(
        run_id, {"expected_version": version, "decision": "deny", "reason": "no"}
    )
    assert status.state.status == "denied"
    assert await fixture.marks() == []
    assert fixture.log == []


@pytest.mark.anyio
async def test_a_refused_decision_writes_nothing() -> None:
    """A stale version and an unknown approval id are refused as a resume refuses them, and
    the record stays byte for byte as it was."""
    fixture = Fixture()
    run_id, version = await fixture.suspended()
    before = await fixture.world.checkpoints.raw(run_id)
    with pytest.raises(AgentRunStateError):
        await fixture.decide(run_id, {"expected_version": version + 5, "decision": "approve"})
    with pytest.raises(AgentDecisionError):
        await fixture.decide(
            run_id,
            {
                "expected_version": version,
                "decisions": [{"approval_id": "appr_nope", "outcome": "allow_once"}],
            },
        )
    assert await fixture.world.checkpoints.raw(run_id) == before
    assert await fixture.marks() == []
    # A second decision on a run already decided is stale: it is no longer suspended.
    await fixture.decide(run_id, {"expected_version": version, "decision": "approve"})
    with pytest.raises(AgentRunStateError):
        await fixture.decide(run_id, {"expected_version": version + 1, "decision": "approve"})


@pytest.mark.anyio
async def test_the_lifecycle_records_as_decide_agent_run_does() -> None:
    """``lifecycle.decide`` resolves the agent and records; the tool has not run."""
    fixture = Fixture()
    run_id, version = await fixture.suspended()
    lifecycle = create_agent_run_lifecycle(
        checkpoints=fixture.world.checkpoints, resolve_agent=fixture.resolve
    )
    status = await lifecycle.decide(
        {"run_id": run_id}, {"expected_version": version, "decision": "approve", "actor": "bo"}
    )
    assert (status.state.status, fixture.log) == ("running", [])
    assert [r.actor for r in status.audit] == ["bo"]


@pytest.mark.anyio
async def test_a_run_the_worker_cannot_continue_is_logged_once_and_left(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A decided run whose agent the host no longer serves stays as it is; the worker logs it
    once over many sweeps and does not retry it until its checkpoint changes."""
    fixture = Fixture()
    run_id, version = await fixture.suspended()
    await fixture.decide(run_id, {"expected_version": version, "decision": "approve"})
    before = await fixture.world.checkpoints.raw(run_id)
    sweeps = 0

    def gone(agent_id: str) -> Any:
        nonlocal sweeps
        sweeps += 1
        raise LookupError(agent_id)

    caplog.set_level(logging.WARNING, logger="prism_core.workers")
    async with worker(fixture, poll_ms=5, resolve_agent=gone):
        await anyio.sleep(0.3)
    left = [r for r in caplog.records if r.name == "prism_core.workers" and run_id in r.message]
    assert len(left) == 1
    assert sweeps == 1
    assert await fixture.world.checkpoints.raw(run_id) == before
    assert fixture.log == []


@pytest.mark.anyio
async def test_a_resolver_factory_is_entered_once_for_the_worker() -> None:
    """``resolve_agent`` may be an async context manager factory: entered once when the
    worker starts, left when it stops, its resolver used for every run."""
    fixture = Fixture()
    entered: list[str] = []

    @asynccontextmanager
    async def app() -> AsyncIterator[Any]:
        entered.append("enter")
        yield fixture.resolve
        entered.append("exit")

    run_id, version = await fixture.suspended()
    await fixture.decide(run_id, {"expected_version": version, "decision": "approve"})
    async with worker(fixture, poll_ms=10, resolve_agent=app):

        async def ran() -> bool:
            return fixture.log == ["A-3"]

        await until(ran)
        assert entered == ["enter"]
    assert entered == ["enter", "exit"]


@pytest.mark.parametrize(
    "options",
    [{"lease_ms": 10}, {"poll_ms": 0}, {"concurrency": True}, {"stop": "soon"}],
)
@pytest.mark.anyio
async def test_malformed_worker_options_are_refused_before_any_read(options: Any) -> None:
    """A bad lease, poll, concurrency or stop is a typed refusal; the store is not read."""
    fixture = Fixture()
    calls = fixture.world.checkpoints.calls
    with pytest.raises(WorkerConfigError) as caught:
        await run_worker(
            checkpoints=fixture.world.checkpoints,
            sessions=fixture.world.sessions,
            resolve_agent=fixture.resolve,
            **options,
        )
    assert isinstance(caught.value, PrismError)
    assert caught.value.code == "ERR_PRISM_WORKER_CONFIG"
    assert fixture.world.checkpoints.calls == calls


def test_the_run_namespace_and_the_work_namespace_differ() -> None:
    """Marks never share a namespace with run records (a listing of runs never sees them)."""
    assert WORK_NAMESPACE != AGENT_RUN_NAMESPACE


@pytest.mark.anyio
async def test_a_recorded_edit_runs_with_the_edited_arguments() -> None:
    """A decision that edits the call's arguments is recorded; the worker's continue checks
    the call against the edited arguments' hash and runs it with them, once."""
    fixture = Fixture()
    run_id, version = await fixture.suspended()
    status = await load_agent_run_state(fixture.world.checkpoints, {"run_id": run_id})
    assert status is not None
    assert status.state.interruption is not None
    (pending,) = status.state.interruption.pending_decisions
    await fixture.decide(
        run_id,
        {
            "expected_version": version,
            "decisions": [
                {
                    "approval_id": pending.approval_id,
                    "outcome": "allow_once",
                    "modified_arguments": {"order": "A-9"},
                }
            ],
        },
    )
    assert fixture.log == []
    async with worker(fixture, poll_ms=10):

        async def ran() -> bool:
            return fixture.log == ["A-9"]

        await until(ran)
