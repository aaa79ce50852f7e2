"""``ListTasks`` (A2A 1.0), through the official a2a-sdk client: the caller's own tasks only,
filtered by ``contextId`` and ``status``, newest status first, page by page with
``nextPageToken`` (``""`` on the last page) and ``totalSize``, without artifacts unless asked,
and bounded: a listing that would read too many runs is refused, never cut short."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest
from a2a.client import Client
from a2a.types import ListTasksRequest, ListTasksResponse, TaskState
from a2a.utils.errors import InvalidParamsError

import prism_a2a._listing
from prism_a2a import MAX_LISTED_RUNS, create_a2a_app
from prism_core import (
    create_agent,
    create_memory_checkpoint_store,
    create_memory_session_store,
    create_mock_provider,
    provider_done,
    provider_text_delta,
)

from ._support import (
    Server,
    a2a_client,
    cancel_task,
    decisions,
    get_task,
    order,
    pending_of,
    send,
    task_id_of,
    text_message,
)

pytestmark = pytest.mark.anyio

ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


@pytest.fixture(scope="module")
def tenant_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The app with an ``authorize`` that names the tenant from ``X-Tenant``."""
    where = tmp_path_factory.mktemp("a2a-list")
    served = Server(where / "prism.db", where / "effects", PRISM_A2A_TEST_AUTH="header")
    try:
        yield served
    finally:
        served.stop()


def tenant() -> dict[str, str]:
    """The headers of a tenant of the calling test's own."""
    return {"x-tenant": f"t-{uuid.uuid4().hex[:8]}"}


async def listed(client: Client, **filters: Any) -> ListTasksResponse:
    """``ListTasks`` with ``filters``."""
    return await client.list_tasks(ListTasksRequest(**filters))


async def started(client: Client, text: str, context_id: str | None = None) -> str:
    """The id of the task ``text`` starts."""
    return task_id_of(await send(client, text_message(text, context_id=context_id)))


async def test_a_caller_lists_its_own_tasks_only(tenant_server: Server) -> None:
    """CORE-LIST-001."""
    mine_headers, theirs_headers = tenant(), tenant()
    async with a2a_client(tenant_server.base, headers=mine_headers) as mine:
        own = {await started(mine, "hello"), await started(mine, "count")}
    async with a2a_client(tenant_server.base, headers=theirs_headers) as theirs:
        other = await started(theirs, "hello")
        seen_by_them = await listed(theirs)
    async with a2a_client(tenant_server.base, headers=mine_headers) as mine:
        seen_by_me = await listed(mine)
    assert {task.id for task in seen_by_me.tasks} == own
    assert seen_by_me.total_size == 2
    assert [task.id for task in seen_by_them.tasks] == [other]


async def test_context_and_status_filters(tenant_server: Server) -> None:
    refund, dropped = order(), order()
    async with a2a_client(tenant_server.base, headers=tenant()) as client:
        first = await started(client, "count")
        context_id = (await get_task(client, first)).context_id
        second = await started(client, "count", context_id)
        waiting = await started(client, f"refund {refund}")
        canceled = await started(client, f"refund {dropped}")
        await cancel_task(client, canceled)

        async def ids(**filters: Any) -> set[str]:
            return {task.id for task in (await listed(client, **filters)).tasks}

        assert await ids(context_id=context_id) == {first, second}
        assert await ids(status=TaskState.TASK_STATE_COMPLETED) == {first, second}
        assert await ids(status=TaskState.TASK_STATE_INPUT_REQUIRED) == {waiting}
        assert await ids(status=TaskState.TASK_STATE_CANCELED) == {canceled}
        assert await ids(status=TaskState.TASK_STATE_REJECTED) == set()
        assert await ids(status=TaskState.TASK_STATE_WORKING) == set()
        both = {"context_id": context_id, "status": TaskState.TASK_STATE_INPUT_REQUIRED}
        assert await ids(**both) == set()
        assert await ids(context_id="no-such-context") == set()
        assert await ids() == {first, second, waiting, canceled}
        [shown] = (await listed(client, status=TaskState.TASK_STATE_INPUT_REQUIRED)).tasks
    assert shown.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert pending_of(shown)[0]["tool_name"] == "refund"


async def test_newest_status_first(tenant_server: Server) -> None:
    """CORE-LIST-003: sorted by status timestamp, most recent first; a task decided later
    moves to the front."""
    refund = order()
    async with a2a_client(tenant_server.base, headers=tenant()) as client:
        waiting = await started(client, f"refund {refund}")
        later = [await started(client, "hello"), await started(client, "hello")]
        before = [task.id for task in (await listed(client)).tasks]
        [pending] = pending_of(await get_task(client, waiting))
        allow = {"approval_id": pending["approval_id"], "outcome": "allow_once"}
        await send(client, decisions(waiting, [allow]))
        after = await listed(client)
    assert before == [later[1], later[0], waiting]
    assert [task.id for task in after.tasks] == [waiting, later[1], later[0]]
    stamps = [task.status.timestamp.ToNanoseconds() for task in after.tasks]
    assert stamps == sorted(stamps, reverse=True)
    assert all(stamp > 0 for stamp in stamps)


async def test_pages_walk_every_task_once(tenant_server: Server) -> None:
    """CORE-LIST-002, CORE-LIST-004: ``pageSize`` tasks a page, a ``nextPageToken`` to the
    next page, ``""`` on the last one, ``totalSize`` on every page."""
    async with a2a_client(tenant_server.base, headers=tenant()) as client:
        created = [await started(client, "hello") for _ in range(5)]
        everything = [task.id for task in (await listed(client)).tasks]
        pages: list[ListTasksResponse] = []
        token = ""
        while True:
            page = await listed(client, page_size=2, page_token=token)
            pages.append(page)
            token = page.next_page_token
            if not token:
                break
    assert [len(page.tasks) for page in pages] == [2, 2, 1]
    assert [page.total_size for page in pages] == [5, 5, 5]
    assert [page.page_size for page in pages] == [2, 2, 2]
    walked = [task.id for page in pages for task in page.tasks]
    assert walked == everything
    assert sorted(walked) == sorted(created)


def test_the_wire_form_of_a_page(tenant_server: Server) -> None:
    """CORE-LIST-004, DM-SERIAL-003: ``nextPageToken`` is present (``""``) on the last page;
    status timestamps are ISO 8601 in UTC with a ``Z``; states are the ProtoJSON names."""
    headers = {**tenant(), "A2A-Version": "1.0"}
    with httpx.Client(base_url=tenant_server.base, timeout=30, headers=headers) as http:
        send_body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {
                    "role": "ROLE_USER",
                    "messageId": uuid.uuid4().hex,
                    "parts": [{"text": "hello"}],
                }
            },
        }
        assert "result" in http.post("/", json=send_body).json()
        list_body = {"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {}}
        answer = http.post("/", json=list_body)
    assert answer.status_code == 200
    result = answer.json()["result"]
    assert result["nextPageToken"] == ""
    assert (result["totalSize"], result["pageSize"]) == (1, 50)
    [task] = result["tasks"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    stamp = task["status"]["timestamp"]
    assert ISO_UTC.match(stamp), stamp
    assert datetime.fromisoformat(stamp.replace("Z", "+00:00")).utcoffset() is not None
    assert "artifacts" not in task


async def test_artifacts_only_when_asked_and_history_as_long_as_asked(
    tenant_server: Server,
) -> None:
    """CORE-LIST-005: no ``artifacts`` unless ``includeArtifacts``; ``historyLength`` caps the
    history (CORE-HIST-002)."""
    async with a2a_client(tenant_server.base, headers=tenant()) as client:
        await started(client, "hello")
        [plain] = (await listed(client)).tasks
        [full] = (await listed(client, include_artifacts=True)).tasks
        [short] = (await listed(client, history_length=1)).tasks
    assert list(plain.artifacts) == []
    assert [a.artifact_id for a in full.artifacts] == ["answer"]
    assert full.artifacts[0].parts[0].text == "hello back"
    assert len(plain.history) == 2
    assert len(short.history) == 1


@pytest.mark.parametrize(
    "params",
    [
        pytest.param({"page_token": "not-a-token"}, id="token"),
        pytest.param({"page_size": 0}, id="size-0"),
        pytest.param({"page_size": 101}, id="size-101"),
        pytest.param({"history_length": -1}, id="history"),
    ],
)
async def test_bad_paging_is_invalid_params(tenant_server: Server, params: dict[str, Any]) -> None:
    async with a2a_client(tenant_server.base, headers=tenant()) as client:
        await started(client, "hello")
        with pytest.raises(InvalidParamsError):
            await listed(client, **params)


async def test_a_listing_past_its_bound_is_refused_not_cut_short(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A caller with more runs than one listing reads gets ``UnsupportedOperationError``
    (``ERR_PRISM_A2A_LIST_LIMIT``) rather than a partial list (the bound lowered to 3 here;
    ``MAX_LISTED_RUNS`` otherwise)."""
    assert MAX_LISTED_RUNS == 10_000
    agent = create_agent(
        id="greeter",
        model={"provider": "mock", "model": "demo"},
        provider=create_mock_provider(lambda request: [provider_text_delta("hi"), provider_done()]),
    )
    app = create_a2a_app(
        agent,
        definition_revision="billing-1",
        checkpoints=create_memory_checkpoint_store(),
        sessions=create_memory_session_store(),
        url="http://a2a.test/",
        authorize=lambda request: {"tenant_id": "bounded"},
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://a2a.test") as http:

        async def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            answer = await http.post("/", json=body, headers={"A2A-Version": "1.0"})
            reply: dict[str, Any] = json.loads(answer.text)
            return reply

        message = {"role": "ROLE_USER", "parts": [{"text": "hello"}]}
        for _ in range(3):
            sent = await call("SendMessage", {"message": {**message, "messageId": order()}})
            assert "result" in sent, sent
        assert (await call("ListTasks", {}))["result"]["totalSize"] == 3
        monkeypatch.setattr(prism_a2a._listing, "MAX_LISTED_RUNS", 2)
        refused = await call("ListTasks", {})
    assert refused["error"]["code"] == -32004  # UnsupportedOperationError
    assert refused["error"]["message"].startswith("ERR_PRISM_A2A_LIST_LIMIT: ")
