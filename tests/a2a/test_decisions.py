"""Resuming a waiting task with a ``decisions`` data part: approve, reject, edit, two
interrupts in one round, a partial batch; through the official a2a-sdk client."""

from __future__ import annotations

import json

import pytest

from ._support import (
    Server,
    a2a_client,
    answer_of,
    data_of,
    decisions,
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


def settled(task: object) -> list[object]:
    """The tool results the app's final answer lists."""
    text = answer_of(task)  # type: ignore[arg-type]
    assert text.startswith("refunds settled: "), text
    return list(json.loads(text[len("refunds settled: ") :]))


async def test_approve_runs_the_call_once(server: Server, protocol: str) -> None:
    refund = order()
    async with a2a_client(server.base, protocol=protocol) as client:
        task_id = task_id_of(await send(client, text_message(f"refund {refund}")))
        [pending] = pending_of(await get_task(client, task_id))
        entry = {"approval_id": pending["approval_id"], "outcome": "allow_once"}
        responses = await send(client, decisions(task_id, [entry]))
        task = await get_task(client, task_id)
    assert states(responses) == [
        "task:TASK_STATE_WORKING",
        "TASK_STATE_WORKING",
        "TASK_STATE_WORKING",
        "artifact",
        "TASK_STATE_COMPLETED",
    ]
    assert responses[0].task.id == task_id
    call = data_of(responses[1].status_update.status.message)
    arguments = {"order": refund, "amount": 150}
    assert call == [
        {"tool_call": {"tool_call_id": "r1", "tool_name": "refund", "arguments": arguments}}
    ]
    assert task.status.state == 3  # TASK_STATE_COMPLETED
    assert settled(task) == [{"refunded": refund, "amount": 150}]
    assert effects(server.effects).count(f"refund {refund}") == 1


async def test_reject_answers_the_model_and_runs_nothing(server: Server, protocol: str) -> None:
    refund = order()
    async with a2a_client(server.base, protocol=protocol) as client:
        task_id = task_id_of(await send(client, text_message(f"refund {refund}")))
        [pending] = pending_of(await get_task(client, task_id))
        entry = {
            "approval_id": pending["approval_id"],
            "outcome": "reject_once",
            "reason": "not this order",
        }
        responses = await send(client, decisions(task_id, [entry]))
        task = await get_task(client, task_id)
    assert states(responses)[-1] == "TASK_STATE_COMPLETED"
    [result] = settled(task)
    assert "error" in result
    assert "not this order" in result["error"]
    assert f"refund {refund}" not in effects(server.effects)


async def test_an_edit_runs_the_edited_arguments(server: Server) -> None:
    refund = order()
    async with a2a_client(server.base) as client:
        task_id = task_id_of(await send(client, text_message(f"refund {refund}")))
        [pending] = pending_of(await get_task(client, task_id))
        entry = {
            "approval_id": pending["approval_id"],
            "outcome": "allow_once",
            "modified_arguments": {"order": refund, "amount": 80},
        }
        await send(client, decisions(task_id, [entry]))
        task = await get_task(client, task_id)
    # The edited amount reached the tool as the integer 80 (a data part carries it as 80.0).
    assert settled(task) == [{"refunded": refund, "amount": 80}]
    assert '"amount": 80}' in answer_of(task)
    assert effects(server.effects).count(f"refund {refund}") == 1


async def test_two_interrupts_in_one_round_resolve_as_one_batch(
    server: Server, protocol: str
) -> None:
    first, second = order(), order()
    async with a2a_client(server.base, protocol=protocol) as client:
        task_id = task_id_of(await send(client, text_message(f"refund {first} {second}")))
        pending = pending_of(await get_task(client, task_id))
        assert [p["tool_call_id"] for p in pending] == ["r1", "r2"]
        assert len({p["approval_id"] for p in pending}) == 2
        batch = [
            {"approval_id": pending[0]["approval_id"], "outcome": "allow_once"},
            {"approval_id": pending[1]["approval_id"], "outcome": "reject_once"},
        ]
        await send(client, decisions(task_id, batch))
        task = await get_task(client, task_id)
    approved, rejected = settled(task)
    assert approved == {"refunded": first, "amount": 150}
    assert "error" in rejected
    ran = effects(server.effects)
    assert ran.count(f"refund {first}") == 1
    assert f"refund {second}" not in ran


async def test_a_partial_batch_leaves_the_rest_waiting(server: Server) -> None:
    first, second = order(), order()
    async with a2a_client(server.base) as client:
        task_id = task_id_of(await send(client, text_message(f"refund {first} {second}")))
        pending = pending_of(await get_task(client, task_id))
        one = [{"approval_id": pending[0]["approval_id"], "outcome": "allow_once"}]
        responses = await send(client, decisions(task_id, one))
        waiting = await get_task(client, task_id)
        [left] = pending_of(waiting)
        assert states(responses) == ["task:TASK_STATE_INPUT_REQUIRED"]
        assert left == pending[1]
        assert effects(server.effects).count(f"refund {first}") == 0
        other = [{"approval_id": left["approval_id"], "outcome": "allow_once"}]
        await send(client, decisions(task_id, other))
        task = await get_task(client, task_id)
    assert settled(task) == [
        {"refunded": first, "amount": 150},
        {"refunded": second, "amount": 150},
    ]
    ran = effects(server.effects)
    assert (ran.count(f"refund {first}"), ran.count(f"refund {second}")) == (1, 1)
