"""A2A push notifications, through the run's outbox: configs kept in the checkpoint store,
updates delivered by whoever delivers the stores' notifications.

A task's push configs (``tasks/pushNotificationConfig/set|get|list|delete``, or a message's
``configuration.taskPushNotificationConfig``) are one record per task in the checkpoint store
(namespace ``prism.a2a.push``, key = the task id), so they outlive the process and any
deliverer on the stores reads them. The record is unowned (a deliverer reads it for any
owner); it names its task's owner, and every method that reads or changes it is answered
only for a task the caller owns. A config is what a peer sent, so it is bounded before it is
kept: at most ``MAX_PUSH_CONFIG_BYTES`` of JSON, ``MAX_PUSH_CONFIGS`` per task, an ``http`` or
``https`` URL with a host, no credentials in it and no fragment; nothing is fetched when a
config is set.

A task's updates are the run's notifications (the kernel writes them to the outbox in the
same commit as the state change, since every run the face starts notifies):
:class:`A2APushNotifier` hands each one to the task's configs, as the A2A push payload (a
``StreamResponse`` holding the ``TaskStatusUpdateEvent`` of that change, as JSON), with the
config's ``token`` as ``X-A2A-Notification-Token`` and its ``authentication`` as
``Authorization: <scheme> <credentials>``, and the notification's stable id as
``X-Prism-Delivery``. Any config that does not answer 2xx makes the whole notification fail,
and the deliverer retries it with backoff under the same id (at least once: a receiver
deduplicates by the id).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
from a2a.helpers import new_data_part, new_text_part
from a2a.server.context import ServerCallContext
from a2a.server.tasks import PushNotificationConfigStore
from a2a.types import (
    SendMessageRequest,
    StreamResponse,
    TaskPushNotificationConfig,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.json_format import MessageToDict, ParseDict  # type: ignore[import-untyped]

from prism_core import CheckpointConflictError, Notification, Principal

from ._access import call_principal
from ._errors import PushConfigRefused, PushDeliveryError, a2a_error
from ._views import TASK_STATES, agent_message

__all__ = (
    "MAX_PUSH_CONFIGS",
    "MAX_PUSH_CONFIG_BYTES",
    "PUSH_NAMESPACE",
    "A2APushNotifier",
    "CheckpointPushConfigStore",
    "PushConfigs",
    "message_push_config",
)

#: Where the push configs live in the checkpoint store.
PUSH_NAMESPACE = "prism.a2a.push"
#: Largest JSON of one push config a peer may set.
MAX_PUSH_CONFIG_BYTES = 4096
#: Most push configs one task keeps.
MAX_PUSH_CONFIGS = 10
#: Longest config id.
MAX_CONFIG_ID_CHARS = 128
_WRITE_ATTEMPTS = 5
#: Longest a delivery waits for a task being started with a config.
START_WAIT_S = 30.0
_PENDING_KEYS = ("approval_id", "tool_name", "tool_call_id", "kind", "reason")


def _refuse(why: str) -> PushConfigRefused:
    return PushConfigRefused(f"push notification config refused: {why}")


def check_push_config(config: TaskPushNotificationConfig) -> dict[str, Any]:
    """The JSON a config is kept as (its task id left out); :class:`PushConfigRefused` for
    one the endpoint will not keep (see the module)."""
    kept = TaskPushNotificationConfig()
    kept.CopyFrom(config)
    kept.task_id = ""
    data: dict[str, Any] = MessageToDict(kept)
    size = len(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    if size > MAX_PUSH_CONFIG_BYTES:
        raise _refuse(f"{size} bytes; the limit is {MAX_PUSH_CONFIG_BYTES}")
    if len(kept.id) > MAX_CONFIG_ID_CHARS:
        raise _refuse(f"an id may be at most {MAX_CONFIG_ID_CHARS} characters")
    try:
        parts = urlsplit(kept.url)
        parts.port  # noqa: B018 - a malformed port raises here
    except ValueError:
        raise _refuse("the url is not a URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _refuse("the url must be an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise _refuse("the url must not carry credentials (use authentication or token)")
    if parts.fragment:
        raise _refuse("the url must not have a fragment")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in kept.token + kept.authentication.scheme):
        raise _refuse("the token and the authentication scheme must be printable")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in kept.authentication.credentials):
        raise _refuse("the credentials must be printable")
    return data


def _config(task_id: str, data: Mapping[str, Any]) -> TaskPushNotificationConfig:
    config = ParseDict(dict(data), TaskPushNotificationConfig(), ignore_unknown_fields=True)
    config.task_id = task_id
    if not config.id:
        config.id = task_id
    return config  # type: ignore[no-any-return]


class PushConfigs:
    """The push configs of tasks, in the checkpoint store ``checkpoints``.

    A config sent with a message is kept only once the message has been taken (a new task
    gets its id when its run has started; a decision must be recorded first, since a refused
    one keeps nothing): :meth:`starting` marks the task's context meanwhile, and a delivery
    of that context's notifications in this process waits for it (at most ``START_WAIT_S``),
    so the change the message made finds its config.
    """

    def __init__(self, checkpoints: Any) -> None:
        self.checkpoints = checkpoints
        self._starting: dict[str, anyio.Event] = {}

    @asynccontextmanager
    async def starting(self, session_id: str) -> AsyncIterator[None]:
        """Hold deliveries of ``session_id``'s notifications (in this process) until the
        block is left."""
        gate = self._starting[session_id] = anyio.Event()
        try:
            yield
        finally:
            gate.set()
            if self._starting.get(session_id) is gate:
                del self._starting[session_id]

    async def started(self, session_id: str) -> None:
        """Wait while a task is being started on ``session_id`` with a config."""
        gate = self._starting.get(session_id)
        if gate is not None:
            with anyio.move_on_after(START_WAIT_S):
                await gate.wait()

    async def _read(self, task_id: str) -> tuple[int, dict[str, Any]]:
        record = await self.checkpoints.load(PUSH_NAMESPACE, task_id)
        if record is None or not isinstance(record.value, dict):
            return 0, {"ownership": None, "configs": []}
        return record.version, record.value

    async def _write(self, task_id: str, change: Any) -> None:
        """Apply ``change(value) -> value | None`` by compare-and-swap (``None``: delete)."""
        for _ in range(_WRITE_ATTEMPTS):
            version, value = await self._read(task_id)
            changed = change(value)
            try:
                if changed is None:
                    if version:
                        await self.checkpoints.delete(PUSH_NAMESPACE, task_id)
                    return
                await self.checkpoints.save(
                    PUSH_NAMESPACE,
                    task_id,
                    changed,
                    version=version + 1,
                    expected_version=version,
                )
                return
            except CheckpointConflictError:
                continue
        raise CheckpointConflictError(f"the push configs of task {task_id} kept changing")

    async def put(
        self, task_id: str, config: TaskPushNotificationConfig, caller: Principal
    ) -> TaskPushNotificationConfig:
        """Keep ``config`` for ``task_id`` (replacing one with its id), owned by ``caller``."""
        data = check_push_config(config)
        config_id = data.get("id") or task_id
        data["id"] = config_id
        owner = dict(caller.scope) if caller.scope is not None else None

        def change(value: dict[str, Any]) -> dict[str, Any]:
            configs = [c for c in value.get("configs", []) if c.get("id") != config_id]
            if len(configs) >= MAX_PUSH_CONFIGS:
                raise _refuse(f"a task keeps at most {MAX_PUSH_CONFIGS} push configs")
            return {"ownership": owner, "configs": [*configs, data]}

        await self._write(task_id, change)
        return _config(task_id, data)

    async def configs(self, task_id: str, caller: Principal | None = None) -> list[Any]:
        """The configs of ``task_id`` (only ``caller``'s, when given)."""
        _, value = await self._read(task_id)
        if caller is not None:
            owner = dict(caller.scope) if caller.scope is not None else None
            if value.get("ownership") != owner:
                return []
        return [_config(task_id, c) for c in value.get("configs", []) if isinstance(c, dict)]

    async def delete(self, task_id: str, config_id: str | None) -> None:
        """Drop ``task_id``'s config ``config_id`` (``None``: all of them)."""

        def change(value: dict[str, Any]) -> dict[str, Any] | None:
            configs = [
                c
                for c in value.get("configs", [])
                if config_id is not None and c.get("id") != config_id
            ]
            return {**value, "configs": configs} if configs else None

        await self._write(task_id, change)


def message_push_config(
    params: SendMessageRequest, push: PushConfigs | None
) -> TaskPushNotificationConfig | None:
    """The push config a message carries, checked (``None``: none, or push not served)."""
    if push is None or not params.configuration.HasField("task_push_notification_config"):
        return None
    config = params.configuration.task_push_notification_config
    check_push_config(config)
    return config


class CheckpointPushConfigStore(PushNotificationConfigStore):
    """The a2a-sdk's push config store over :class:`PushConfigs` (the SDK checks that the
    caller owns the task before each call)."""

    def __init__(self, push: PushConfigs) -> None:
        self.push = push

    async def set_info(
        self, task_id: str, notification_config: TaskPushNotificationConfig, context: Any
    ) -> TaskPushNotificationConfig:
        """Keep the config (see the module); refused as invalid params when it is not kept."""
        try:
            return await self.push.put(task_id, notification_config, call_principal(context))
        except PushConfigRefused as exc:
            raise a2a_error(exc) from exc

    async def get_info(self, task_id: str, context: Any) -> list[TaskPushNotificationConfig]:
        """The caller's configs of ``task_id``."""
        return await self.push.configs(task_id, call_principal(context))

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        """Every config of ``task_id``."""
        return await self.push.configs(task_id)

    async def delete_info(
        self, task_id: str, context: ServerCallContext, config_id: str | None = None
    ) -> None:
        """Drop the caller's config ``config_id`` of ``task_id`` (``None``: all)."""
        if await self.push.configs(task_id, call_principal(context)):
            await self.push.delete(task_id, config_id or None)


def push_payload(notification: Notification) -> dict[str, Any]:
    """The A2A push body of ``notification``: a ``StreamResponse`` with the task's status
    update for that change, as JSON."""
    task_id, context_id = notification.run_id, notification.session_id
    status = TaskStatus(state=TASK_STATES.get(notification.status, TASK_STATES["running"]))
    status.timestamp.FromNanoseconds(round(notification.occurred_at * 1e9))
    if notification.event == "suspended" and notification.pending_decisions is not None:
        # The call's arguments never leave through A2A (as in the task's own status).
        pending = [{k: row.get(k) for k in _PENDING_KEYS} for row in notification.pending_decisions]
        parts = [
            new_text_part(f"waiting for {len(pending)} decision(s)"),
            new_data_part({"pending_decisions": pending}),
        ]
        message_id = f"{task_id}:suspended:{notification.version}"
        status.message.CopyFrom(agent_message(task_id, context_id, parts, message_id))
    update = TaskStatusUpdateEvent(task_id=task_id, context_id=context_id, status=status)
    update.metadata.update(
        {
            "prism_event": notification.event,
            "prism_notification_id": notification.id,
            "prism_version": notification.version,
        }
    )
    body: dict[str, Any] = MessageToDict(StreamResponse(status_update=update))
    return body


class A2APushNotifier:
    """Delivers each run notification to its task's A2A push configs (see the module).

    ``checkpoints`` is the store the configs live in (the runs' own); ``timeout_ms`` bounds one
    POST. Give it to every process that delivers the stores' notifications (``run_worker(...,
    notifiers=[...])``): a record is finished by whichever deliverer claims it. ``configs``
    shares the app's :class:`PushConfigs` (the app passes its own).
    """

    #: Stays the same across restarts: a retry knows this notifier has a notification.
    name = "a2a-push"

    def __init__(
        self, checkpoints: Any, *, timeout_ms: int = 5000, configs: PushConfigs | None = None
    ) -> None:
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms < 1:
            raise ValueError("timeout_ms must be a positive integer")
        self.configs = configs if configs is not None else PushConfigs(checkpoints)
        self.timeout_ms = timeout_ms

    async def deliver(self, notification: Notification) -> None:
        """POST the notification's update to each config of its task; raise when any of
        them did not take it (the deliverer retries the notification)."""
        await self.configs.started(notification.session_id)
        configs = await self.configs.configs(notification.run_id)
        if not configs:
            return
        body = json.dumps(push_payload(notification), separators=(",", ":")).encode("utf-8")
        failures: list[str] = []
        async with httpx.AsyncClient(
            timeout=self.timeout_ms / 1000, follow_redirects=False
        ) as client:
            for config in configs:
                headers = {
                    "Content-Type": "application/json",
                    "User-Agent": "prism-a2a-push/1",
                    "X-Prism-Delivery": notification.id,
                }
                if config.token:
                    headers["X-A2A-Notification-Token"] = config.token
                auth = config.authentication
                if config.HasField("authentication") and auth.scheme and auth.credentials:
                    headers["Authorization"] = f"{auth.scheme} {auth.credentials}"
                try:
                    async with client.stream(
                        "POST", config.url, content=body, headers=headers
                    ) as answer:
                        status = answer.status_code
                except httpx.HTTPError as exc:
                    failures.append(f"{config.id}: {type(exc).__name__}")
                    continue
                if not 200 <= status < 300:
                    failures.append(f"{config.id}: answered {status}")
        if failures:
            raise PushDeliveryError(
                f"push of {notification.id} not taken: {'; '.join(failures)}"[:500]
            )
