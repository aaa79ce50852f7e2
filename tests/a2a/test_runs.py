"""Tasks as durable runs, through the official a2a-sdk client: streaming, tool calls, answers,
contexts as sessions, and the checkpoint each task is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from a2a.helpers import new_text_part

from prism_core import load_agent_run_state
from prism_store_sql import open_sql_stores

from ._support import (
    Server,
    a2a_client,
    answer_of,
    data_message,
    data_of,
    effects,
    get_task,
    order,
    pending_of,
    send,
    states,
    task_id_of,
    text_message,
)

pytestmark = pytest.mark.anyio


async def stored_run(db: Path, run_id: str, owner: dict[str, str]) -> Any:
    """The run's state as its checkpoint records it, read from the server's database."""
    async with open_sql_stores(f"sqlite:///{db}") as stores:
        found = await load_agent_run_state(stores.checkpoints, {"run_id": run_id}, ownership=owner)
    assert found is not None
    return found.state


async def test_message_stream_sends_status_updates_in_order(server: Server, protocol: str) -> None:
    lookup = order()
    async with a2a_client(server.base, protocol=protocol) as client:
        responses = await send(client, text_message(f"lookup {lookup}"))
    assert states(responses) == [
        "task:TASK_STATE_WORKING",
        "TASK_STATE_WORKING",
        "TASK_STATE_WORKING",
        "artifact",
        "TASK_STATE_COMPLETED",
    ]
    opening = responses[0].task
    assert [part.text for part in opening.history[0].parts] == [f"lookup {lookup}"]
    call, result = (data_of(r.status_update.status.message) for r in responses[1:3])
    assert call == [
        {"tool_call": {"tool_call_id": "l1", "tool_name": "lookup", "arguments": {"order": lookup}}}
    ]
    assert result == [
        {
            "tool_result": {
                "tool_call_id": "l1",
                "tool_name": "lookup",
                "value": {"order": lookup, "state": "open"},
                "error": None,
            }
        }
    ]
    artifact = responses[3].artifact_update.artifact
    assert artifact.artifact_id == "answer"
    assert [part.text for part in artifact.parts] == [f"{lookup} is open"]
    assert effects(server.effects).count(f"lookup {lookup}") == 1


async def test_the_task_is_the_run_and_the_context_its_session(server: Server) -> None:
    async with a2a_client(server.base) as client:
        responses = await send(client, text_message("hello"))
        task = await get_task(client, task_id_of(responses))
    state = await stored_run(server.db, task.id, {"channel": "a2a"})
    assert state.run_id == task.id
    assert state.session_id == task.context_id
    assert state.status == "succeeded"
    assert state.checkpoint_policy == "every-turn"
    assert answer_of(task) == "hello back"
    assert [(m.role, m.parts[0].text) for m in task.history] == [(1, "hello"), (2, "hello back")]


async def test_message_send_answers_with_the_finished_task(server: Server, protocol: str) -> None:
    async with a2a_client(server.base, protocol=protocol, streaming=False) as client:
        [response] = await send(client, text_message("hello"))
    assert response.task.status.state == 3  # TASK_STATE_COMPLETED
    assert answer_of(response.task) == "hello back"


async def test_a_context_keeps_its_history_on_the_session_store(server: Server) -> None:
    async with a2a_client(server.base) as client:
        first = await get_task(client, task_id_of(await send(client, text_message("count"))))
        again = text_message("count", context_id=first.context_id)
        second = await get_task(client, task_id_of(await send(client, again)))
        elsewhere = await get_task(client, task_id_of(await send(client, text_message("count"))))
    assert answer_of(first) == "you said 1 things"
    assert answer_of(second) == "you said 2 things"
    assert second.context_id == first.context_id
    assert second.id != first.id
    assert answer_of(elsewhere) == "you said 1 things"
    assert elsewhere.context_id != first.context_id


async def test_a_gated_call_ends_the_stream_input_required(server: Server, protocol: str) -> None:
    refund = order()
    async with a2a_client(server.base, protocol=protocol) as client:
        responses = await send(client, text_message(f"refund {refund}"))
        task = await get_task(client, task_id_of(responses))
    assert states(responses) == ["task:TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED"]
    [pending] = pending_of(task)
    assert pending.keys() == {"approval_id", "tool_name", "tool_call_id", "kind", "reason"}
    assert pending["tool_name"] == "refund"
    assert pending["tool_call_id"] == "r1"
    assert pending["kind"] == "tool_approval"
    # The spec's ask reason: "Approval required by guardrail rule <name>: <reason>".
    expected = "Approval required by guardrail rule approve-refunds: refunds over 100 need approval"
    assert pending["reason"] == expected
    assert pending["approval_id"]
    assert data_of(responses[-1].status_update.status.message) == [{"pending_decisions": [pending]}]
    assert f"refund {refund}" not in effects(server.effects)


async def test_a_data_part_starts_a_task_with_its_json_as_input(
    server: Server, protocol: str
) -> None:
    """A task may start from structured data: each data part becomes compact JSON text (keys
    sorted, whole numbers as integers), each text part stays as it is, in order."""
    data = {"order": "A-7", "amount": 2, "lines": [{"sku": "x", "price": 2.5}]}
    alone = data_message("", data)
    alone.ClearField("task_id")
    async with a2a_client(server.base, protocol=protocol) as client:
        task = await get_task(client, task_id_of(await send(client, alone)))
    expected = '{"amount":2,"lines":[{"price":2.5,"sku":"x"}],"order":"A-7"}'
    assert answer_of(task) == f"you sent {expected}"
    assert [m.parts[0].text for m in task.history] == [expected, f"you sent {expected}"]
    state = await stored_run(server.db, task.id, {"channel": "a2a"})
    assert state.status == "succeeded"


async def test_text_and_data_parts_join_in_order(server: Server) -> None:
    message = data_message("", ["refund", "B-1"])
    message.ClearField("task_id")
    message.parts.append(new_text_part("as JSON above"))
    async with a2a_client(server.base) as client:
        task = await get_task(client, task_id_of(await send(client, message)))
    assert answer_of(task) == 'you sent ["refund","B-1"]\nas JSON above'
    assert "refund B-1" not in effects(server.effects)
