"""``WebhookNotifier`` over the real wire: a loopback ``http.server`` receiver checks the
HMAC-SHA256 signature of each body the way a receiver would; a receiver that answers 500
twice gets the same delivery id three times, and the notification is then gone."""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import pytest

from prism_core import (
    NotifierConfigError,
    RunStateOptions,
    ToolDefinition,
    WebhookDeliveryError,
    WebhookNotifier,
    create_agent,
    create_memory_checkpoint_store,
    create_memory_session_store,
    deliver_notifications,
)
from prism_core._notification import Notification
from prism_core.durable._outbox import OUTBOX_NAMESPACE
from tests.webhook_receiver import Receiver, signature_of

from .durable_support import REVISION, by_history
from .helpers import text_turn, tool_turn

SECRET = "whsec-test-0123"


async def _suspended(checkpoints: Any) -> str:
    agent = create_agent(
        id="desk",
        model={"provider": "mock", "model": "m"},
        provider=by_history([tool_turn(("r1", "refund", {"amount": 900})), text_turn("ok")]),
        store=create_memory_session_store(),
        tools=[ToolDefinition("refund", lambda args, ctx: "ok", needs_approval=True)],
    )
    result = await agent.create_session(id="s1").run(
        "refund", run_state=RunStateOptions(checkpoints, REVISION, notify=True)
    )
    assert result.status == "suspended"
    return result.run_id


@pytest.mark.anyio
async def test_the_receiver_verifies_the_signature_of_the_body_it_got() -> None:
    checkpoints = create_memory_checkpoint_store()
    run_id = await _suspended(checkpoints)
    with Receiver() as receiver:
        notifier = WebhookNotifier(receiver.url, secret=SECRET)
        assert await deliver_notifications(checkpoints, [notifier]) == 1
        (delivery,) = receiver.accepted()
    assert delivery.path == "/hooks/prism"
    assert delivery.headers["X-Prism-Signature"] == signature_of(delivery.body, SECRET)
    assert delivery.headers["X-Prism-Signature"] != signature_of(delivery.body, "another secret")
    assert delivery.headers["Content-Type"] == "application/json"
    body = delivery.json()
    assert delivery.headers["X-Prism-Delivery"] == body["id"]
    assert delivery.headers["X-Prism-Event"] == "suspended"
    assert set(body) == {
        "id",
        "event",
        "run_id",
        "session_id",
        "agent_id",
        "status",
        "version",
        "occurred_at",
        "pending_decisions",
    }
    assert (body["event"], body["run_id"], body["status"]) == ("suspended", run_id, "suspended")
    assert body["pending_decisions"][0]["arguments"] == {"amount": 900}
    # The signed bytes are the body's canonical JSON: sorted keys, no whitespace.
    assert delivery.body == json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


@pytest.mark.anyio
async def test_two_failures_then_success_keep_one_delivery_id() -> None:
    checkpoints = create_memory_checkpoint_store()
    await _suspended(checkpoints)
    with Receiver(statuses=[500, 500]) as receiver:
        notifier = WebhookNotifier(receiver.url, secret=SECRET)
        at = time.time() + 1
        assert await deliver_notifications(checkpoints, [notifier], now=at, backoff_ms=1) == 0
        assert await deliver_notifications(checkpoints, [notifier], now=at + 1, backoff_ms=1) == 0
        assert await deliver_notifications(checkpoints, [notifier], now=at + 2, backoff_ms=1) == 1
        deliveries = list(receiver.deliveries)
    assert [d.status for d in deliveries] == [500, 500, 200]
    ids = {d.headers["X-Prism-Delivery"] for d in deliveries}
    assert len(ids) == 1
    assert {d.body for d in deliveries} == {deliveries[0].body}
    assert (await checkpoints.list(OUTBOX_NAMESPACE)).records == ()


@pytest.mark.anyio
async def test_a_refused_connection_and_a_silent_receiver_are_delivery_errors() -> None:
    with Receiver() as receiver:
        url = receiver.url
    notification = Notification(
        id="ntf_x",
        event="finished",
        run_id="r",
        session_id="s",
        agent_id="a",
        status="succeeded",
        version=3,
        occurred_at=1.0,
    )
    with pytest.raises(WebhookDeliveryError, match="no answer"):
        await WebhookNotifier(url, secret=SECRET, timeout_ms=2000).deliver(notification)

    class Hangs:
        async def post(self, *args: Any, **kwargs: Any) -> int:
            await anyio.sleep(3600)
            return 200

    notifier = WebhookNotifier(url, secret=SECRET, timeout_ms=50, transport=Hangs())
    # The deliverer bounds a notifier by its own timeout (and 5 s): the pass ends.
    checkpoints = create_memory_checkpoint_store()
    await _suspended(checkpoints)
    with anyio.fail_after(60):
        assert await deliver_notifications(checkpoints, [notifier]) == 0
    (record,) = (await checkpoints.list(OUTBOX_NAMESPACE)).records
    assert record.value["status"] == "pending"
    assert "TimeoutError" in record.value["last_error"]


def test_malformed_options_are_refused_when_the_notifier_is_made() -> None:
    for url in ("ftp://example.com/x", "http:///nohost", "https://user:pw@example.com/", 42):
        with pytest.raises(NotifierConfigError):
            WebhookNotifier(url, secret=SECRET)  # type: ignore[arg-type]
    with pytest.raises(NotifierConfigError, match="secret"):
        WebhookNotifier("https://example.com/hook", secret="")
    with pytest.raises(NotifierConfigError, match="unknown: paged"):
        WebhookNotifier("https://example.com/hook", secret=SECRET, events={"paged"})
    with pytest.raises(NotifierConfigError, match="timeout_ms"):
        WebhookNotifier("https://example.com/hook", secret=SECRET, timeout_ms=0)
    notifier = WebhookNotifier("https://example.com/hook/t0ken", secret=SECRET)
    assert "t0ken" not in repr(notifier)
    assert SECRET not in repr(notifier)
    assert notifier.name == WebhookNotifier("https://example.com/hook/t0ken", secret="x").name
