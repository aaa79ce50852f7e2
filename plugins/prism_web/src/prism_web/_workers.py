"""The workers a face runs, and the runs it starts for its callers, beside its requests.

A face's requests only decide and watch: a decision is recorded (``decide_agent_run``) and run
by a worker, a new run is started in a task of the face's own, never in the request, so a
client that goes away only stops watching. :class:`FaceWorkers` holds both. It needs no
lifespan (a face is often mounted inside a host's app, whose lifespan never reaches it): the
workers start with the face's first request, as tasks of the server's event loop
(``prism_core.start_detached``), and stop when :meth:`FaceWorkers.aclose` is called (the
face's own lifespan, when it has one) or with the event loop. A worker stopped that way
leaves its runs ``running``; the next worker continues them once their lease has expired.
With ``notifiers``, the workers also deliver the stores' notifications (with ``workers=0``, a
deliverer of its own does, so a face that runs no worker still notifies).

It must not read requests or speak a protocol: the faces do.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio

from prism_core import (
    Detached,
    NotifierConfigError,
    StorePair,
    run_deliverer,
    run_worker,
    start_detached,
)

__all__ = ("FaceWorkers",)


class FaceWorkers:
    """``workers`` run claims (0: none) over ``stores`` with ``resolve_agent``, each under a
    ``lease_ms`` lease, delivering the stores' notifications to ``notifiers`` (more of
    ``run_worker``'s options in ``worker_options``); and the background runs a face starts."""

    def __init__(
        self,
        stores: StorePair,
        resolve_agent: Callable[..., Any],
        *,
        workers: int,
        lease_ms: int,
        notifiers: Sequence[Any] = (),
        **worker_options: Any,
    ) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
            raise ValueError(f"workers must be 0 or more, got {workers!r}")
        self.stores = stores
        self.resolve_agent = resolve_agent
        self.workers = workers
        self.lease_ms = lease_ms
        if isinstance(notifiers, str | bytes) or not all(
            callable(getattr(notifier, "deliver", None)) for notifier in notifiers
        ):
            # Checked now: the workers run detached, where a refusal would come too late.
            raise NotifierConfigError("notifiers must each have an async deliver(notification)")
        self.notifiers = tuple(notifiers)
        #: More of ``run_worker``'s options (restore hooks, hand-over hooks).
        self.worker_options = worker_options
        self._stop: anyio.Event | None = None
        self._task: Detached | None = None
        self._runs: set[Detached] = set()

    def ensure_started(self) -> None:
        """Start the workers (once; a no-op with ``workers=0`` and no notifiers), on this
        event loop."""
        if self._task is not None or (self.workers == 0 and not self.notifiers):
            return
        self._stop = anyio.Event()
        if self.workers == 0:
            self._task = start_detached(
                functools.partial(
                    run_deliverer,
                    checkpoints=self.stores.checkpoints,
                    notifiers=self.notifiers,
                    stop=self._stop,
                )
            )
            return
        self._task = start_detached(
            functools.partial(
                run_worker,
                checkpoints=self.stores.checkpoints,
                sessions=self.stores.sessions,
                resolve_agent=self.resolve_agent,
                lease_ms=self.lease_ms,
                concurrency=self.workers,
                stop=self._stop,
                notifiers=self.notifiers,
                **self.worker_options,
            )
        )

    def start_run(self, run: Callable[[], Awaitable[Any]]) -> Detached:
        """Run ``run()`` in a task of the face's own, not of the request that asked for it
        (the workers start with it: they deliver what the run notifies)."""
        self.ensure_started()
        self._runs = {task for task in self._runs if not task.done}
        task = start_detached(run)
        self._runs.add(task)
        return task

    async def aclose(self) -> None:
        """Stop the workers (runs in flight stay ``running`` for the next worker) and wait
        for the background runs this face started."""
        if self._stop is not None:
            self._stop.set()
        if self._task is not None:
            await self._task.wait()
        for task in tuple(self._runs):
            task.cancel()
            await task.wait()
        self._runs.clear()
