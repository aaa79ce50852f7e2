"""A stream only watches: a client that goes away mid-tool stops its stream, the run goes on to
its next stop and the tool's effect happens once; a resubscription observes the same run.
Through the official a2a-sdk client, against the test app in its own process."""

from __future__ import annotations

import contextlib
import time

import anyio
import pytest
from a2a.types import SendMessageRequest, SubscribeToTaskRequest, TaskState
from a2a.utils.errors import UnsupportedOperationError

from tests.effect_log import EffectLog

from ._support import (
    Server,
    a2a_client,
    answer_of,
    data_of,
    effects,
    get_task,
    order,
    states,
    text_message,
)

pytestmark = pytest.mark.anyio

DEADLINE_S = 60.0


async def started(server: Server, key: str) -> None:
    """Wait until the ``slow`` call of ``key`` has started in the server."""
    with anyio.fail_after(DEADLINE_S):
        while True:
            if f"slow-started {key}" in effects(server.effects):
                return
            await anyio.sleep(0.02)


async def finished(server: Server, task_id: str) -> object:
    """The task once it is completed (read with a client of its own)."""
    async with a2a_client(server.base) as client:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            task = await get_task(client, task_id)
            if task.status.state == TaskState.TASK_STATE_COMPLETED:
                return task
            assert time.monotonic() < deadline, task
            await anyio.sleep(0.05)


async def test_a_client_that_leaves_mid_tool_stops_only_its_stream(server: Server) -> None:
    key = order()
    async with a2a_client(server.base) as client:
        responses = client.send_message(SendMessageRequest(message=text_message(f"slow {key}")))
        async with contextlib.aclosing(responses):  # type: ignore[type-var]
            first = await anext(responses)
            assert first.task.status.state == TaskState.TASK_STATE_WORKING
            await started(server, key)
        # The client is gone (its stream closed, then its connection) while the tool runs.
    (server.release / key).touch()
    task = await finished(server, first.task.id)
    assert answer_of(task) == f"{key} is slow"  # type: ignore[arg-type]
    log = EffectLog(str(server.effect_log))
    assert log.applications("value").count(key) == 1
    assert effects(server.effects).count(f"slow-started {key}") == 1


async def test_a_resubscription_observes_the_run_to_its_next_stop(server: Server) -> None:
    key = order()
    async with a2a_client(server.base) as client:
        responses = client.send_message(SendMessageRequest(message=text_message(f"slow {key}")))
        async with contextlib.aclosing(responses):  # type: ignore[type-var]
            task_id = (await anext(responses)).task.id
            await started(server, key)
    async with a2a_client(server.base) as client:
        watched = client.subscribe(SubscribeToTaskRequest(id=task_id))
        async with contextlib.aclosing(watched):  # type: ignore[type-var]
            opening = await anext(watched)
            (server.release / key).touch()
            with anyio.fail_after(DEADLINE_S):
                rest = [response async for response in watched]
    assert opening.task.id == task_id
    assert opening.task.status.state == TaskState.TASK_STATE_WORKING
    assert states(rest) == [
        "TASK_STATE_WORKING",
        "TASK_STATE_WORKING",
        "artifact",
        "TASK_STATE_COMPLETED",
    ]
    call, result = (data_of(r.status_update.status.message) for r in rest[:2])
    assert call == [
        {"tool_call": {"tool_call_id": "s1", "tool_name": "slow", "arguments": {"order": key}}}
    ]
    assert result[0]["tool_result"]["value"] == {"order": key, "released": True}
    assert EffectLog(str(server.effect_log)).applications("value").count(key) == 1


async def test_a_finished_task_has_nothing_to_resubscribe_to(server: Server) -> None:
    async with a2a_client(server.base) as client:
        responses = client.send_message(SendMessageRequest(message=text_message("hello")))
        answered = [r async for r in responses]
        task_id = answered[0].task.id
        with pytest.raises(UnsupportedOperationError):
            async for _ in client.subscribe(SubscribeToTaskRequest(id=task_id)):
                pass
