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
    discover_store_plugins,
    open_checkpoint_store,
    open_session_store,
    open_stores,
)

from ._config import TaskSettings

__all__ = ("TaskStores", "open_task_stores", "warm_up")


def _plugins(url: str) -> tuple[object, ...]:
    """The store plugins declared for ``url``'s scheme (only they are imported: a task that
    opens its stores loads no model SDK or other plugin)."""
    head, _, _ = url.partition(":")
    return _scheme_plugins(head.split("+", 1)[0].lower())


@functools.cache
def _scheme_plugins(scheme: str) -> tuple[object, ...]:
    # Entry points are read once per scheme and worker process, not once per task.
    return tuple(discover_store_plugins(f"{scheme}:"))


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
        pair = open_stores(settings.store_url, plugins=_plugins(settings.store_url))
    else:
        store_url, sessions_url = settings.store_url, settings.sessions_url
        checkpoints = open_checkpoint_store(store_url, plugins=_plugins(store_url))
        try:
            sessions = open_session_store(sessions_url, plugins=_plugins(sessions_url))
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

    Importing the store plugins (only those declared for the URLs' schemes, under the
    ``prism.stores`` entry-point group) and building the stores takes a while; done here,
    the first task does not pay for it, and a URL no installed plugin opens is reported in
    the worker's log when it starts. Opening a store connects to
    nothing, so a database that is down does not stop the worker.
    """

    async def open_and_close() -> None:
        async with open_task_stores(settings):
            pass

    anyio.run(open_and_close)
