"""Refusals over A2A: every bad batch is a JSON-RPC error naming the Prism code, nothing
runs, and the task stays answerable; ``continue`` is never reachable."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from a2a.client import Client
from a2a.helpers import new_data_part, new_raw_part, new_text_part, new_url_part
from a2a.types import Part
from a2a.utils.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InvalidParamsError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from ._support import (
    Server,
    a2a_client,
    answer_of,
    cancel_task,
    data_message,
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


async def refused(
    client: Client, message: Any, error: type[A2AError], code: str, protocol: str = "1.0"
) -> A2AError:
    """Send ``message`` and expect the JSON-RPC ``error`` naming ``code`` in its message and
    (1.0: the client reads 0.3's error data as nothing) its data."""
    with pytest.raises(error) as caught:
        await send(client, message)
    assert str(caught.value).startswith(f"{code}: ")
    assert caught.value.data == ({"code": code} if protocol == "1.0" else None), caught.value
    return caught.value


async def waiting(client: Client, text: str) -> tuple[str, list[dict[str, Any]]]:
    """A new task of ``text`` that waits for decisions: its id and pending decisions."""
    task_id = task_id_of(await send(client, text_message(text)))
    return task_id, pending_of(await get_task(client, task_id))


async def test_an_unknown_approval_id_is_refused_and_the_task_stays_answerable(
    server: Server, protocol: str
) -> None:
    refund = order()
    async with a2a_client(server.base, protocol=protocol) as client:
        task_id, [pending] = await waiting(client, f"refund {refund}")
        unknown = [{"approval_id": "appr_not_pending", "outcome": "allow_once"}]
        await refused(
            client,
            decisions(task_id, unknown),
            InvalidParamsError,
            "ERR_PRISM_DECISION_UNKNOWN",
            protocol,
        )
        assert pending_of(await get_task(client, task_id)) == [pending]
        assert f"refund {refund}" not in effects(server.effects)
        good = [{"approval_id": pending["approval_id"], "outcome": "allow_once"}]
        await send(client, decisions(task_id, good))
        assert (await get_task(client, task_id)).status.state == 3  # TASK_STATE_COMPLETED
    assert effects(server.effects).count(f"refund {refund}") == 1


async def test_a_stale_approval_id_of_an_earlier_suspension_is_refused(server: Server) -> None:
    first, second = order(), order()
    async with a2a_client(server.base) as client:
        task_id, [earlier] = await waiting(client, f"refund-twice {first} {second}")
        stale = [{"approval_id": earlier["approval_id"], "outcome": "allow_once"}]
        await send(client, decisions(task_id, stale))
        [later] = pending_of(await get_task(client, task_id))
        assert later["approval_id"] != earlier["approval_id"]
        assert effects(server.effects).count(f"refund {first}") == 1
        await refused(
            client, decisions(task_id, stale), InvalidParamsError, "ERR_PRISM_DECISION_UNKNOWN"
        )
        assert pending_of(await get_task(client, task_id)) == [later]
        assert f"refund {second}" not in effects(server.effects)
        now = [{"approval_id": later["approval_id"], "outcome": "allow_once"}]
        await send(client, decisions(task_id, now))
        assert "refunds settled" in answer_of(await get_task(client, task_id))
    ran = effects(server.effects)
    assert (ran.count(f"refund {first}"), ran.count(f"refund {second}")) == (1, 1)


async def test_a_replayed_batch_is_refused(server: Server) -> None:
    refund = order()
    async with a2a_client(server.base) as client:
        task_id, [pending] = await waiting(client, f"refund {refund}")
        batch = [{"approval_id": pending["approval_id"], "outcome": "allow_once"}]
        await send(client, decisions(task_id, batch))
        await refused(
            client,
            decisions(task_id, batch),
            UnsupportedOperationError,
            "ERR_PRISM_AGENT_RUN_STATE",
        )
        assert (await get_task(client, task_id)).status.state == 3  # TASK_STATE_COMPLETED
    assert effects(server.effects).count(f"refund {refund}") == 1


async def test_a_decision_replayed_within_a_round_is_refused(server: Server) -> None:
    first, second = order(), order()
    async with a2a_client(server.base) as client:
        task_id, pending = await waiting(client, f"refund {first} {second}")
        one = [{"approval_id": pending[0]["approval_id"], "outcome": "allow_once"}]
        await send(client, decisions(task_id, one))
        await refused(
            client, decisions(task_id, one), InvalidParamsError, "ERR_PRISM_DECISION_UNKNOWN"
        )
        twice = [one[0], one[0]]
        await refused(
            client, decisions(task_id, twice), InvalidParamsError, "ERR_PRISM_DECISION_DUPLICATE"
        )
        assert pending_of(await get_task(client, task_id)) == [pending[1]]
    assert f"refund {first}" not in effects(server.effects)


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param({"order": "not an order", "amount": 80}, id="schema"),
        pytest.param({"order": "A-1", "amount": 80, "note": "x"}, id="extra-key"),
        pytest.param({"order": "A-1", "amount": 500}, id="guardrail"),
    ],
)
async def test_an_invalid_edit_is_refused_and_nothing_runs(
    server: Server, edit: dict[str, Any]
) -> None:
    refund = order()
    async with a2a_client(server.base) as client:
        task_id, [pending] = await waiting(client, f"refund {refund}")
        entry = {"approval_id": pending["approval_id"], "outcome": "allow_once"}
        bad = decisions(task_id, [{**entry, "modified_arguments": edit}])
        await refused(client, bad, InvalidParamsError, "ERR_PRISM_DECISION_INVALID")
        assert pending_of(await get_task(client, task_id)) == [pending]
        await send(client, decisions(task_id, [entry]))
    ran = effects(server.effects)
    assert ran.count(f"refund {refund}") == 1
    assert "refund A-1" not in ran


@pytest.mark.parametrize(
    "part",
    [
        pytest.param({"decision": "continue"}, id="continue"),
        pytest.param({"decision": "approve"}, id="approve"),
        pytest.param({"decisions": [], "decision": "continue"}, id="beside-a-batch"),
        pytest.param(
            {"decisions": [], "resolutions": [{"tool_call_id": "r1", "outcome": "completed"}]},
            id="resolutions",
        ),
    ],
)
async def test_no_resume_input_but_a_decisions_batch_is_reachable(
    server: Server, part: dict[str, Any]
) -> None:
    refund = order()
    async with a2a_client(server.base) as client:
        task_id, [pending] = await waiting(client, f"refund {refund}")
        await refused(
            client, data_message(task_id, part), InvalidParamsError, "ERR_PRISM_A2A_INPUT"
        )
        assert pending_of(await get_task(client, task_id)) == [pending]
    assert f"refund {refund}" not in effects(server.effects)


async def test_a_continue_outcome_is_refused_by_the_kernel(server: Server) -> None:
    refund = order()
    async with a2a_client(server.base) as client:
        task_id, [pending] = await waiting(client, f"refund {refund}")
        entry = {"approval_id": pending["approval_id"], "outcome": "continue"}
        await refused(
            client, decisions(task_id, [entry]), InvalidParamsError, "ERR_PRISM_DECISION_INVALID"
        )
        assert pending_of(await get_task(client, task_id)) == [pending]
    assert f"refund {refund}" not in effects(server.effects)


async def test_a_waiting_task_takes_decisions_not_text(server: Server) -> None:
    refund = order()
    async with a2a_client(server.base) as client:
        task_id, [pending] = await waiting(client, f"refund {refund}")
        text = text_message("yes, go ahead")
        text.task_id = task_id
        await refused(client, text, InvalidParamsError, "ERR_PRISM_A2A_INPUT")
        assert pending_of(await get_task(client, task_id)) == [pending]


async def test_a_new_task_needs_input_and_takes_no_decisions(server: Server) -> None:
    """A blank message starts nothing; a ``decisions`` batch without a ``taskId`` is refused
    rather than becoming a new run's prompt."""
    blank = text_message("   ")
    batch = data_message("", {"decisions": [{"approval_id": "appr_x", "outcome": "allow_once"}]})
    batch.ClearField("task_id")
    async with a2a_client(server.base) as client:
        for message in (blank, batch):
            await refused(client, message, InvalidParamsError, "ERR_PRISM_A2A_INPUT")


UNREAD_PARTS = [
    pytest.param(new_raw_part(b"tck", "application/x-unsupported-tck-type"), id="raw"),
    pytest.param(new_raw_part(b"%PDF-1.7", filename="a.pdf"), id="raw-untyped"),
    pytest.param(new_url_part("https://example.com/a.png", "image/png"), id="url"),
    pytest.param(new_text_part("<p>hi</p>", "text/html"), id="html-text"),
    pytest.param(new_data_part({"a": 1}, "application/xml"), id="xml-data"),
]


@pytest.mark.parametrize("part", UNREAD_PARTS)
async def test_a_part_the_agent_does_not_read_is_content_type_not_supported(
    server: Server, part: Part
) -> None:
    """CORE-SEND-003: a part of a media type the agent does not read (it reads text/plain
    text and application/json data) is ``ContentTypeNotSupportedError``, alone or beside
    text, and nothing starts."""
    alone = text_message("unused")
    del alone.parts[:]
    alone.parts.append(part)
    beside = text_message("lookup A-2")
    beside.parts.append(part)
    async with a2a_client(server.base) as client:
        for message in (alone, beside):
            await refused(
                client, message, ContentTypeNotSupportedError, "ERR_PRISM_A2A_CONTENT_TYPE"
            )
    assert "lookup A-2" not in effects(server.effects)


async def test_a_file_part_is_refused_over_0_3_too(server: Server) -> None:
    message = text_message("lookup A-3")
    message.parts.append(new_raw_part(b"tck", "application/octet-stream", "a.bin"))
    async with a2a_client(server.base, protocol="0.3") as client:
        await refused(
            client, message, ContentTypeNotSupportedError, "ERR_PRISM_A2A_CONTENT_TYPE", "0.3"
        )
    assert "lookup A-3" not in effects(server.effects)


async def test_a_waiting_task_refuses_a_part_it_does_not_read(server: Server) -> None:
    refund = order()
    async with a2a_client(server.base) as client:
        task_id, [pending] = await waiting(client, f"refund {refund}")
        batch = [{"approval_id": pending["approval_id"], "outcome": "allow_once"}]
        with_file = decisions(task_id, batch)
        with_file.parts.append(new_url_part("https://example.com/receipt.pdf", "application/pdf"))
        await refused(client, with_file, ContentTypeNotSupportedError, "ERR_PRISM_A2A_CONTENT_TYPE")
        assert pending_of(await get_task(client, task_id)) == [pending]
    assert f"refund {refund}" not in effects(server.effects)


async def test_a_message_on_a_finished_task_is_an_unsupported_operation(
    server: Server, protocol: str
) -> None:
    """CORE-SEND-002: a completed or canceled task takes no more messages, whatever they
    hold: ``UnsupportedOperationError``, not a complaint about the message."""
    refund = order()
    async with a2a_client(server.base, protocol=protocol) as client:
        completed = task_id_of(await send(client, text_message("hello")))
        canceled, _ = await waiting(client, f"refund {refund}")
        await cancel_task(client, canceled)
        for task_id in (completed, canceled):
            follow_up = text_message("and one more thing")
            follow_up.task_id = task_id
            error = await refused(
                client,
                follow_up,
                UnsupportedOperationError,
                "ERR_PRISM_AGENT_RUN_STATE",
                protocol,
            )
            assert "has ended" in str(error)
        assert (await get_task(client, completed)).status.state == 3  # TASK_STATE_COMPLETED
        assert (await get_task(client, canceled)).status.state == 5  # TASK_STATE_CANCELED
    assert f"refund {refund}" not in effects(server.effects)


async def test_a_decisions_message_carries_nothing_else(server: Server) -> None:
    refund = order()
    async with a2a_client(server.base) as client:
        task_id, [pending] = await waiting(client, f"refund {refund}")
        batch = [{"approval_id": pending["approval_id"], "outcome": "allow_once"}]
        chatty = decisions(task_id, batch)
        chatty.parts.append(new_text_part("approved, go ahead"))
        await refused(client, chatty, InvalidParamsError, "ERR_PRISM_A2A_INPUT")
        assert pending_of(await get_task(client, task_id)) == [pending]
    assert f"refund {refund}" not in effects(server.effects)


async def test_two_racing_batches_run_the_call_once(server: Server) -> None:
    refund = order()
    async with a2a_client(server.base) as client:
        task_id, [pending] = await waiting(client, f"refund {refund}")
        batch = [{"approval_id": pending["approval_id"], "outcome": "allow_once"}]
        outcomes = await asyncio.gather(
            send(client, decisions(task_id, batch)),
            send(client, decisions(task_id, batch)),
            return_exceptions=True,
        )
        task = await get_task(client, task_id)
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(errors) == 1, outcomes
    [error] = errors
    assert isinstance(error, UnsupportedOperationError), error
    assert error.data is not None
    assert error.data["code"] in ("ERR_PRISM_CHECKPOINT_CONFLICT", "ERR_PRISM_AGENT_RUN_STATE")
    assert task.status.state == 3  # TASK_STATE_COMPLETED
    assert effects(server.effects).count(f"refund {refund}") == 1


async def test_an_unknown_task_is_not_found(server: Server) -> None:
    batch = [{"approval_id": "appr_x", "outcome": "allow_once"}]
    async with a2a_client(server.base) as client:
        with pytest.raises(TaskNotFoundError):
            await send(client, decisions("run_0123456789abcdef", batch))
        with pytest.raises(TaskNotFoundError):
            await get_task(client, "run_0123456789abcdef")


async def test_a_context_takes_no_new_task_while_one_waits(server: Server) -> None:
    refund = order()
    async with a2a_client(server.base) as client:
        task_id, [pending] = await waiting(client, f"refund {refund}")
        context_id = (await get_task(client, task_id)).context_id
        busy = text_message("hello", context_id=context_id)
        error = await refused(client, busy, InvalidParamsError, "ERR_PRISM_A2A_CONTEXT")
        assert task_id in str(error)
        batch = [{"approval_id": pending["approval_id"], "outcome": "reject_once"}]
        await send(client, decisions(task_id, batch))
        after = await get_task(client, task_id_of(await send(client, busy)))
    assert after.context_id == context_id
    assert answer_of(after) == "hello back"
