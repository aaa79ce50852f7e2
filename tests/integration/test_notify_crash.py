"""A notification committed before a SIGKILL is delivered by the next worker: a process
suspends a notifying run (the ``suspended`` notification is committed with its checkpoint)
and is killed before it delivers anything; a worker started afterwards on the same stores
POSTs it, signed, to a loopback receiver (SQLite, PostgreSQL, Redis)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from prism_cli._demo_stores import drop_demo_stores, open_demo_stores
from prism_core import WebhookNotifier, run_worker
from prism_core.durable._outbox import OUTBOX_NAMESPACE
from tests.conftest import POSTGRES_URL, REDIS_URL, service_unavailable
from tests.integration.test_crash_demo import reachable
from tests.store_plugins import STORE_PLUGINS
from tests.webhook_receiver import Receiver, signature_of

from .notify_worker import REVISION, desk
from .test_subagent_crash import Worker

WORKER = Path(__file__).with_name("notify_worker.py")
SECRET = "whsec-crash-test"


@pytest.fixture(params=["sqlite", "postgresql", "redis"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    """A store URL and an isolating prefix for one backend (cleaned up afterwards)."""
    if request.param == "sqlite":
        yield {"url": f"sqlite:///{tmp_path / 'runs.db'}", "prefix": "t"}
        return
    host_port = {"postgresql": ("127.0.0.1", 5432), "redis": ("127.0.0.1", 6379)}[request.param]
    reason = reachable(*host_port)
    if reason:
        service_unavailable(request.param, reason)
    url = POSTGRES_URL if request.param == "postgresql" else REDIS_URL
    prefix = f"prismnt_{uuid.uuid4().hex[:8]}"
    yield {"url": url, "prefix": prefix}
    drop_demo_stores(url, prefix, STORE_PLUGINS)


@pytest.fixture
def anyio_backend() -> str:
    """The SQL and Redis drivers run on asyncio."""
    return "asyncio"


@pytest.fixture
async def stores(backend: dict[str, str]) -> AsyncIterator[Any]:
    """The backend's stores, as the next worker opens them."""
    pair = open_demo_stores(backend["url"], backend["prefix"], STORE_PLUGINS)
    async with pair:
        yield pair


@pytest.mark.anyio
async def test_a_notification_committed_before_a_sigkill_is_delivered_by_the_next_worker(
    backend: dict[str, str], stores: Any
) -> None:
    suspending = Worker({"url": backend["url"], "prefix": backend["prefix"]}, WORKER)
    line = await anyio.to_thread.run_sync(suspending.next)
    assert line is not None
    run_id = line["suspended"]
    await anyio.to_thread.run_sync(suspending.kill)

    (record,) = (await stores.checkpoints.list(OUTBOX_NAMESPACE)).records
    assert record.value["status"] == "pending"
    assert record.value["notification"]["run_id"] == run_id

    with Receiver() as receiver:
        stop = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(
                lambda: run_worker(
                    checkpoints=stores.checkpoints,
                    sessions=stores.sessions,
                    resolve_agent=lambda agent_id: (desk(stores.sessions), REVISION),
                    poll_ms=50,
                    stop=stop,
                    notifiers=[WebhookNotifier(receiver.url, secret=SECRET)],
                )
            )
            (delivery,) = await anyio.to_thread.run_sync(receiver.wait_for, 1)
            # The worker settles the record after the receiver's answer: wait for that (a
            # deadline, however busy the machine) before stopping it.
            for _ in range(1200):
                if not (await stores.checkpoints.list(OUTBOX_NAMESPACE)).records:
                    break
                await anyio.sleep(0.05)
            stop.set()
    body = delivery.json()
    assert (body["event"], body["run_id"], body["status"]) == ("suspended", run_id, "suspended")
    assert delivery.headers["X-Prism-Delivery"] == record.key == body["id"]
    assert delivery.headers["X-Prism-Signature"] == signature_of(delivery.body, SECRET)
    assert body["pending_decisions"][0]["arguments"] == {"amount": 250}
    assert (await stores.checkpoints.list(OUTBOX_NAMESPACE)).records == ()
