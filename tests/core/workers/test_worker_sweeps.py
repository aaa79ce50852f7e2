"""What a worker reads between a wake-up and a decided tool call: the marks alone, then the
continue at the version the mark names; the runs whose lease expired are listed at the
poll, and never less often than once a ``poll_ms`` however many wake-ups come."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from prism_core import create_memory_checkpoint_store, resume_agent_run
from prism_core.workers import _worker

from ..resume.test_decide_and_work import SLOW_POLL_MS, Fixture, until, worker


class Counted:
    """Counts the calls of one of the worker module's functions."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
        self.calls = 0
        original: Callable[..., Any] = getattr(_worker, name)

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return await original(*args, **kwargs)

        monkeypatch.setattr(_worker, name, counted)


def _memory_fixture() -> Fixture:
    """A refund run's fixture on a memory store, which wakes the workers of its process."""
    return Fixture(checkpoints=create_memory_checkpoint_store())


async def _swept(listings: Counted, at_least: int) -> None:
    async def done() -> bool:
        return listings.calls >= at_least

    await until(done)


@pytest.mark.anyio
async def test_a_wake_up_claims_the_marked_version_without_reading_the_run_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After its first sweep the worker waits; the decision's wake-up makes it list the
    marks alone (no listing of expired runs) and continue at the mark's version, with no
    read of the run of its own before the claim."""
    reads = Counted(monkeypatch, "load_agent_run_state")
    listings = Counted(monkeypatch, "list_agent_runs")
    fixture = _memory_fixture()
    run_id, version = await fixture.suspended()
    async with worker(fixture, poll_ms=SLOW_POLL_MS):
        await _swept(listings, 1)
        await fixture.decide(run_id, {"expected_version": version, "decision": "approve"})

        async def ran_and_dropped() -> bool:
            return fixture.log == ["A-3"] and await fixture.marks() == []

        await until(ran_and_dropped)
    assert reads.calls == 0
    assert listings.calls == 1


@pytest.mark.anyio
async def test_a_mark_whose_run_moved_on_is_read_and_dropped(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A mark older than its run (the run was continued elsewhere and finished): the claim at
    the mark's version is refused before anything is written, the worker reads the run,
    finds it stopped and deletes the mark; nothing runs twice and nothing is logged as
    left."""
    reads = Counted(monkeypatch, "load_agent_run_state")
    fixture = _memory_fixture()
    run_id, version = await fixture.suspended()
    await fixture.decide(run_id, {"expected_version": version, "decision": "approve"})
    result = await resume_agent_run(
        fixture.agent(),
        {"run_id": run_id},
        {"expected_version": version + 1, "decision": "continue"},
        **fixture.world.resume_options(),
    )
    assert result.status == "succeeded"
    assert fixture.log == ["A-3"]
    assert await fixture.marks() == [f"{run_id}@{version + 1}"]
    caplog.set_level(logging.WARNING, logger="prism_core.workers")
    async with worker(fixture, poll_ms=SLOW_POLL_MS):

        async def dropped() -> bool:
            return await fixture.marks() == []

        await until(dropped)
    assert reads.calls == 1
    assert fixture.log == ["A-3"]
    assert not [r for r in caplog.records if r.name == "prism_core.workers"]


@pytest.mark.anyio
async def test_expired_runs_are_listed_every_poll_even_under_a_storm_of_wake_ups(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Wake-ups every few milliseconds, a poll of 50 ms: the sweeps they cause list the
    marks alone, but the expired runs are still listed again and again."""
    listings = Counted(monkeypatch, "list_agent_runs")
    marks = Counted(monkeypatch, "list_work_marks")
    store = create_memory_checkpoint_store()
    fixture = Fixture(checkpoints=store)
    async with worker(fixture, poll_ms=50), anyio.create_task_group() as storm:

        async def wake_up_forever() -> None:
            while True:
                await store.notify_runs()
                await anyio.sleep(0.002)

        storm.start_soon(wake_up_forever)
        await _swept(listings, 4)
        storm.cancel_scope.cancel()
    assert marks.calls > listings.calls
