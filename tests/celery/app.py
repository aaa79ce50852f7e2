"""The host's Celery app the tests' workers run: ``celery -A tests.celery.app worker``.

Everything shared on the Redis and PostgreSQL servers is isolated by one prefix: the
broker's and the result backend's ``global_keyprefix`` (``<prefix>:``) and the stores' table
prefix (``<prefix>_``, carried in the store URL). The broker's visibility timeout is short
and unacknowledged messages are looked for every second, so a killed worker's task comes
back within seconds. The worker processes read their settings from the environment
(``PRISM_CELERY_TEST_*``); the test process builds its own client app with :func:`build_app`.
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery

from prism_celery import RunTasks, create_run_tasks

from .agents import resolve_agent

#: The queue ``continue_run`` and ``sweep`` are routed to; workers consume it and the
#: default queue (``celery``).
RECOVERY_QUEUE = "prism-recovery"


def build_app(
    *, prefix: str, broker: str, store: str, visibility_timeout: float, lease_ms: int
) -> tuple[Any, RunTasks]:
    """A Celery app on ``broker`` isolated by ``prefix``, with the run tasks on ``store``."""
    app = Celery(f"prism_celery_tests_{prefix}", broker=broker, backend=broker)
    app.conf.update(
        broker_transport_options={
            "global_keyprefix": f"{prefix}:",
            "visibility_timeout": visibility_timeout,
            "unacked_restore_interval": 1,
            "unacked_restore_throttle": 1,
        },
        result_backend_transport_options={"global_keyprefix": f"{prefix}:"},
        broker_connection_retry_on_startup=True,
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        worker_prefetch_multiplier=1,
        worker_hijack_root_logger=False,
        # Recovery does not wait behind the queue of new runs: workers consume both queues.
        task_routes={
            "prism_celery.continue_run": {"queue": RECOVERY_QUEUE},
            "prism_celery.sweep": {"queue": RECOVERY_QUEUE},
        },
    )
    tasks = create_run_tasks(app, resolve_agent=resolve_agent, store_url=store, lease_ms=lease_ms)
    return app, tasks


_PREFIX = os.environ.get("PRISM_CELERY_TEST_PREFIX", "prism_celery_idle")
app, tasks = build_app(
    prefix=_PREFIX,
    broker=os.environ.get("PRISM_CELERY_TEST_BROKER", "redis://127.0.0.1:6379/0"),
    store=os.environ.get("PRISM_CELERY_TEST_STORE", f"sqlite:///{_PREFIX}.db"),
    visibility_timeout=float(os.environ.get("PRISM_CELERY_TEST_VISIBILITY", "6")),
    lease_ms=int(os.environ.get("PRISM_CELERY_TEST_LEASE_MS", "2000")),
)
