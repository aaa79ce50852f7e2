"""A task that outlives the call that started it, on asyncio and on trio alike.

``session.stream()`` is an async iterator, not a context manager: there is no task group
around it to run the stream's run in. Yet the run must go on while its consumer pauses (the
consumer's queue is bounded by ``max_queued_events`` and ``overflow``, not by the run). So the
stream starts its run as a detached task of the event loop: an asyncio task, or a trio system
task; the stream owns it, cancels it when the consumer leaves, and awaits it before it ends.

A detached task never raises into the event loop (but for its own cancellation): what it
raises is kept and re-raised by :meth:`Detached.wait`. It must not hold run logic.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

__all__ = ("Detached", "start_detached")


class Detached:
    """A running detached task: :meth:`cancel` it, :meth:`wait` for its end."""

    def __init__(self) -> None:
        self._done = anyio.Event()
        self._scope = anyio.CancelScope()
        self._error: BaseException | None = None
        self._handle: Any = None

    @property
    def done(self) -> bool:
        """Whether the task has ended."""
        return self._done.is_set()

    def cancel(self) -> None:
        """Cancel the task (safe from any task of its event loop; a no-op once ended)."""
        self._scope.cancel()

    async def wait(self) -> None:
        """Wait until the task has ended; re-raise what it raised (a cancellation of its own
        is not an error)."""
        await self._done.wait()
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    async def _run(self, function: Callable[[], Awaitable[Any]]) -> None:
        try:
            with self._scope:
                await function()
        except anyio.get_cancelled_exc_class():
            raise
        except BaseException as exc:
            # Whatever ends the task (a simulated crash included) is its waiter's to see.
            self._error = exc
        finally:
            self._done.set()


def _running_trio() -> Any:
    """The ``trio`` module when this task runs under trio, else ``None``."""
    trio = sys.modules.get("trio")
    if trio is None:
        return None
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return None
    return trio


def start_detached(function: Callable[[], Awaitable[Any]]) -> Detached:
    """Start ``function()`` as a task of the running event loop that no task group owns."""
    task = Detached()
    trio = _running_trio()
    if trio is not None:
        trio.lowlevel.spawn_system_task(task._run, function)
    else:
        # asyncio keeps only weak references to its tasks: the handle holds this one.
        task._handle = asyncio.get_running_loop().create_task(task._run(function))
    return task
