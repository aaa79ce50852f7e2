"""What protects what: every task is kept under its caller's ownership (a foreign task reads
as absent to every method, a foreign context is refused), the default serves this machine
only under one fixed ownership, and the JSON-RPC route takes JSON bodies only."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import anyio
import httpx
import pytest
from a2a.types import (
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from prism_a2a import CONTEXT_NAMESPACE, DEFAULT_OWNERSHIP, create_a2a_app
from prism_core import (
    AGENT_RUN_NAMESPACE,
    create_agent,
    create_memory_checkpoint_store,
    create_memory_session_store,
)
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

SEND = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "message/send",
    "params": {
        "message": {
            "kind": "message",
            "role": "user",
            "messageId": "m-1",
            "parts": [{"kind": "text", "text": "hello"}],
        }
    },
}


@pytest.fixture(scope="module")
def tenant_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The app with an ``authorize`` that names the tenant from ``X-Tenant``."""
    where = tmp_path_factory.mktemp("a2a-tenants")
    served = Server(where / "prism.db", where / "effects", PRISM_A2A_TEST_AUTH="header")
    try:
        yield served
    finally:
        served.stop()


async def test_a_foreign_task_reads_as_absent_to_every_method(tenant_server: Server) -> None:
    refund = order()
    base = tenant_server.base
    async with a2a_client(base, headers={"x-tenant": "t1"}) as mine:
        task_id = task_id_of(await send(mine, text_message(f"refund {refund}")))
        task = await get_task(mine, task_id)
        [pending] = pending_of(task)
    batch = [{"approval_id": pending["approval_id"], "outcome": "allow_once"}]
    async with a2a_client(base, headers={"x-tenant": "t2"}) as theirs:
        with pytest.raises(TaskNotFoundError):
            await get_task(theirs, task_id)
        with pytest.raises(TaskNotFoundError):
            await send(theirs, decisions(task_id, batch))
        with pytest.raises(TaskNotFoundError):
            await cancel_task(theirs, task_id)
        with pytest.raises(InvalidParamsError) as caught:
            await send(theirs, text_message("count", context_id=task.context_id))
        assert caught.value.data == {"code": "ERR_PRISM_A2A_CONTEXT"}
    assert f"refund {refund}" not in effects(tenant_server.effects)
    async with a2a_client(base, headers={"x-tenant": "t1"}) as mine:
        assert pending_of(await get_task(mine, task_id)) == [pending]
        await send(mine, decisions(task_id, batch))
    assert effects(tenant_server.effects).count(f"refund {refund}") == 1
    async with open_sql_stores(f"sqlite:///{tenant_server.db}") as stores:
        owned = await stores.checkpoints.load(
            AGENT_RUN_NAMESPACE, task_id, ownership={"tenant_id": "t1"}
        )
        foreign = await stores.checkpoints.load(
            AGENT_RUN_NAMESPACE, task_id, ownership={"tenant_id": "t2"}
        )
        claim = await stores.checkpoints.load(
            CONTEXT_NAMESPACE, task.context_id, ownership={"tenant_id": "t1"}
        )
    assert owned is not None
    assert owned.value["status"] == "succeeded"
    assert foreign is None
    assert claim is not None
    assert claim.value["run_id"] == task_id


async def test_a_foreign_tasks_push_configs_read_as_absent(tenant_server: Server) -> None:
    base = tenant_server.base
    async with a2a_client(base, headers={"x-tenant": "t1"}) as mine:
        task_id = task_id_of(await send(mine, text_message(f"refund {order()}")))
        config = TaskPushNotificationConfig(task_id=task_id, id="h", url="https://hooks.example/h")
        await mine.create_task_push_notification_config(config)
    async with a2a_client(base, headers={"x-tenant": "t2"}) as theirs:
        with pytest.raises(TaskNotFoundError):
            await theirs.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task_id)
            )
        with pytest.raises(TaskNotFoundError):
            await theirs.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task_id, id="h")
            )
        with pytest.raises(TaskNotFoundError):
            await theirs.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="h")
            )
        stolen = TaskPushNotificationConfig(task_id=task_id, id="h", url="https://evil.example/")
        with pytest.raises(TaskNotFoundError):
            await theirs.create_task_push_notification_config(stolen)
    async with a2a_client(base, headers={"x-tenant": "t1"}) as mine:
        listed = await mine.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task_id)
        )
    assert list(listed.configs) == [config]


async def test_a_context_id_of_a_session_nobody_claimed_is_refused(tenant_server: Server) -> None:
    """A session that has entries but no claim of the caller's (here: another tenant's
    conversation) cannot be joined by naming its id."""
    async with a2a_client(tenant_server.base, headers={"x-tenant": "t3"}) as mine:
        task = await get_task(mine, task_id_of(await send(mine, text_message("count"))))
    async with a2a_client(tenant_server.base, headers={"x-tenant": "t4"}) as theirs:
        with pytest.raises(InvalidParamsError) as caught:
            await send(theirs, text_message("count", context_id=task.context_id))
    assert caught.value.data == {"code": "ERR_PRISM_A2A_CONTEXT"}
    fresh = f"my-own-context-{uuid.uuid4().hex}"
    async with a2a_client(tenant_server.base, headers={"x-tenant": "t4"}) as theirs:
        named = await get_task(
            theirs, task_id_of(await send(theirs, text_message("count", context_id=fresh)))
        )
    assert named.context_id == fresh


def test_authorize_answers_401_and_403_before_the_json_rpc_layer(tenant_server: Server) -> None:
    with httpx.Client(base_url=tenant_server.base, timeout=30) as http:
        anonymous = http.post("/", json=SEND)
        blocked = http.post("/", json=SEND, headers={"x-tenant": "blocked"})
        card = http.get("/.well-known/agent-card.json")
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["data"]["code"] == "ERR_PRISM_WEB_UNAUTHENTICATED"
    assert anonymous.headers["www-authenticate"] == "Bearer"
    assert blocked.status_code == 403
    assert blocked.json()["error"]["data"]["code"] == "ERR_PRISM_WEB_FORBIDDEN"
    assert card.status_code == 200


def test_the_default_serves_loopback_callers_under_one_ownership(server: Server) -> None:
    with httpx.Client(base_url=server.base, timeout=30) as http:
        sent = http.post("/", json=SEND)
        elsewhere = http.post("/", json=SEND, headers={"host": "agents.example.com"})
        card = http.get("/.well-known/agent-card.json", headers={"host": "agents.example.com"})
    assert sent.status_code == 200
    task = sent.json()["result"]
    assert task["status"]["state"] == "completed"
    # A page whose name was rebound to 127.0.0.1 still sends that name: misdirected.
    assert elsewhere.status_code == 421
    assert elsewhere.json()["error"]["data"]["code"] == "ERR_PRISM_WEB_MISDIRECTED"
    assert card.status_code == 200

    async def stored() -> tuple[object, object]:
        async with open_sql_stores(f"sqlite:///{server.db}") as stores:
            owned = await stores.checkpoints.load(
                AGENT_RUN_NAMESPACE, task["id"], ownership=DEFAULT_OWNERSHIP
            )
            unowned = await stores.checkpoints.load(AGENT_RUN_NAMESPACE, task["id"])
        return owned, unowned

    owned, unowned = anyio.run(stored)
    assert DEFAULT_OWNERSHIP == {"channel": "a2a"}
    assert owned is not None
    assert unowned is None


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_the_json_rpc_route_takes_json_bodies_only(
    server: Server, content_type: str | None
) -> None:
    """A cross-site form cannot post JSON, so a web page cannot drive the endpoint."""
    headers = {} if content_type is None else {"content-type": content_type}
    with httpx.Client(base_url=server.base, timeout=30) as http:
        answer = http.post("/", content=json.dumps(SEND).encode(), headers=headers)
    assert answer.status_code == 415
    assert answer.json()["error"]["data"]["code"] == "ERR_PRISM_WEB_UNSUPPORTED_MEDIA_TYPE"


def test_the_gate_holds_where_the_app_is_mounted() -> None:
    """Mounted under a prefix, the JSON-RPC route is still gated (here: a caller that is not
    on this machine is refused by the default) and the card still public."""
    agent = create_agent(id="mounted", model={"provider": "mock", "model": "demo"})
    inner = create_a2a_app(
        agent,
        definition_revision="r1",
        checkpoints=create_memory_checkpoint_store(),
        sessions=create_memory_session_store(),
        url="http://testserver/a2a/",
    )
    # Addressed to localhost, from a client that is not on this machine ("testclient").
    with TestClient(Starlette(routes=[Mount("/a2a", inner)]), base_url="http://localhost") as http:
        refused = http.post("/a2a/", json=SEND)
        card = http.get("/a2a/.well-known/agent-card.json")
    assert refused.status_code == 403
    assert refused.json()["error"]["data"]["code"] == "ERR_PRISM_WEB_FORBIDDEN"
    assert card.json()["name"] == "mounted"
