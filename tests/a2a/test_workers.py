"""Deciding is not running: a ``decisions`` message is recorded (audited with the caller's actor
on the ``"a2a"`` channel) and run by a worker, the app's own or any other on the same stores;
the approved call runs once, in the worker. In-process, through the official client."""

from __future__ import annotations

import functools

import anyio
import pytest
from a2a.types import TaskState

from prism_a2a import create_a2a_app
from prism_core import (
    Principal,
    StorePair,
    create_memory_checkpoint_store,
    create_memory_session_store,
    load_agent_run_state,
    run_worker,
)

from .test_ordering import OWNER, build_agent, message, sent, served

pytestmark = pytest.mark.anyio


async def pending_approval(stores: StorePair, task_id: str) -> str:
    """The approval id the task waits for."""
    found = await load_agent_run_state(stores.checkpoints, {"run_id": task_id}, ownership=OWNER)
    assert found is not None
    assert found.state.interruption is not None
    [pending] = found.state.interruption.pending_decisions
    return pending.approval_id


async def test_a_decision_is_recorded_here_and_run_by_another_worker() -> None:
    stores = StorePair(create_memory_checkpoint_store(), create_memory_session_store())
    ran: list[str] = []
    async with served(stores, ran, workers=0) as client:
        waiting = await sent(client, message("refund A-7"))
        approval = await pending_approval(stores, waiting.id)
        batch = {"decisions": [{"approval_id": approval, "outcome": "allow_once"}]}
        outcome: dict[str, object] = {}
        answered = anyio.Event()

        async def decide() -> None:
            outcome["task"] = await sent(client, message(task_id=waiting.id, data=batch))
            answered.set()

        async with anyio.create_task_group() as group:
            group.start_soon(decide)
            with anyio.fail_after(30):
                while True:  # recorded: the run is running, with nobody running it
                    found = await load_agent_run_state(
                        stores.checkpoints, {"run_id": waiting.id}, ownership=OWNER
                    )
                    assert found is not None
                    if found.state.status == "running":
                        break
                    await anyio.sleep(0.01)
            await anyio.sleep(0.3)
            assert ran == []  # nothing ran in the request, nor in the app
            assert "task" not in outcome
            stop = anyio.Event()
            group.start_soon(
                functools.partial(
                    run_worker,
                    checkpoints=stores.checkpoints,
                    sessions=stores.sessions,
                    resolve_agent=lambda agent_id: (build_agent(ran), "desk-1"),
                    poll_ms=50,
                    stop=stop,
                )
            )
            with anyio.fail_after(30):
                await answered.wait()
            stop.set()
    task = outcome["task"]
    assert task.status.state == TaskState.TASK_STATE_COMPLETED  # type: ignore[attr-defined]
    assert ran == ["A-7"]
    found = await load_agent_run_state(stores.checkpoints, {"run_id": waiting.id}, ownership=OWNER)
    assert found is not None
    decision, receipt = found.state.audit
    assert (decision.actor, decision.channel, decision.outcome) == ("ana", "a2a", "allow_once")
    assert (receipt.outcome, receipt.channel) == ("executed", "worker")


async def test_the_apps_own_worker_runs_what_another_caller_decided() -> None:
    stores = StorePair(create_memory_checkpoint_store(), create_memory_session_store())
    ran: list[str] = []
    async with served(stores, ran) as client:
        waiting = await sent(client, message("refund A-8"))
    approval = await pending_approval(stores, waiting.id)
    batch = {"decisions": [{"approval_id": approval, "outcome": "allow_once"}]}
    async with served(stores, ran) as client:  # another process, as after a restart
        done = await sent(client, message(task_id=waiting.id, data=batch))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert ran == ["A-8"]
    found = await load_agent_run_state(stores.checkpoints, {"run_id": waiting.id}, ownership=OWNER)
    assert found is not None
    assert found.state.started_by == "ana"


def test_workers_must_be_a_count() -> None:
    stores = StorePair(create_memory_checkpoint_store(), create_memory_session_store())
    with pytest.raises(ValueError, match="workers"):
        create_a2a_app(
            build_agent([]),
            stores,
            definition_revision="desk-1",
            url="http://testserver/",
            authorize=lambda request: Principal(OWNER),
            workers=-1,
        )
