"""A2A 1.0 (JSON-RPC) MUST requirements as the A2A TCK names them, through the official a2a-sdk
client (the wire itself where a requirement is about the wire). Each test names the
requirements it checks; those checked elsewhere: CARD-STRUCT-001 (``test_card``),
CORE-SEND-002 and CORE-SEND-003 (``test_refusals``), CORE-LIST-001..005 and DM-SERIAL-003
(``test_list_tasks``), CORE-CANCEL-001..003 (``test_cancel``).

In Prism a task waits for input (``input-required``) only before a gated call, so the
requirements about a waiting task use a refund over 100 of the test app."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import anyio
import httpx
import pytest
from a2a.client import Client
from a2a.types import (
    GetTaskRequest,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError

from ._support import (
    Server,
    a2a_client,
    answer_of,
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

V1 = {"A2A-Version": "1.0"}
UPPER_SNAKE = re.compile(r"^[A-Z][A-Z0-9_]*$")
TERMINAL = {TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED}
TERMINAL |= {TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_REJECTED}


def rpc(server: Server, method: str, params: dict[str, Any], **headers: str) -> dict[str, Any]:
    """One JSON-RPC call in A2A 1.0 (or with ``headers``); the whole response object."""
    body = {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": params}
    answer = httpx.post(server.base + "/", json=body, headers={**V1, **headers}, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    reply: dict[str, Any] = answer.json()
    assert reply["jsonrpc"] == "2.0"
    assert reply["id"] == body["id"]
    return reply


def wire_message(text: str, **fields: Any) -> dict[str, Any]:
    """A 1.0 user message as JSON."""
    return {
        "message": {
            "role": "ROLE_USER",
            "messageId": uuid.uuid4().hex,
            "parts": [{"text": text}],
            **fields,
        }
    }


def error_info(reply: dict[str, Any]) -> dict[str, Any]:
    """The ``google.rpc.ErrorInfo`` of an error reply (JSONRPC-ERR-001, JSONRPC-ERR-003)."""
    error = reply["error"]
    assert isinstance(error["code"], int)
    assert isinstance(error["message"], str)
    assert error["message"]
    assert isinstance(error["data"], list)
    [info] = [d for d in error["data"] if d["@type"].endswith("google.rpc.ErrorInfo")]
    assert UPPER_SNAKE.match(info["reason"]), info
    assert info["domain"] == "a2a-protocol.org"
    return dict(info)


async def waiting_task(client: Client) -> Task:
    """A new task that waits for a decision (a refund over 100)."""
    task_id = task_id_of(await send(client, text_message(f"refund {order()}")))
    task = await get_task(client, task_id)
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    return task


async def test_send_message_returns_a_task_with_fresh_ids(server: Server) -> None:
    """CORE-SEND-001, CORE-MULTI-001a, CORE-MULTI-003, DM-TASK-001, DM-STATUS-001: a blocking
    SendMessage answers with a Task: a new task id each time, the context id it generated,
    a status with a state."""
    async with a2a_client(server.base, streaming=False) as client:
        [first] = await send(client, text_message("hello"))
        [second] = await send(client, text_message("hello"))
    for response in (first, second):
        assert response.HasField("task")
        assert response.task.id
        assert response.task.context_id
        assert response.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert first.task.id != second.task.id
    assert first.task.context_id != second.task.context_id


async def test_blocking_send_waits_for_a_terminal_or_interrupted_state(server: Server) -> None:
    """CORE-EXECUTION-MODE-001: without ``returnImmediately`` the answer comes when the task
    is completed, or interrupted (``input-required``)."""
    async with a2a_client(server.base, streaming=False) as client:
        [done] = await send(client, text_message(f"lookup {order()}"))
        [interrupted] = await send(client, text_message(f"refund {order()}"))
    assert done.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_of(done.task).endswith(" is open")
    assert interrupted.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert pending_of(interrupted.task)[0]["tool_name"] == "refund"


async def test_return_immediately_answers_with_the_task_that_goes_on(server: Server) -> None:
    """CORE-EXECUTION-MODE-002: with ``returnImmediately`` the answer is the task as it is
    then; the task goes on to its end and ``GetTask`` shows it (within 60 s)."""
    lookup = order()
    request = SendMessageRequest(
        message=text_message(f"lookup {lookup}"),
        configuration=SendMessageConfiguration(return_immediately=True),
    )
    async with a2a_client(server.base, streaming=False) as client:
        [response] = [r async for r in client.send_message(request)]
        assert response.HasField("task")
        task = response.task
        with anyio.fail_after(60):
            while task.status.state not in TERMINAL:
                await anyio.sleep(0.05)
                task = await get_task(client, response.task.id)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_of(task) == f"{lookup} is open"


async def test_a_stream_opens_with_the_task_and_ends_at_its_terminal_state(
    server: Server,
) -> None:
    """CORE-STREAM-001, CORE-STREAM-003: the stream's first event is the Task, then updates;
    the last is the terminal status, and the stream closes there."""
    async with a2a_client(server.base) as client:
        responses = await send(client, text_message(f"lookup {order()}"))
    seen = states(responses)
    assert seen[0].startswith("task:")
    assert seen[-1] == "TASK_STATE_COMPLETED"
    assert "TASK_STATE_COMPLETED" not in seen[:-1]


def test_the_stream_is_server_sent_events_of_json_rpc_responses(server: Server) -> None:
    """JSONRPC-SSE-001, JSONRPC-FMT-001, JSONRPC-SVC-001: ``SendStreamingMessage`` answers
    ``text/event-stream``; each event's data is a JSON-RPC response wrapping one
    StreamResponse (``task``, ``statusUpdate``, ``artifactUpdate``)."""
    body = {
        "jsonrpc": "2.0",
        "id": "s-1",
        "method": "SendStreamingMessage",
        "params": wire_message("hello"),
    }
    results = []
    headers = {**V1, "accept": "text/event-stream"}
    with httpx.stream("POST", server.base + "/", json=body, headers=headers, timeout=30) as answer:
        assert answer.headers["content-type"].startswith("text/event-stream")
        for line in answer.iter_lines():
            if line.startswith("data:"):
                event = json.loads(line[len("data:") :])
                assert (event["jsonrpc"], event["id"]) == ("2.0", "s-1")
                results.append(event["result"])
    kinds = [next(iter(result)) for result in results]
    assert kinds[0] == "task"
    assert set(kinds[1:]) <= {"statusUpdate", "artifactUpdate"}
    assert results[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_get_task_reads_the_current_state(server: Server) -> None:
    """CORE-GET-001, CORE-GET-002, CORE-HIST-002: the task's state, artifacts and history
    (no more than ``historyLength`` messages), with its status timestamp; an unknown id is
    ``TaskNotFoundError``."""
    async with a2a_client(server.base) as client:
        task_id = task_id_of(await send(client, text_message("hello")))
        full = await get_task(client, task_id)
        short = await client.get_task(GetTaskRequest(id=task_id, history_length=1))
        with pytest.raises(TaskNotFoundError):
            await get_task(client, f"run_{uuid.uuid4().hex}")
    assert full.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_of(full) == "hello back"
    assert [m.parts[0].text for m in full.history] == ["hello", "hello back"]
    assert [m.parts[0].text for m in short.history] == ["hello back"]
    assert full.status.timestamp.ToNanoseconds() > 0


async def test_a_message_naming_only_the_task_joins_its_context(server: Server) -> None:
    """CORE-MULTI-005: the context of a message that names a task but no context is the
    task's."""
    async with a2a_client(server.base, streaming=False) as client:
        task = await waiting_task(client)
        [pending] = pending_of(task)
        allow = {"approval_id": pending["approval_id"], "outcome": "allow_once"}
        message = decisions(task.id, [allow])
        assert not message.context_id
        [response] = await send(client, message)
    assert response.task.id == task.id
    assert response.task.context_id == task.context_id
    assert response.task.status.state == TaskState.TASK_STATE_COMPLETED


async def test_a_context_that_is_not_the_tasks_is_refused(server: Server) -> None:
    """CORE-MULTI-006: a message whose ``contextId`` is not the one of the task it names is
    refused; the task still waits and nothing runs."""
    async with a2a_client(server.base) as client:
        task = await waiting_task(client)
        [pending] = pending_of(task)
        allow = {"approval_id": pending["approval_id"], "outcome": "allow_once"}
        message = decisions(task.id, [allow])
        message.context_id = f"session_{uuid.uuid4().hex}"
        with pytest.raises(InvalidParamsError):
            await send(client, message)
        assert pending_of(await get_task(client, task.id)) == [pending]
    refund = task.history[0].parts[0].text
    assert refund not in effects(server.effects)


async def test_a_message_naming_an_unknown_task_is_task_not_found(server: Server) -> None:
    """CORE-MULTI-004."""
    message = text_message("hello")
    message.task_id = f"run_{uuid.uuid4().hex}"
    async with a2a_client(server.base) as client:
        with pytest.raises(TaskNotFoundError):
            await send(client, message)


def test_a2a_errors_carry_their_code_and_error_info(server: Server) -> None:
    """JSONRPC-ERR-001, JSONRPC-ERR-002, JSONRPC-ERR-003, JSONRPC-SSE-002: each A2A error is
    the JSON-RPC error of its code (-32001 .. -32099) with a ``google.rpc.ErrorInfo`` (reason,
    domain ``a2a-protocol.org``); a Prism refusal names its Prism code in the metadata."""
    finished = rpc(server, "SendMessage", wire_message("hello"))["result"]["task"]
    file_part = {"raw": "dGNr", "mediaType": "application/x-unsupported-tck-type"}
    cases = {
        "TASK_NOT_FOUND": (-32001, rpc(server, "GetTask", {"id": f"run_{uuid.uuid4().hex}"})),
        "TASK_NOT_CANCELABLE": (-32002, rpc(server, "CancelTask", {"id": finished["id"]})),
        "UNSUPPORTED_OPERATION": (
            -32004,
            rpc(server, "SendMessage", wire_message("more", taskId=finished["id"])),
        ),
        "CONTENT_TYPE_NOT_SUPPORTED": (
            -32005,
            rpc(
                server,
                "SendMessage",
                {"message": {**wire_message("x")["message"], "parts": [file_part]}},
            ),
        ),
    }
    for reason, (code, reply) in cases.items():
        assert reply["error"]["code"] == code, reply
        assert error_info(reply)["reason"] == reason
    assert error_info(cases["UNSUPPORTED_OPERATION"][1])["metadata"] == {
        "code": "ERR_PRISM_AGENT_RUN_STATE"
    }
    assert error_info(cases["CONTENT_TYPE_NOT_SUPPORTED"][1])["metadata"] == {
        "code": "ERR_PRISM_A2A_CONTENT_TYPE"
    }


def test_what_the_card_declares_is_served_and_the_rest_refused(server: Server) -> None:
    """CORE-CAP-001, CORE-CAP-003: the card declares push notifications and no extended
    card; a push config is kept (and read back), the extended card's method answers
    ``UnsupportedOperationError``."""
    task = rpc(server, "SendMessage", wire_message("hello"))["result"]["task"]
    config = {"taskId": task["id"], "id": "hook-1", "url": "http://127.0.0.1:9/hook"}
    push = rpc(server, "CreateTaskPushNotificationConfig", config)
    read = rpc(server, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "hook-1"})
    extended = rpc(server, "GetExtendedAgentCard", {})
    assert push["result"] == config
    assert read["result"] == config
    assert extended["error"]["code"] == -32004
    assert error_info(extended)["reason"] == "UNSUPPORTED_OPERATION"


def test_an_unsupported_version_is_refused(server: Server) -> None:
    """VER-SERVER-002: an ``A2A-Version`` the endpoint does not serve is
    ``VersionNotSupportedError``, and nothing starts."""
    reply = rpc(server, "SendMessage", wire_message(f"lookup {order()}"), **{"A2A-Version": "9.9"})
    assert reply["error"]["code"] == -32009
    assert error_info(reply)["reason"] == "VERSION_NOT_SUPPORTED"
