"""The branch-and-run-tail read on the thread-driven SQLite backend, by the ``seq`` index.

SQLite runs a recursive query a step at a time (an index lookup, a row lookup and a queue
entry per ancestor), several times the cost of reading the same rows in index order. A branch
is usually the session's rows below the leaf, in order; so the read is one statement (one
consistent snapshot, no transaction to open and commit) over the ``(session_id, seq)`` index,
newest row first: the run's rows after the leaf, the leaf, then every row below it.

1. Rows before the leaf are the run's later entries (the tail), newest first.
2. From the leaf down, the walk follows ``parent_id`` links: a row on the branch is kept, a
   row of another branch skipped (never decoded); the walk ends at the root. An ancestor
   always has a lower ``seq`` than its child (the parent exists when the child is appended).
   When the skipped rows outnumber the branch so far by :data:`SKIP_SLACK`, the read is made
   again inside one read transaction with the recursive query for the branch, so a short
   branch beside a long abandoned one still reads only itself and a few more rows.

Rows come back undecoded, with the columns :data:`~._branch_rows.BRANCH_READ_COLUMNS`;
:func:`decode_rows` checks and decodes them.
"""

from __future__ import annotations

import functools
import sqlite3
from typing import Any

import attrs

from prism_core.stores import (
    BranchAndRunTail,
    SessionEntry,
    SessionEntryNotFoundError,
    decode_entry_columns,
    echo,
)

from ._sqlite import CompiledStatement
from ._sqlite_text import stored_statement

__all__ = (
    "SKIP_SLACK",
    "BranchTailStatements",
    "decode_rows",
    "read_rows",
    "tuple_cursor",
)

#: How many more rows of other branches than branch rows the walk reads before it switches
#: to the recursive query.
SKIP_SLACK = 32

# Positions in a row of the read (``BRANCH_READ_COLUMNS``): id, parent_id, kind, payload,
# run_id, timestamp.
_ID, _PARENT = 0, 1


@attrs.frozen
class BranchTailStatements:
    """The compiled statements of the read, made once per tables in a process."""

    leaf_seq: CompiledStatement
    from_leaf: CompiledStatement
    after: CompiledStatement
    branch: CompiledStatement

    @classmethod
    @functools.lru_cache(maxsize=64)
    def for_prefix(cls, prefix: str) -> BranchTailStatements:
        """The statements for ``prefix`` (stored text, see :mod:`._sqlite_text`), one per
        prefix in a process."""
        return cls(
            leaf_seq=stored_statement(prefix, "branch_tail.leaf_seq"),
            from_leaf=stored_statement(prefix, "branch_tail.from_leaf"),
            after=stored_statement(prefix, "branch_tail.after"),
            branch=stored_statement(prefix, "sessions.branch"),
        )


def tuple_cursor(connection: sqlite3.Connection) -> sqlite3.Cursor:
    """A cursor on ``connection`` whose rows are plain tuples: entry and checkpoint rows are
    read by position, so they need no per-row attribute class."""
    cursor = connection.cursor()
    cursor.row_factory = None
    return cursor


def read_rows(
    connection: sqlite3.Connection,
    sql: BranchTailStatements,
    session_id: str,
    leaf_id: str | None,
    run_id: str,
) -> tuple[list[Any], list[Any]]:
    """``(branch rows root first, the run's later rows)`` from one consistent read, as
    tuples. The branch rows are empty when the leaf is not in the session, and may stop
    short of the root when a parent is missing; :func:`decode_rows` checks them."""
    cursor = tuple_cursor(connection)
    try:
        if leaf_id is None:
            after = sql.after.params({"session": session_id, "leaf_seq": 0, "run": run_id})
            return [], cursor.execute(sql.after.text, after).fetchall()
        params = sql.from_leaf.params({"session": session_id, "leaf": leaf_id, "run": run_id})
        tail: list[Any] = []
        path: list[Any] = []
        wanted: str | None = leaf_id
        skipped = 0
        for row in cursor.execute(sql.from_leaf.text, params):
            if not path:
                if row[_ID] != leaf_id:
                    tail.append(row)
                    continue
            elif row[_ID] != wanted:
                skipped += 1
                if skipped > len(path) + SKIP_SLACK:
                    break
                continue
            path.append(row)
            wanted = row[_PARENT]
            if wanted is None:
                path.reverse()
                tail.reverse()
                return path, tail
        if not path:
            return [], []  # the leaf is not in the session
    finally:
        cursor.close()
    # A branch beside many rows of other branches, or one whose parent is missing: the
    # recursive query reads exactly the branch (and shows where it breaks).
    return _read_with_recursion(connection, sql, session_id, leaf_id, run_id)


def _read_with_recursion(
    connection: sqlite3.Connection,
    sql: BranchTailStatements,
    session_id: str,
    leaf_id: str,
    run_id: str,
) -> tuple[list[Any], list[Any]]:
    cursor = tuple_cursor(connection)
    try:
        cursor.execute("BEGIN")
        found = cursor.execute(
            sql.leaf_seq.text, sql.leaf_seq.params({"leaf": leaf_id, "session": session_id})
        ).fetchone()
        if found is None:
            cursor.execute("COMMIT")
            return [], []
        branch = sql.branch.params({"leaf": leaf_id, "session": session_id})
        # The session store's own query selects every column: keep the read's.
        path = [
            (row[0], row[2], row[4], row[5], row[6], row[7])
            for row in cursor.execute(sql.branch.text, branch)
        ]
        after = sql.after.params({"session": session_id, "leaf_seq": found[0], "run": run_id})
        tail = cursor.execute(sql.after.text, after).fetchall()
        cursor.execute("COMMIT")
        return path, tail
    finally:
        cursor.close()


def decode_rows(
    path: list[Any], tail: list[Any], session_id: str, leaf_id: str | None
) -> BranchAndRunTail:
    """The answer for the read's rows (see :func:`read_rows`): the branch checked to reach
    from the root to ``leaf_id`` (else :class:`~prism_core.stores.SessionEntryNotFoundError`
    naming the missing entry), both decoded."""
    if leaf_id is None:
        return BranchAndRunTail(path=[], tail=_entries(tail, session_id))
    if not path:
        raise SessionEntryNotFoundError(f"session {echo(session_id)} has no entry {echo(leaf_id)}")
    root_parent = path[0][_PARENT]
    if root_parent is not None:
        raise SessionEntryNotFoundError(
            f"session {echo(session_id)} has no entry {echo(root_parent)}"
        )
    return BranchAndRunTail(path=_entries(path, session_id), tail=_entries(tail, session_id))


def _entries(rows: list[Any], session_id: str) -> list[SessionEntry]:
    decode = decode_entry_columns
    return [decode(row[3], row[0], session_id, row[1], row[2], row[4], row[5]) for row in rows]
