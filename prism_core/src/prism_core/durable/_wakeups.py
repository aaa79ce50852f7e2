"""Wake-ups: telling idle workers, in any process on the same stores, that a run needs one.

A decision recorded in one process (``decide_agent_run``, an operator's CLI, a face) must
reach a worker waiting in another without a fixed poll interval on that path. A checkpoint
store that can carry such a signal offers :class:`RunWakeups`; the kernel asks for it with
``capability(store, RunWakeups)`` and, without it, workers fall back to their poll.

Rules (``prism_core.testing.RunWakeupsConformance`` checks them):

- ``notify_runs()`` reaches every watch that is open on the same stores (same database,
  same table or key prefix), in this process or another, while it is open; a watch opened
  after a notification does not see it. It never raises for a watch that went away.
- ``watch_runs()`` is an async context manager; inside it ``await watch.wait(seconds)``
  returns ``True`` once a notification arrived since the last ``wait`` returned (several
  coalesce into one) and ``False`` when ``seconds`` passed without one.
- A notification is a hint, never the record of the work: it may be lost (a process dies
  between its write and its notification), so a worker still polls, rarely.

:class:`LocalWakeups` is the in-process form, for stores that live in one process (the
memory store). It must not decide what is written or when.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol, runtime_checkable

import anyio

__all__ = ("LocalWakeups", "RunWakeups", "RunWatch")


class RunWatch(Protocol):
    """An open subscription to a store's run notifications."""

    async def wait(self, seconds: float) -> bool:
        """``True`` once a notification arrived since the last call returned, ``False``
        after ``seconds`` without one."""
        ...


@runtime_checkable
class RunWakeups(Protocol):
    """A checkpoint store that can wake workers watching the same stores."""

    async def notify_runs(self) -> None:
        """Wake every open watch on these stores (best effort; never raises for a watch
        that went away)."""
        ...

    def watch_runs(self) -> AbstractAsyncContextManager[RunWatch]:
        """Open a watch (see the module docstring)."""
        ...


class _LocalWatch:
    def __init__(self) -> None:
        self.pending = False
        self.event = anyio.Event()

    def wake(self) -> None:
        self.pending = True
        self.event.set()

    async def wait(self, seconds: float) -> bool:
        if not self.pending:
            with anyio.move_on_after(seconds):
                await self.event.wait()
        woken = self.pending
        if woken:
            self.pending = False
            self.event = anyio.Event()
        return woken


class LocalWakeups:
    """Wake-ups between tasks of one process (one event loop): what a process-local store
    offers as :class:`RunWakeups`."""

    def __init__(self) -> None:
        self._watches: set[_LocalWatch] = set()

    async def notify_runs(self) -> None:
        """Wake every open watch of this process."""
        for watch in tuple(self._watches):
            watch.wake()

    @asynccontextmanager
    async def watch_runs(self) -> AsyncIterator[RunWatch]:
        """A watch of this process's notifications."""
        watch = _LocalWatch()
        self._watches.add(watch)
        try:
            yield watch
        finally:
            self._watches.discard(watch)
