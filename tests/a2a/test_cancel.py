"""``tasks/cancel``: a task that waits for input is denied (state ``canceled``, its gated call
never runs); any other task is not cancelable."""

from __future__ import annotations

from pathlib import Path

import pytest
from a2a.types import TaskState
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError, UnsupportedOperationError

from prism_core import load_agent_run_state
from prism_store_sql import open_sql_stores

from ._support import (
    Server,
    a2a_client,
    cancel_task,
    decisions,
    effects,
    get_task,
    order,
    pending_of,
    send,
    task_id_of,
    text_message,
)

pytestmark = pytest.mark.anyio


async def run_status(db: Path, run_id: str) -> str:
    """The run's status in the server's checkpoint store."""
    async with open_sql_stores(f"sqlite:///{db}") as stores:
        found = await load_agent_run_state(
            stores.checkpoints, {"run_id": run_id}, ownership={"channel": "a2a"}
        )
    assert found is not None
    return found.state.status


async def test_cancel_denies_a_waiting_task(server: Server, protocol: str) -> None:
    """CORE-CANCEL-001: the answer is the task, canceled."""
    refund = order()
    async with a2a_client(server.base, protocol=protocol) as client:
        task_id = task_id_of(await send(client, text_message(f"refund {refund}")))
        [pending] = pending_of(await get_task(client, task_id))
        canceled = await cancel_task(client, task_id)
        read = await get_task(client, task_id)
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        assert read.status.state == TaskState.TASK_STATE_CANCELED
        assert await run_status(server.db, task_id) == "denied"
        late = [{"approval_id": pending["approval_id"], "outcome": "allow_once"}]
        with pytest.raises(UnsupportedOperationError):
            await send(client, decisions(task_id, late))
        with pytest.raises(TaskNotCancelableError):
            await cancel_task(client, task_id)
    assert f"refund {refund}" not in effects(server.effects)


async def test_a_finished_task_is_not_cancelable(server: Server) -> None:
    """CORE-CANCEL-002."""
    async with a2a_client(server.base) as client:
        task_id = task_id_of(await send(client, text_message("hello")))
        with pytest.raises(TaskNotCancelableError) as caught:
            await cancel_task(client, task_id)
        assert caught.value.data == {"code": "ERR_PRISM_A2A_NOT_CANCELABLE"}
        assert (await get_task(client, task_id)).status.state == TaskState.TASK_STATE_COMPLETED
    assert await run_status(server.db, task_id) == "succeeded"


async def test_an_unknown_task_cannot_be_canceled(server: Server) -> None:
    """CORE-CANCEL-003."""
    async with a2a_client(server.base) as client:
        with pytest.raises(TaskNotFoundError):
            await cancel_task(client, "run_0123456789abcdef")
