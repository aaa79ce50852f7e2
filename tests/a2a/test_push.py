"""A2A push notifications through the outbox: a config set with the official a2a-sdk client is
kept in the stores, and each state change of its task reaches a loopback receiver, with the
token and credentials the config names, at least once under a stable delivery id."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import anyio.to_thread
import httpx
import pytest
from a2a.client import A2ACardResolver
from a2a.types import (
    AuthenticationInfo,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import InvalidParamsError, PushNotificationNotSupportedError

from prism_a2a import MAX_PUSH_CONFIGS
from prism_store_sql import open_sql_stores
from tests.webhook_receiver import Receiver

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


@pytest.fixture(scope="module")
def without_push(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The test app served with ``push_notifications=False``."""
    where = tmp_path_factory.mktemp("a2a-no-push")
    served = Server(where / "prism.db", where / "effects", PRISM_A2A_TEST_PUSH="off")
    try:
        yield served
    finally:
        served.stop()


def hook(task_id: str, url: str, **fields: Any) -> TaskPushNotificationConfig:
    """A push config of ``task_id`` to ``url``."""
    return TaskPushNotificationConfig(task_id=task_id, url=url, **fields)


async def drained(server: Server, task_id: str) -> None:
    """Wait until the server's outbox holds nothing of ``task_id`` (what its run notified
    before a config existed is delivered to nobody, and gone)."""
    with anyio.fail_after(60):
        while True:
            async with open_sql_stores(f"sqlite:///{server.db}") as stores:
                page = await stores.checkpoints.list("prism.outbox", limit=1000)
            if not any(r.value["notification"]["run_id"] == task_id for r in page.records):
                return
            await anyio.sleep(0.1)


async def approve_first(client: Any, task_id: str) -> None:
    """Approve the one call the task waits for."""
    [pending] = pending_of(await get_task(client, task_id))
    await send(
        client,
        decisions(task_id, [{"approval_id": pending["approval_id"], "outcome": "allow_once"}]),
    )


async def test_a_tasks_state_changes_reach_its_push_receiver(server: Server) -> None:
    first, second = order(), order()
    # The receiver refuses the first delivery: it comes again, under the same id.
    with Receiver([500]) as receiver:
        async with a2a_client(server.base) as client:
            task_id = task_id_of(await send(client, text_message(f"refund-twice {first} {second}")))
            await drained(server, task_id)
            config = hook(
                task_id,
                receiver.url,
                id="desk",
                token="tok-123",
                authentication=AuthenticationInfo(scheme="Bearer", credentials="s3cret"),
            )
            kept = await client.create_task_push_notification_config(config)
            assert kept == config
            assert receiver.deliveries == []  # nothing is fetched or sent when it is set
            read = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task_id, id="desk")
            )
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task_id)
            )
            assert read == config
            assert list(listed.configs) == [config]
            await approve_first(client, task_id)  # decided, then suspended on the second refund
            await approve_first(client, task_id)  # decided, then finished
            got = await anyio.to_thread.run_sync(receiver.wait_for, 4)
    bodies = sorted(
        (d.json()["statusUpdate"] for d in got),
        key=lambda update: (update["metadata"]["prism_version"], update["metadata"]["prism_event"]),
    )
    seen = [(u["metadata"]["prism_event"], u["status"]["state"]) for u in bodies]
    assert seen == [
        ("decided", "TASK_STATE_WORKING"),
        ("suspended", "TASK_STATE_INPUT_REQUIRED"),
        ("decided", "TASK_STATE_WORKING"),
        ("finished", "TASK_STATE_COMPLETED"),
    ]
    assert {u["taskId"] for u in bodies} == {task_id}
    waiting = bodies[1]["status"]["message"]["parts"][1]["data"]["pending_decisions"]
    assert [p["tool_call_id"] for p in waiting] == ["t1"]
    assert "arguments" not in waiting[0]  # a call's arguments never leave through A2A
    for delivery in receiver.deliveries:
        assert delivery.headers["X-A2A-Notification-Token"] == "tok-123"
        assert delivery.headers["Authorization"] == "Bearer s3cret"
        assert delivery.headers["Content-Type"] == "application/json"
    refused = receiver.deliveries[0]
    assert refused.status == 500
    ids = [d.headers["X-Prism-Delivery"] for d in receiver.deliveries]
    assert ids.count(refused.headers["X-Prism-Delivery"]) == 2
    assert len(set(ids)) == 4
    ran = effects(server.effects)
    assert (ran.count(f"refund {first}"), ran.count(f"refund {second}")) == (1, 1)


async def test_a_config_sent_with_the_first_message_sees_the_first_change(
    server: Server,
) -> None:
    with Receiver() as receiver:
        config = TaskPushNotificationConfig(url=receiver.url, token="tok-first")
        request = SendMessageRequest(
            message=text_message(f"refund {order()}"),
            configuration=SendMessageConfiguration(task_push_notification_config=config),
        )
        async with a2a_client(server.base) as client:
            task_id = task_id_of([r async for r in client.send_message(request)])
            [suspended] = await anyio.to_thread.run_sync(receiver.wait_for, 1)
            await cancel_task(client, task_id)
            got = await anyio.to_thread.run_sync(receiver.wait_for, 3)
    update = suspended.json()["statusUpdate"]
    assert update["taskId"] == task_id
    assert update["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert suspended.headers["X-A2A-Notification-Token"] == "tok-first"
    events = sorted(d.json()["statusUpdate"]["metadata"]["prism_event"] for d in got)
    assert events == ["decided", "finished", "suspended"]
    [finished] = [
        d for d in got if d.json()["statusUpdate"]["metadata"]["prism_event"] == "finished"
    ]
    assert finished.json()["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"


async def test_a_config_is_set_read_listed_and_deleted(server: Server, protocol: str) -> None:
    """Over A2A 1.0 and over 0.3's ``tasks/pushNotificationConfig/set|get|list|delete``."""
    async with a2a_client(server.base, protocol=protocol) as client:
        task_id = task_id_of(await send(client, text_message(f"refund {order()}")))
        for name in ("a", "b"):
            await client.create_task_push_notification_config(
                hook(task_id, f"https://hooks.example/{name}", id=name)
            )
        read = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task_id, id="a")
        )
        await client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="a")
        )
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task_id)
        )
    assert read.url == "https://hooks.example/a"
    assert [c.id for c in listed.configs] == ["b"]


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        pytest.param({"url": "ftp://hooks.example/x"}, "http", id="scheme"),
        pytest.param({"url": "file:///etc/passwd"}, "http", id="file"),
        pytest.param({"url": "http://user:pw@hooks.example/x"}, "credentials", id="userinfo"),
        pytest.param({"url": "https://hooks.example/x", "token": "t" * 5000}, "bytes", id="size"),
        pytest.param({"url": "https:///nohost"}, "http", id="no-host"),
    ],
)
async def test_a_config_the_endpoint_will_not_keep_is_refused(
    server: Server, fields: dict[str, Any], why: str
) -> None:
    async with a2a_client(server.base) as client:
        task_id = task_id_of(await send(client, text_message(f"refund {order()}")))
        with pytest.raises(InvalidParamsError) as caught:
            await client.create_task_push_notification_config(hook(task_id, **fields))
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task_id)
        )
    assert str(caught.value).startswith("ERR_PRISM_A2A_PUSH_CONFIG: ")
    assert why in str(caught.value)
    assert list(listed.configs) == []


async def test_a_config_sent_with_a_decision_is_kept_only_with_the_decision(
    server: Server,
) -> None:
    with Receiver() as receiver:
        async with a2a_client(server.base) as client:
            task_id = task_id_of(await send(client, text_message(f"refund {order()}")))
            await drained(server, task_id)
            [pending] = pending_of(await get_task(client, task_id))
            config = SendMessageConfiguration(
                task_push_notification_config=TaskPushNotificationConfig(url=receiver.url)
            )
            unknown = decisions(task_id, [{"approval_id": "appr_nope", "outcome": "allow_once"}])
            with pytest.raises(InvalidParamsError):
                await anext(
                    client.send_message(SendMessageRequest(message=unknown, configuration=config))
                )
            kept = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task_id)
            )
            assert list(kept.configs) == []
            good = decisions(
                task_id, [{"approval_id": pending["approval_id"], "outcome": "allow_once"}]
            )
            request = SendMessageRequest(message=good, configuration=config)
            [r async for r in client.send_message(request)]
            got = await anyio.to_thread.run_sync(receiver.wait_for, 2)
    events = sorted(d.json()["statusUpdate"]["metadata"]["prism_event"] for d in got)
    assert events == ["decided", "finished"]


async def test_a_first_message_with_a_config_it_will_not_keep_starts_nothing(
    server: Server,
) -> None:
    key = order()
    config = TaskPushNotificationConfig(url="gopher://hooks.example/x")
    request = SendMessageRequest(
        message=text_message(f"lookup {key}"),
        configuration=SendMessageConfiguration(task_push_notification_config=config),
    )
    async with a2a_client(server.base) as client:
        with pytest.raises(InvalidParamsError) as caught:
            [r async for r in client.send_message(request)]
    assert str(caught.value).startswith("ERR_PRISM_A2A_PUSH_CONFIG: ")
    assert f"lookup {key}" not in effects(server.effects)


async def test_a_task_keeps_a_bounded_number_of_configs(server: Server) -> None:
    async with a2a_client(server.base) as client:
        task_id = task_id_of(await send(client, text_message(f"refund {order()}")))
        for n in range(MAX_PUSH_CONFIGS):
            await client.create_task_push_notification_config(
                hook(task_id, f"https://hooks.example/{n}", id=str(n))
            )
        with pytest.raises(InvalidParamsError):
            await client.create_task_push_notification_config(
                hook(task_id, "https://hooks.example/more", id="more")
            )


async def test_the_card_declares_push_notifications_only_where_they_are_served(
    server: Server, without_push: Server
) -> None:
    headers = {"A2A-Version": "1.0"}
    async with httpx.AsyncClient(timeout=30, headers=headers) as http:
        served = await A2ACardResolver(http, server.base).get_agent_card()
        unserved = await A2ACardResolver(http, without_push.base).get_agent_card()
    assert served.capabilities.push_notifications is True
    assert unserved.capabilities.push_notifications is False
    async with a2a_client(without_push.base) as client:
        task_id = task_id_of(await send(client, text_message("hello")))
        with pytest.raises(PushNotificationNotSupportedError):
            await client.create_task_push_notification_config(
                hook(task_id, "https://hooks.example/x")
            )


async def test_an_update_committed_before_a_kill_is_delivered_by_the_next_server(
    tmp_path: Any,
) -> None:
    """The update is in the store's outbox from the commit that made it: a server killed
    before its receiver took it leaves it there, and the next server delivers it, under the
    same delivery id."""
    first = Server(tmp_path / "prism.db", tmp_path / "effects")
    with Receiver([503] * 1000) as receiver:
        try:
            async with a2a_client(first.base) as client:
                task_id = task_id_of(await send(client, text_message(f"refund {order()}")))
                await drained(first, task_id)
                await client.create_task_push_notification_config(hook(task_id, receiver.url))
                await approve_first(client, task_id)
            with anyio.fail_after(60):
                while True:  # the receiver refused the update at least once: it is committed
                    if receiver.deliveries:
                        break
                    await anyio.sleep(0.05)
        finally:
            first.kill()
        refused = {d.headers["X-Prism-Delivery"] for d in receiver.deliveries}
        receiver.statuses.clear()  # from now on, 200
        second = Server(tmp_path / "prism.db", tmp_path / "effects")
        try:
            got = await anyio.to_thread.run_sync(receiver.wait_for, 2)
        finally:
            second.stop()
    delivered = {d.headers["X-Prism-Delivery"]: d.json()["statusUpdate"] for d in got}
    assert refused <= set(delivered)
    states = sorted(u["status"]["state"] for u in delivered.values())
    assert states == ["TASK_STATE_COMPLETED", "TASK_STATE_WORKING"]
