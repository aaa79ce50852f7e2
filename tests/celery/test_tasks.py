"""The run tasks on real workers: Celery on Redis, the stores on PostgreSQL.

Workers are ``celery -A tests.celery.app worker --pool=solo`` processes started by the test
and killed by pid; tools log their effects under ``context.idempotency_key``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import pytest

from .harness import Rig

pytestmark = pytest.mark.services


def once_each(rig: Rig, run_id: str, calls: int) -> list[dict[str, object]]:
    """The run's effects, having checked each of its ``calls`` tool calls applied exactly
    once (no idempotency key twice, none missing)."""
    effects = [e for e in rig.effects.entries() if e["run"] == run_id]
    keys = Counter(e["key"] for e in effects)
    assert keys, "the run applied no effect"
    assert max(keys.values()) == 1, f"an effect was applied twice: {keys}"
    assert sorted(e["call"] for e in effects) == [f"call_{i}" for i in range(calls)]
    return effects


def test_start_runs_a_durable_run_to_completion(rig: Rig) -> None:
    """``start`` returns the run's id, session and status; every tool ran once."""
    rig.start_worker()
    result = rig.tasks.start.delay("charger", "order-1", "charge every step").get(timeout=60)
    assert set(result) == {"run_id", "session_id", "status"}
    assert (result["session_id"], result["status"]) == ("order-1", "succeeded")
    (run,) = rig.runs()
    assert (run.run_id, run.status, run.agent_id) == (result["run_id"], "succeeded", "charger")
    once_each(rig, result["run_id"], 3)


def test_a_suspended_run_ends_its_task_and_resume_finishes_it(rig: Rig) -> None:
    """A run waiting for approval ends ``start`` as ``suspended``; the approval, enqueued as
    ``resume`` from elsewhere, runs the held deploy once and finishes the run."""
    rig.start_worker()
    started = rig.tasks.start.delay("deployer", "release-7", "ship it").get(timeout=60)
    assert started["status"] == "suspended"
    assert rig.effects.entries() == []
    (run,) = rig.runs()
    assert (run.status, run.pending_decisions, run.lease_expires_at) == ("suspended", 1, None)
    approval = {"expected_version": run.version, "decision": "approve"}
    done = rig.tasks.resume.delay(started["run_id"], approval).get(timeout=60)
    assert done == {**started, "status": "succeeded"}
    once_each(rig, started["run_id"], 1)


@pytest.mark.long
def test_a_redelivered_start_does_not_start_a_second_run(rig: Rig) -> None:
    """The same ``start`` delivered twice at once, to two workers, and once more afterwards:
    one run, every delivery reports it, every tool ran once."""
    rig.start_worker()
    rig.start_worker()
    first = rig.tasks.start.delay("charger", "order-2", "charge")
    second = rig.tasks.start.delay("charger", "order-2", "charge")
    results = [first.get(timeout=90), second.get(timeout=90)]
    late = rig.tasks.start.delay("charger", "order-2", "charge").get(timeout=60)
    (run,) = rig.runs()
    assert all(
        r == {"run_id": run.run_id, "session_id": "order-2", "status": "succeeded"}
        for r in [*results, late]
    )
    once_each(rig, run.run_id, 3)


@pytest.mark.long
def test_a_killed_worker_s_task_is_redelivered_and_continues_the_run(
    make_rig: Callable[..., Rig],
) -> None:
    """SIGKILL the worker mid-run: the broker redelivers ``start`` to a fresh worker, which
    continues the same run from its last checkpoint; each tool ran exactly once."""
    rig = make_rig(turns=5, think=0.3)
    doomed = rig.start_worker()
    pending = rig.tasks.start.delay("charger", "order-3", "charge")
    rig.wait_for(lambda: len(rig.effects.entries()) >= 2, 60, "no effect")
    killed_pid = rig.pid(doomed)
    rig.kill(doomed)
    assert len(rig.effects.entries()) < 5, "the run ended before the kill"
    rig.start_worker()
    result = pending.get(timeout=120)
    assert result["status"] == "succeeded"
    (run,) = rig.runs()
    effects = once_each(rig, run.run_id, 5)
    pids = [e["pid"] for e in effects]
    assert pids[0] == killed_pid
    assert pids[-1] != killed_pid


@pytest.mark.long
def test_a_live_lease_makes_the_task_retry_later(make_rig: Callable[..., Rig]) -> None:
    """``continue_run`` for a run another worker is on finds its lease live and retries,
    until the run is over; it runs no tool of its own."""
    # The run must outlast the continue's trip through the broker to the idle worker, even on
    # a loaded machine: a run that finished first answers the continue without a retry.
    rig = make_rig(turns=8, think=0.6)
    workers = [rig.start_worker(), rig.start_worker()]
    started = rig.tasks.start.delay("charger", "order-4", "charge")
    (first, *_) = rig.wait_for(lambda: rig.effects.entries(), 60, "no effect")
    (other,) = [name for name in workers if rig.pid(name) != first["pid"]]
    (run,) = rig.runs()
    assert run.status == "running"
    assert run.lease_expires_at is not None
    assert run.lease_expires_at > time.time()
    continued = rig.tasks.continue_run.delay(run.run_id).get(timeout=90)
    assert started.get(timeout=60) == continued
    assert continued == {"run_id": run.run_id, "session_id": "order-4", "status": "succeeded"}
    assert b"retry: Retry in" in rig.log(other).read_bytes()
    effects = once_each(rig, run.run_id, 8)
    assert {e["pid"] for e in effects} == {first["pid"]}


@pytest.mark.long
def test_sweep_enqueues_every_recoverable_run(make_rig: Callable[..., Rig]) -> None:
    """Two runs whose workers were killed (and whose messages the broker holds for an hour):
    ``sweep`` finds both once their leases expired and their continues finish them."""
    rig = make_rig(turns=4, think=0.3, visibility_timeout=3600)
    run_ids = []
    for index in range(2):
        worker = rig.start_worker()
        before = {e["run"] for e in rig.effects.entries()}
        rig.tasks.start.delay("charger", f"stranded-{index}", "charge")
        fresh = rig.wait_for(
            lambda before=before: {e["run"] for e in rig.effects.entries()} - before,
            60,
            "no effect",
        )
        rig.kill(worker)
        run_ids.extend(fresh)
    rig.start_worker()
    rig.wait_for(
        lambda: len(rig.recoverable()) == 2, 30, "the killed runs never became recoverable"
    )
    assert rig.tasks.sweep.delay().get(timeout=60) == 2
    rig.wait_for(
        lambda: [r.status for r in rig.runs()] == ["succeeded", "succeeded"],
        90,
        "the swept runs did not finish",
    )
    for run_id in run_ids:
        once_each(rig, run_id, 4)
