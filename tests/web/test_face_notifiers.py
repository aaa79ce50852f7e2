"""A face's notifiers: ``FaceWorkers`` delivers the stores' notifications (with workers, or
with a deliverer of its own when it runs none), and AG-UI hosts its runs with ``notify``."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from prism_agui._agent import AgentFactory
from prism_core import (
    Notification,
    NotifierConfigError,
    Principal,
    RunStateOptions,
    StorePair,
    ToolDefinition,
    create_agent,
    create_memory_checkpoint_store,
    create_memory_session_store,
)
from prism_web import FaceWorkers
from tests.core.durable_support import by_history
from tests.core.helpers import text_turn, tool_turn


class Collect:
    name = "collect"

    def __init__(self) -> None:
        self.got: list[Notification] = []
        self.arrived = anyio.Event()

    async def deliver(self, notification: Notification) -> None:
        self.got.append(notification)
        self.arrived.set()


def _agent(stores: StorePair) -> Any:
    return create_agent(
        id="desk",
        model={"provider": "mock", "model": "m"},
        provider=by_history([tool_turn(("r1", "refund", {"amount": 5})), text_turn("ok")]),
        store=stores.sessions,
        tools=[ToolDefinition("refund", lambda args, ctx: "ok", needs_approval=True)],
    )


@pytest.mark.anyio
@pytest.mark.parametrize("workers", [0, 1])
async def test_face_workers_deliver_with_or_without_workers(workers: int) -> None:
    stores = StorePair(create_memory_checkpoint_store(), create_memory_session_store())
    result = await (
        _agent(stores)
        .create_session(id="s1")
        .run("go", run_state=RunStateOptions(stores.checkpoints, "rev", notify=True))
    )
    assert result.status == "suspended"
    collect = Collect()
    faces = FaceWorkers(
        stores, lambda agent_id: None, workers=workers, lease_ms=30000, notifiers=[collect]
    )
    faces.ensure_started()
    try:
        with anyio.fail_after(60):
            await collect.arrived.wait()
    finally:
        await faces.aclose()
    (got,) = collect.got
    assert (got.event, got.run_id) == ("suspended", result.run_id)


def test_agui_hosts_its_runs_with_notify_when_it_has_notifiers() -> None:
    stores = StorePair(create_memory_checkpoint_store(), create_memory_session_store())
    quiet = AgentFactory(_agent(stores), stores=stores, revision="rev")
    loud = AgentFactory(_agent(stores), stores=stores, revision="rev", notifiers=[Collect()])
    caller = Principal(ownership={"tenant_id": "t"})
    assert quiet.for_caller(caller).config.run_state.notify is False
    assert loud.for_caller(caller).config.run_state.notify is True
    with pytest.raises(NotifierConfigError):
        FaceWorkers(stores, lambda agent_id: None, workers=1, lease_ms=30000, notifiers=[1])
