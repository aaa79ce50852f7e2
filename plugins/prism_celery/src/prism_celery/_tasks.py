"""``create_run_tasks``: the four run tasks, registered on the host's Celery app.

Celery workers are synchronous: each task runs its coroutine with :func:`anyio.run`, opening
its stores inside that event loop and closing them before it returns.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import attrs

from prism_core import CheckpointStoreUnavailableError

from ._config import TaskSettings, make_settings
from ._errors import CeleryConfigError, RunTaskError
from ._outcome import RetryLater
from ._runs import STORE_RETRY_SECONDS, continue_run, expire_then_list, resume_run
from ._start import start_run
from ._stores import TaskStores, open_task_stores, warm_up

__all__ = ("RETRY_LIMIT", "TASK_OPTIONS", "RunTasks", "create_run_tasks", "retry_countdown")

#: The only options the tasks set; the broker and everything else stay the host's.
TASK_OPTIONS: dict[str, Any] = {"acks_late": True, "reject_on_worker_lost": True}

#: Retries of one task: a task retries while another worker holds its run (or a store does
#: not answer), so it ends when the run does; the limit only bounds a run that never ends.
RETRY_LIMIT = 100_000

#: Redis's default visibility timeout, assumed when the host's broker options name none.
_DEFAULT_VISIBILITY_TIMEOUT = 3600.0


@attrs.frozen
class RunTasks:
    """The registered tasks: ``start``, ``resume``, ``continue_run`` and ``sweep``."""

    start: Any = attrs.field(eq=False)
    resume: Any = attrs.field(eq=False)
    continue_run: Any = attrs.field(eq=False)
    sweep: Any = attrs.field(eq=False)


def retry_countdown(app: Any, wanted: float, retries: int) -> float:
    """Seconds until a retry: ``wanted`` (when a lease would expire), at least an exponential
    backoff of the retries so far, and always under half the broker's visibility timeout.

    A message Redis has handed to a worker comes back to the queue once the visibility timeout
    passes unacknowledged; a retry held longer than that would be delivered twice.
    """
    options = getattr(app.conf, "broker_transport_options", None) or {}
    visibility = float(options.get("visibility_timeout", _DEFAULT_VISIBILITY_TIMEOUT))
    backoff = min(2.0 ** min(retries, 8) * 0.5, 60.0)
    return round(max(0.1, min(max(wanted, backoff), visibility / 2)), 3)


def _runner(
    app: Any, settings: TaskSettings
) -> Callable[[Any, Callable[[TaskStores], Awaitable[Any]]], Any]:
    def run(task: Any, body: Callable[[TaskStores], Awaitable[Any]]) -> Any:
        async def main() -> Any:
            try:
                async with open_task_stores(settings) as stores:
                    return await body(stores)
            except CheckpointStoreUnavailableError as exc:
                # Nothing was decided: the run stays as its last write left it.
                raise RetryLater(STORE_RETRY_SECONDS, "a store did not answer") from exc

        try:
            return anyio.run(main)
        except RetryLater as later:
            countdown = retry_countdown(app, later.countdown, task.request.retries)
            if task.request.is_eager and not app.conf.task_eager_propagates:
                # Celery runs such an eager retry at once, nested in this call: without the
                # wait, a task waiting for another worker's lease would spin until the stack
                # ran out. (A propagating eager call hands the Retry to its caller instead.)
                time.sleep(countdown)
            raise task.retry(countdown=countdown, max_retries=RETRY_LIMIT, exc=later) from None

    return run


def create_run_tasks(
    app: Any,
    *,
    resolve_agent: Callable[[str], Any],
    store_url: str,
    lease_ms: int = 30000,
    sessions_url: str | None = None,
) -> RunTasks:
    """Register the run tasks on the host's Celery ``app`` and return them.

    ``resolve_agent(agent_id)`` (sync or async) returns ``(agent, definition_revision)`` or a
    mapping with those keys (a resume task calls one that takes a keyword ``revision`` with
    the run's recorded revision); the tasks run a copy of that agent on the session store at
    ``sessions_url`` (default: ``store_url``), with ``every-turn`` checkpoints and a lease of
    ``lease_ms``. Each task opens its stores from the URLs and closes them when it ends, and
    returns ``{"run_id", "session_id", "status"}``:

    - ``start(agent_id, session_id, input)``: the session's durable run (one per session,
      however often the task is delivered: a redelivery continues the run the first delivery
      started, see :mod:`prism_celery._start`);
    - ``resume(run_id, resume)``: any resume input (decisions, ``continue``, resolutions);
    - ``continue_run(run_id)``: carry on from the last checkpoint when no live worker holds it;
    - ``sweep()``: expire the decisions that waited past their deadline
      (``prism_core.expire_agent_runs``: each run it expires becomes recoverable), then
      enqueue ``continue_run`` for every recoverable run; returns how many it enqueued.

    A live lease makes a task retry later (its countdown under half the broker's visibility
    timeout); a worker that another worker superseded stops and its task retries the same way,
    so every task's ``status`` is where the run settled (suspended or ended). An eager call
    that does not propagate errors (``task_eager_propagates`` off) waits each retry's countdown
    in the calling thread; a propagating one raises Celery's ``Retry`` to its caller.
    Raises :class:`CeleryConfigError` for a wrong configuration, e.g. a ``memory://`` or an
    in-memory SQLite URL that other workers could never read.
    """
    if not callable(getattr(app, "task", None)):
        raise CeleryConfigError("app must be a Celery application (it has no task decorator)")
    settings = make_settings(
        resolve_agent=resolve_agent,
        store_url=store_url,
        lease_ms=lease_ms,
        sessions_url=sessions_url,
    )
    run = _runner(app, settings)
    _warm_up_workers(app, settings)
    # shared=False: registered on this app only, not on every app the process creates.
    register: Callable[..., Callable[[Callable[..., Any]], Any]] = functools.partial(
        app.task, bind=True, shared=False, **TASK_OPTIONS
    )

    @register(name="prism_celery.start")
    def start(self: Any, agent_id: str, session_id: str, input: str) -> dict[str, Any]:
        """Start the session's durable run, or carry on with the one it has."""
        done: dict[str, Any] = run(
            self, lambda stores: start_run(settings, stores, agent_id, session_id, input)
        )
        return done

    @register(name="prism_celery.resume")
    def resume(self: Any, run_id: str, resume: Mapping[str, Any]) -> dict[str, Any]:
        """Apply a resume input (decisions, ``continue``, resolutions) to ``run_id``."""
        done: dict[str, Any] = run(
            self, lambda stores: resume_run(settings, stores, _run_id(run_id), resume)
        )
        return done

    @register(name="prism_celery.continue_run")
    def continue_(self: Any, run_id: str) -> dict[str, Any]:
        """Continue ``run_id`` from its last checkpoint."""
        done: dict[str, Any] = run(
            self, lambda stores: continue_run(settings, stores, _run_id(run_id))
        )
        return done

    @register(name="prism_celery.sweep")
    def sweep(self: Any) -> int:
        """Expire overdue decisions, then enqueue ``continue_run`` for every recoverable run;
        return how many were enqueued."""
        run_ids: list[str] = run(self, expire_then_list)
        for run_id in run_ids:
            continue_.apply_async(args=(run_id,))
        return len(run_ids)

    return RunTasks(start=start, resume=resume, continue_run=continue_, sweep=sweep)


def _warm_up_workers(app: Any, settings: TaskSettings) -> None:
    # Deferred: celery's signals load the worker machinery; a process that only registers
    # the tasks (or discovers the plugin) must not pay for it.
    from celery import signals

    def on_worker_setup(sender: Any = None, instance: Any = None, **_: Any) -> None:
        # Sent by `celery worker` once its logging is set up, before it consumes.
        if getattr(instance, "app", None) is app:
            warm_up(settings)

    signals.celeryd_after_setup.connect(on_worker_setup, weak=False)


def _run_id(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise RunTaskError("run_id must be a non-empty string", code="ERR_PRISM_CELERY_INPUT")
    return value
