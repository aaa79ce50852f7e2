"""The stores one task works on, opened from the configured URLs and closed when it ends."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import attrs

from prism_core import (
    CheckpointStore,
    StorePair,
    discover_plugins,
    open_checkpoint_store,
    open_session_store,
    open_stores,
)

from ._config import TaskSettings

__all__ = ("TaskStores", "open_task_stores", "warm_up")


@functools.cache
def _plugins() -> tuple[object, ...]:
    # Entry points are read once per worker process, not once per task.
    return tuple(discover_plugins())


@attrs.frozen
class TaskStores:
    """The checkpoint store and the session store of one task."""

    checkpoints: CheckpointStore = attrs.field(eq=False)
    sessions: Any = attrs.field(eq=False)


async def _close(store: Any) -> None:
    closer = getattr(store, "aclose", None)
    if closer is not None:
        await closer()


@asynccontextmanager
async def open_task_stores(settings: TaskSettings) -> AsyncIterator[TaskStores]:
    """Open both stores through the installed store plugins (``prism_store_sql`` for
    ``sqlite://`` and ``postgresql://``, ``prism_store_redis`` for ``redis://``) and close them
    when the block ends.

    One URL (no ``sessions_url``, or the same one) opens them as a pair
    (``prism_core.open_stores``): one connection, engine or client, on which a durable turn's
    session entries and checkpoint commit together. Two URLs open two stores, which commit
    apart.
    """
    if settings.sessions_url == settings.store_url:
        pair = open_stores(settings.store_url, plugins=_plugins())
    else:
        checkpoints = open_checkpoint_store(settings.store_url, plugins=_plugins())
        try:
            sessions = open_session_store(settings.sessions_url, plugins=_plugins())
        except BaseException:
            await _close(checkpoints)
            raise
        pair = StorePair(checkpoints, sessions)
    try:
        yield TaskStores(checkpoints=pair.checkpoints, sessions=pair.sessions)
    finally:
        await pair.aclose()


def warm_up(settings: TaskSettings) -> None:
    """Load the store plugins and open (then close) both stores once, when a worker starts.

    Reading the ``prism`` entry points imports every installed plugin, which can take
    seconds; done here, the first task does not pay for it, and a URL no installed plugin
    opens is reported in the worker's log when it starts. Opening a store connects to
    nothing, so a database that is down does not stop the worker.
    """

    async def open_and_close() -> None:
        async with open_task_stores(settings):
            pass

    anyio.run(open_and_close)
