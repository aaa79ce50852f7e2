"""Durable Prism runs as Celery tasks.

``create_run_tasks(app, resolve_agent=..., store_url=...)`` registers ``start``, ``resume``,
``continue_run`` and ``sweep`` on the host's Celery app (``acks_late``,
``reject_on_worker_lost``); workers are the host's own ``celery -A their_app worker``. Runs
checkpoint every turn and hold a lease, so a task redelivered after a worker died continues
the run from its last turn without running a tool twice. See docs/scale-out.md.
"""

from __future__ import annotations

from ._errors import CeleryConfigError, RunTaskError
from ._start import SESSION_CLAIM_NAMESPACE
from ._tasks import TASK_OPTIONS, RunTasks, create_run_tasks

__all__ = (
    "SESSION_CLAIM_NAMESPACE",
    "TASK_OPTIONS",
    "CeleryConfigError",
    "RunTaskError",
    "RunTasks",
    "create_run_tasks",
)
