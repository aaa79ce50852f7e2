"""Tasks outlive their server: ``tasks/get`` after a restart reads the checkpoint store, a
new server resumes or cancels a task a stopped one left waiting, and a SIGKILLed server's
waiting task is finished by a new one with each tool run exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest
from a2a.types import TaskState

from ._support import (
    Server,
    a2a_client,
    answer_of,
    cancel_task,
    decisions,
    effects,
    get_task,
    pending_of,
    send,
    task_id_of,
    text_message,
)

pytestmark = [pytest.mark.anyio, pytest.mark.long]


async def test_tasks_get_after_a_restart_reads_the_checkpoints(tmp_path: Path) -> None:
    db, ran = tmp_path / "prism.db", tmp_path / "effects"
    first = Server(db, ran)
    try:
        async with a2a_client(first.base) as client:
            done = await get_task(
                client, task_id_of(await send(client, text_message("lookup A-1")))
            )
            waiting = await get_task(
                client, task_id_of(await send(client, text_message("refund A-2")))
            )
    finally:
        first.stop()
    second = Server(db, ran)
    try:
        async with a2a_client(second.base) as client:
            done_again = await get_task(client, done.id)
            waiting_again = await get_task(client, waiting.id)
    finally:
        second.stop()
    assert done_again.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_of(done_again) == answer_of(done) == "A-1 is open"
    assert done_again.context_id == done.context_id
    assert [m.message_id for m in done_again.history][:1] == [done.history[0].message_id]
    assert waiting_again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert pending_of(waiting_again) == pending_of(waiting)
    assert effects(ran) == ["lookup A-1"]


async def test_a_new_server_resumes_and_cancels_what_a_stopped_one_left_waiting(
    tmp_path: Path,
) -> None:
    db, ran = tmp_path / "prism.db", tmp_path / "effects"
    first = Server(db, ran)
    try:
        async with a2a_client(first.base) as client:
            approve = task_id_of(await send(client, text_message("refund A-1")))
            deny = task_id_of(await send(client, text_message("refund A-2")))
            [pending] = pending_of(await get_task(client, approve))
    finally:
        first.stop()
    second = Server(db, ran)
    try:
        async with a2a_client(second.base) as client:
            entry = {"approval_id": pending["approval_id"], "outcome": "allow_once"}
            await send(client, decisions(approve, [entry]))
            approved = await get_task(client, approve)
            canceled = await cancel_task(client, deny)
            denied = await get_task(client, deny)
    finally:
        second.stop()
    assert approved.status.state == TaskState.TASK_STATE_COMPLETED
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert denied.status.state == TaskState.TASK_STATE_CANCELED
    assert effects(ran) == ["refund A-1"]


async def test_a_sigkilled_servers_waiting_task_is_finished_by_a_new_one(tmp_path: Path) -> None:
    db, ran = tmp_path / "prism.db", tmp_path / "effects"
    first = Server(db, ran)
    try:
        async with a2a_client(first.base) as client:
            responses = await send(client, text_message("lookup-refund A-7"))
            task_id = task_id_of(responses)
            before = await get_task(client, task_id)
    finally:
        first.kill()
    assert effects(ran) == ["lookup A-7"]
    second = Server(db, ran)
    try:
        async with a2a_client(second.base) as client:
            after_kill = await get_task(client, task_id)
            [pending] = pending_of(after_kill)
            entry = {"approval_id": pending["approval_id"], "outcome": "allow_once"}
            await send(client, decisions(task_id, [entry]))
            finished = await get_task(client, task_id)
    finally:
        second.stop()
    assert pending_of(before) == [pending]
    assert pending["tool_call_id"] == "x1"
    assert finished.status.state == TaskState.TASK_STATE_COMPLETED
    assert finished.context_id == before.context_id
    # Each tool ran once: the lookup before the kill, the refund after it; none ran again.
    assert effects(ran) == ["lookup A-7", "refund A-7"]
    assert "A-7" in answer_of(finished)
