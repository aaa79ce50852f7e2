"""Which run wake-ups a SQL checkpoint store offers (:class:`~prism_core.stores.RunWakeups`).

Every SQL checkpoint store wakes the workers watching the same database and table prefix,
in this process and in others, so a decision recorded anywhere reaches an idle worker at
once instead of at its poll:

- PostgreSQL: ``NOTIFY`` / ``LISTEN`` on the prefix's channel (:mod:`._pg_wakeups`).
- A SQLite file, on either backend (``sqlite:///`` or ``sqlite+aiosqlite:///``): a Unix
  datagram socket per watch in a directory beside the file (:mod:`._file_wakeups`).
- An in-memory SQLite database lives in one process and on one connection: the in-process
  form, one per connection (the thread-driven stores built on one ``SqliteDatabase``, or one
  engine), per prefix.

The stores' ``notify_runs`` and ``watch_runs`` ask :func:`sql_wakeups` for theirs; it builds
nothing that holds a resource (a watch holds its connection or socket only while it is open).
"""

from __future__ import annotations

import weakref
from contextlib import AbstractAsyncContextManager
from functools import lru_cache
from typing import Any, Protocol

from prism_core.stores import CheckpointStoreError, LocalWakeups, RunWatch

from ._base import EngineStoreBase
from ._engine import sqlite_file
from ._file_wakeups import FileWakeups
from ._pg_wakeups import PostgresWakeups
from ._store_types import SqlCheckpointStore

__all__ = ("SqlWakeups", "sql_wakeups")


class SqlWakeups(Protocol):
    """What a SQL store's wake-ups do (the two methods of ``RunWakeups``)."""

    async def notify_runs(self) -> None:
        """Wake the watches on the same database and prefix."""
        ...

    def watch_runs(self) -> AbstractAsyncContextManager[RunWatch]:
        """Open a watch."""
        ...


#: The in-process wake-ups of in-memory databases, by their connection holder and prefix.
_IN_MEMORY: weakref.WeakKeyDictionary[Any, dict[str, LocalWakeups]] = weakref.WeakKeyDictionary()


def _in_memory(holder: object, prefix: str) -> LocalWakeups:
    by_prefix = _IN_MEMORY.setdefault(holder, {})
    found = by_prefix.get(prefix)
    if found is None:
        found = by_prefix[prefix] = LocalWakeups()
    return found


@lru_cache(maxsize=256)
def _file(path: str, prefix: str) -> FileWakeups:
    # Cached: the real path of the file is resolved once per file, not at every notification.
    return FileWakeups(path, prefix)


def _sqlite_path(path: str) -> str | None:
    """The file of a thread-driven store's database path; ``None`` when in memory."""
    if path.startswith("file:"):
        # A URI filename: the in-memory forms, or a file named by its path.
        rest, _, query = path[5:].partition("?")
        if not rest or rest == ":memory:" or "mode=memory" in query:
            return None
        return rest
    return None if path in ("", ":memory:") else path


class _Closed:
    """The wake-ups of a closed store: every call fails as the store's own calls do."""

    def __init__(self, name: str) -> None:
        self._message = f"this {name} is closed"

    async def notify_runs(self) -> None:
        raise CheckpointStoreError(self._message)

    def watch_runs(self) -> AbstractAsyncContextManager[RunWatch]:
        raise CheckpointStoreError(self._message)


def sql_wakeups(store: SqlCheckpointStore) -> SqlWakeups:
    """The wake-ups of a SQL checkpoint store (either backend), by the database it is on."""
    if store.closed:
        return _Closed(type(store).__name__)
    prefix = store.table_prefix
    if not isinstance(store, EngineStoreBase):
        # The thread-driven SQLite backend: one sqlite3 connection.
        database: Any = store.database  # type: ignore[attr-defined]
        path = _sqlite_path(database.path)
        return _in_memory(database, prefix) if path is None else _file(path, prefix)
    engine = store.engine
    if engine.dialect.name == "postgresql":
        return PostgresWakeups(engine, prefix, store._direct)
    file = sqlite_file(engine.url)
    return _in_memory(engine, prefix) if file is None else _file(str(file), prefix)
