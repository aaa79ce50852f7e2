"""The worker thread of a thread-driven SQLite database: it runs the database's operations
for asyncio callers, in order, and takes the writes queued while a commit is in flight as one
group (see :meth:`~prism_store_sql._sqlite.SqliteDatabase.write`). It knows no SQL: the group
is handed to the database's batch function; answers go back to each caller's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

__all__ = ("Worker", "Write", "running_loop")


class Write:
    """One queued write transaction: its body runs between the batch's ``BEGIN IMMEDIATE``
    and ``COMMIT`` (see :meth:`SqliteDatabase.write`)."""

    __slots__ = ("action", "body", "future", "single")

    def __init__(
        self,
        future: asyncio.Future[Any],
        action: str,
        body: Callable[[sqlite3.Connection], Any],
        single: bool = False,
    ) -> None:
        self.future = future
        self.action = action
        self.body = body
        #: The body is one statement: alone in a group, it runs as its own transaction.
        self.single = single


class Worker:
    """The thread that runs one database's operations for asyncio callers, in order.

    Given a ``batch`` function, consecutive queued writes (:class:`Write`) are taken
    together, up to ``max_batch`` of them, and handed to it as one group: the writes that
    arrived while the previous commit was in flight share the next one.
    """

    def __init__(
        self,
        name: str = "prism-sqlite",
        batch: Callable[[list[Write]], list[tuple[bool, Any]]] | None = None,
        max_batch: int = 1,
    ) -> None:
        self._name = name
        self._batch = batch
        self._max_batch = max_batch
        self._items: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def _ensure_thread(self) -> None:
        # Not alive: never started, or this is a forked child, which has no copy of it.
        if self._thread is None or not self._thread.is_alive():
            self._items = queue.SimpleQueue()
            self._thread = threading.Thread(
                target=self._serve, args=(self._items,), name=self._name, daemon=True
            )
            self._thread.start()

    def submit(self, future: asyncio.Future[Any], call: Callable[[], Any]) -> None:
        """Queue ``call`` for the thread (started if needed); its answer settles ``future``."""
        self._ensure_thread()
        self._items.put((future, call))

    def submit_write(self, item: Write) -> None:
        """Queue a write for the thread, which may commit it with the writes queued beside it."""
        self._ensure_thread()
        self._items.put(item)

    def stop(self) -> None:
        """Let the thread finish what is queued and end; idempotent."""
        if self._thread is not None:
            self._items.put(None)
            self._thread = None

    def _serve(self, items: queue.SimpleQueue[Any]) -> None:
        held: Any = _NOTHING  # taken from the queue while gathering a group, not yet run
        while True:
            item, held = (items.get() if held is _NOTHING else held), _NOTHING
            if item is None:
                return
            if isinstance(item, Write):
                group = [item]
                # Every write already queued (they arrived while the last commit was in
                # flight) joins this commit, up to the group's bound; order is kept.
                while len(group) < self._max_batch:
                    try:
                        following = items.get_nowait()
                    except queue.Empty:
                        break
                    if not isinstance(following, Write):
                        held = following
                        break
                    group.append(following)
                assert self._batch is not None
                try:
                    outcomes = self._batch(group)
                except BaseException as error:  # pragma: no cover - the batch settles its own
                    outcomes = [(False, error)] * len(group)
                _answer_group(group, outcomes)
                continue
            future, call = item
            try:
                result: tuple[bool, Any] = (True, call())
            except BaseException as error:
                result = (False, error)
            _answer(future, result)


_NOTHING = object()


def _answer(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    # A closed event loop refuses the answer: nobody waits for it any more.
    with contextlib.suppress(RuntimeError):
        future.get_loop().call_soon_threadsafe(_settle, future, outcome)


def _answer_group(group: list[Write], outcomes: list[tuple[bool, Any]]) -> None:
    # One wake-up per event loop for the whole group, not one per write: a group of 32 turn
    # commits is settled by one callback, not 32 writes to the loop's wake-up pipe.
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any]]] = {}
    for write, outcome in zip(group, outcomes, strict=True):
        by_loop.setdefault(write.future.get_loop(), []).append((write.future, outcome))
    for loop, answers in by_loop.items():
        # A closed event loop refuses the answers: nobody waits for them any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle_all, answers)


def _settle_all(answers: list[tuple[asyncio.Future[Any], tuple[bool, Any]]]) -> None:
    for future, outcome in answers:
        _settle(future, outcome)


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if future.done():
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The asyncio event loop running in this thread, or ``None``."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
