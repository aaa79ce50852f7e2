"""The branch-and-run-tail read on the thread-driven SQLite backend, by the ``seq`` index.

SQLite runs a recursive query a step at a time (an index lookup, a row lookup and a queue
entry per ancestor), several times the cost of reading the same rows in index order. A branch
is usually the session's rows below the leaf, in order; so, inside one read transaction:

1. the leaf's ``seq``;
2. the session's rows from that ``seq`` down, through the ``(session_id, seq)`` index,
   walking ``parent_id`` links from the leaf: a row on the branch is kept, a row of another
   branch skipped (never decoded); the walk ends at the root. An ancestor always has a lower
   ``seq`` than its child (the parent exists when the child is appended). When the skipped
   rows outnumber the branch so far by :data:`SKIP_SLACK`, the branch is read with the
   recursive query instead, so a short branch beside a long abandoned one still reads only
   itself and a few more rows;
3. the run's rows above the leaf's ``seq``, in order.

Rows come back undecoded; the caller checks them like any branch read's rows.
"""

from __future__ import annotations

import functools
import sqlite3
from typing import Any

import attrs

from ._sqlite import CompiledStatement
from ._sqlite_text import stored_statement

__all__ = (
    "SKIP_SLACK",
    "BranchTailStatements",
    "read_rows",
    "tuple_cursor",
)

#: How many more rows of other branches than branch rows the walk reads before it switches
#: to the recursive query.
SKIP_SLACK = 32

# Positions in an entry row (every statement selects the table's columns in table order).
_ID, _PARENT = 0, 2


@attrs.frozen
class BranchTailStatements:
    """The compiled statements of the read, made once per tables in a process."""

    leaf_seq: CompiledStatement
    below: CompiledStatement
    after: CompiledStatement
    branch: CompiledStatement

    @classmethod
    @functools.lru_cache(maxsize=64)
    def for_prefix(cls, prefix: str) -> BranchTailStatements:
        """The statements for ``prefix`` (stored text, see :mod:`._sqlite_text`), one per
        prefix in a process."""
        return cls(
            leaf_seq=stored_statement(prefix, "branch_tail.leaf_seq"),
            below=stored_statement(prefix, "branch_tail.below"),
            after=stored_statement(prefix, "branch_tail.after"),
            branch=stored_statement(prefix, "sessions.branch"),
        )


def tuple_cursor(connection: sqlite3.Connection) -> sqlite3.Cursor:
    """A cursor on ``connection`` whose rows are plain tuples: entry rows are read by
    position, so they need no per-row attribute class (worker thread only)."""
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
    """``(branch rows root first, the run's later rows)`` in one read transaction (worker
    thread only), as tuples. The branch rows are empty when the leaf is not in the session,
    and may stop short of the root when a parent is missing; the caller checks them."""
    cursor = tuple_cursor(connection)
    try:
        cursor.execute("BEGIN")
        path: list[Any] = []
        leaf_seq = 0
        if leaf_id is not None:
            found = cursor.execute(
                sql.leaf_seq.text, sql.leaf_seq.params({"leaf": leaf_id, "session": session_id})
            ).fetchone()
            if found is None:
                cursor.execute("COMMIT")
                return [], []
            leaf_seq = found[0]
            path = _walk(cursor, sql, session_id, leaf_id, leaf_seq)
        after = sql.after.params({"session": session_id, "leaf_seq": leaf_seq, "run": run_id})
        tail = cursor.execute(sql.after.text, after).fetchall()
        cursor.execute("COMMIT")
        return path, tail
    finally:
        cursor.close()


def _walk(
    cursor: sqlite3.Cursor,
    sql: BranchTailStatements,
    session_id: str,
    leaf_id: str,
    leaf_seq: int,
) -> list[Any]:
    below = sql.below.params({"session": session_id, "leaf_seq": leaf_seq})
    path: list[Any] = []
    wanted: str | None = leaf_id
    skipped = 0
    for row in cursor.execute(sql.below.text, below):
        if row[_ID] != wanted:
            skipped += 1
            if skipped > len(path) + SKIP_SLACK:
                break
            continue
        path.append(row)
        wanted = row[_PARENT]
        if wanted is None:
            path.reverse()
            return path
    # A branch beside many rows of other branches, or one whose parent is missing: the
    # recursive query reads exactly the branch (and shows where it breaks).
    params = sql.branch.params({"leaf": leaf_id, "session": session_id})
    return cursor.execute(sql.branch.text, params).fetchall()
