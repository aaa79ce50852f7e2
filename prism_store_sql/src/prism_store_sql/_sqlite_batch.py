"""The SQLite commit batch: the writes queued while a commit was in flight, in one transaction.

The database's writer thread hands a group of queued writes (:class:`~._sqlite_worker.Write`)
to :func:`commit_group` with the writing connection: one ``BEGIN IMMEDIATE``, each write's
body, one ``COMMIT``. A group is first run without savepoints (two statements fewer per
write; refusals are rare); when a write fails, everything is rolled back and the group runs
again with a savepoint per write, so each failure stays its caller's alone. A failed
``BEGIN`` or ``COMMIT`` (or a failure that ends the transaction) fails every write of the
group with the same typed error, none of them written. It must not open connections or know
the statements a body runs.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

from prism_core.stores import CheckpointStoreError

from ._sqlite_connection import sqlite_error
from ._sqlite_worker import Write

__all__ = ("alone", "commit_group", "fail_all")

T = TypeVar("T")

#: Each write's outcome: ``(True, value)`` or ``(False, exception)``.
Outcomes = list[tuple[bool, Any]]


def commit_group(connection: sqlite3.Connection, group: list[Write]) -> Outcomes:
    """Run ``group``'s bodies on ``connection`` in one transaction and commit it."""
    try:
        if len(group) == 1 and group[0].single:
            # One statement alone: its own transaction (autocommit), one commit.
            return [(True, group[0].body(connection))]
        connection.execute("BEGIN IMMEDIATE")
    except BaseException as error:
        return fail_all(group, connection, error)
    if len(group) > 1:
        outcomes = _run_group(connection, group, isolated=False)
        if outcomes is None:
            try:
                connection.execute("BEGIN IMMEDIATE")
            except BaseException as error:
                return fail_all(group, connection, error)
            outcomes = _run_group(connection, group, isolated=True)
    else:
        outcomes = _run_group(connection, group, isolated=True)
    assert outcomes is not None
    return outcomes


def _run_group(
    connection: sqlite3.Connection, group: list[Write], *, isolated: bool
) -> Outcomes | None:
    """Each write's outcome, the transaction begun on ``connection`` committed (or rolled
    back when nothing is left to write). Not ``isolated`` (no savepoints): ``None`` when a
    write failed, everything rolled back."""
    outcomes: Outcomes = []
    savepoints = isolated and len(group) > 1
    written = 0
    for write in group:
        try:
            if savepoints:
                connection.execute("SAVEPOINT prism_write")
            value = write.body(connection)
            if savepoints:
                connection.execute("RELEASE prism_write")
        except BaseException as error:
            if not connection.in_transaction:
                # SQLite ended the transaction itself (I/O error, disk full): the writes
                # before this one are gone too.
                return fail_all(group, connection, error)
            try:
                if savepoints:
                    connection.execute("ROLLBACK TO prism_write")
                    connection.execute("RELEASE prism_write")
                else:
                    connection.rollback()
            except BaseException as undo:  # pragma: no cover - rollback failing
                return fail_all(group, connection, undo)
            if not isolated:
                return None
            outcomes.append((False, _typed(write.action, error)))
            continue
        outcomes.append((True, value))
        written += 1
    if not connection.in_transaction:
        return outcomes  # one write alone, rolled back
    try:
        if written:
            connection.execute("COMMIT")
        else:
            connection.rollback()
    except BaseException as error:
        return fail_all(group, connection, error)
    return outcomes


def _typed(action: str, error: BaseException) -> BaseException:
    return sqlite_error(action, error) if isinstance(error, sqlite3.Error) else error


def alone(connection: sqlite3.Connection, body: Callable[[sqlite3.Connection], T]) -> T:
    """``body`` in a transaction of its own (:meth:`~._sqlite.SqliteDatabase.run` rolls back on
    failure)."""
    connection.execute("BEGIN IMMEDIATE")
    value = body(connection)
    connection.execute("COMMIT")
    return value


def fail_all(
    group: list[Write], connection: sqlite3.Connection | None, error: BaseException
) -> list[tuple[bool, Any]]:
    """Every write of ``group`` failed with ``error`` (typed, one exception each), the
    transaction rolled back: none of them is written."""
    if connection is not None and connection.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            connection.rollback()
    outcomes: list[tuple[bool, Any]] = []
    for write in group:
        if isinstance(error, sqlite3.Error):
            typed: BaseException = sqlite_error(write.action, error)
            typed.__cause__ = error
        elif isinstance(error, CheckpointStoreError) and len(group) > 1:
            typed = type(error)(str(error))
            typed.__cause__ = error
        else:
            typed = error
        outcomes.append((False, typed))
    return outcomes
