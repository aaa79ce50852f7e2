"""The raw baselines: the plain synchronous drivers doing the same durable work, no Prism.

- SQLite: stdlib ``sqlite3`` on its own connection, WAL, ``synchronous=FULL``, one upsert of
  the row and a commit (and, beside it, a turn's own rows: that upsert, the turn's session
  entries and the session head, in one commit);
- PostgreSQL: psycopg 3 in autocommit, one upsert (a durable commit on the server);
- Redis: redis-py, one pipelined ``SET`` + ``HSET``.

Every write carries different bytes (a counter spliced into the value): SQLite skips rewriting
a page whose bytes did not change, which would flatter a baseline that repeats itself.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

__all__ = ("RawPostgres", "RawRedis", "RawSqlite", "vary")

_TABLE = "raw_bench"
_BRANCH = "raw_branch"
_ENTRIES = "raw_entries"
_HEADS = "raw_heads"


def vary(text: str, counter: int) -> str:
    """``text`` (a JSON object) with a counter field in front: different bytes every call."""
    return f'{{"_n":{counter},{text[1:]}' if text.startswith("{") else text


class RawSqlite:
    """A plain ``sqlite3`` connection on ``path``: WAL, ``synchronous=FULL``, busy timeout."""

    label = "sqlite3 WAL FULL"

    def __init__(self, path: str) -> None:
        self.path = path
        self.connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.connection.execute("PRAGMA busy_timeout=5000")
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=FULL")
        self.connection.execute(
            f"CREATE TABLE IF NOT EXISTS {_TABLE} (k TEXT PRIMARY KEY, version INTEGER, v TEXT)"
        )
        self.connection.execute(
            f"CREATE TABLE IF NOT EXISTS {_BRANCH} "
            "(session_id TEXT, seq INTEGER, payload TEXT, PRIMARY KEY (session_id, seq))"
        )
        self.connection.execute(
            f"CREATE TABLE IF NOT EXISTS {_ENTRIES} (id TEXT PRIMARY KEY, session_id TEXT, "
            "seq INTEGER, payload TEXT, UNIQUE (session_id, seq))"
        )
        self.connection.execute(
            f"CREATE TABLE IF NOT EXISTS {_HEADS} "
            "(session_id TEXT PRIMARY KEY, head_id TEXT, last_seq INTEGER)"
        )
        self.counter = 0

    def write_turn(self, key: str, value: str, entries: Sequence[str]) -> None:
        """A durable turn's own rows with the plain driver, in one transaction and commit:
        the checkpoint upsert of :meth:`write`, the turn's session entries (``entries``,
        varied) appended to one session, and that session's head moved."""
        self.counter += 1
        n = self.counter
        seq = n * len(entries)
        self.connection.execute("BEGIN")
        self.connection.execute(
            f"INSERT INTO {_TABLE} (k, version, v) VALUES (?, ?, ?) "
            "ON CONFLICT (k) DO UPDATE SET version = excluded.version, v = excluded.v",
            (key, n, vary(value, n)),
        )
        self.connection.executemany(
            f"INSERT INTO {_ENTRIES} (id, session_id, seq, payload) VALUES (?, ?, ?, ?)",
            [(f"{n}-{i}", key, seq + i, vary(p, n)) for i, p in enumerate(entries)],
        )
        self.connection.execute(
            f"INSERT INTO {_HEADS} (session_id, head_id, last_seq) VALUES (?, ?, ?) "
            "ON CONFLICT (session_id) DO UPDATE SET head_id = excluded.head_id, "
            "last_seq = excluded.last_seq",
            (key, f"{n}-{len(entries) - 1}", seq + len(entries) - 1),
        )
        self.connection.execute("COMMIT")

    def write(self, key: str, value: str) -> None:
        """One durable upsert of ``value`` (varied) under ``key`` and its commit."""
        self.counter += 1
        self.connection.execute("BEGIN")
        self.connection.execute(
            f"INSERT INTO {_TABLE} (k, version, v) VALUES (?, ?, ?) "
            "ON CONFLICT (k) DO UPDATE SET version = excluded.version, v = excluded.v",
            (key, self.counter, vary(value, self.counter)),
        )
        self.connection.execute("COMMIT")

    def read(self, key: str) -> Any:
        """The row's value, JSON-decoded."""
        row = self.connection.execute(f"SELECT v FROM {_TABLE} WHERE k = ?", (key,)).fetchone()
        return json.loads(row[0])

    def fill_branch(self, session_id: str, payloads: Sequence[str]) -> None:
        """Store ``payloads`` as one session's rows (untimed set-up)."""
        with self.connection:
            self.connection.execute("BEGIN")
            self.connection.executemany(
                f"INSERT INTO {_BRANCH} (session_id, seq, payload) VALUES (?, ?, ?)",
                [(session_id, i, p) for i, p in enumerate(payloads)],
            )

    def read_branch(self, session_id: str) -> list[Any]:
        """Every row of the session in order, each payload JSON-decoded."""
        rows = self.connection.execute(
            f"SELECT payload FROM {_BRANCH} WHERE session_id = ? ORDER BY seq", (session_id,)
        ).fetchall()
        return [json.loads(row[0]) for row in rows]

    def close(self) -> None:
        """Close the connection."""
        self.connection.close()


class RawPostgres:
    """A plain psycopg 3 connection in autocommit, with its own table under ``prefix``."""

    label = "psycopg autocommit"

    def __init__(self, url: str, prefix: str) -> None:
        import psycopg

        self.table = f"{prefix}raw"
        self.entries = f"{prefix}raw_entries"
        self.heads = f"{prefix}raw_heads"
        self.connection = psycopg.connect(url, autocommit=True)
        self.connection.execute(
            f"CREATE TABLE IF NOT EXISTS {self.table} (k TEXT PRIMARY KEY, version BIGINT, v TEXT)"
        )
        self.connection.execute(
            f"CREATE TABLE IF NOT EXISTS {self.entries} (id TEXT PRIMARY KEY, session_id TEXT, "
            "seq BIGINT, payload TEXT, UNIQUE (session_id, seq))"
        )
        self.connection.execute(
            f"CREATE TABLE IF NOT EXISTS {self.heads} "
            "(session_id TEXT PRIMARY KEY, head_id TEXT, last_seq BIGINT)"
        )
        self.counter = 0

    def write_turn(self, key: str, value: str, entries: Sequence[str]) -> None:
        """A durable turn's own rows in one statement (data-modifying CTEs, autocommit: one
        round trip, one commit): the checkpoint upsert of :meth:`write`, the turn's session
        entries (``entries``, varied) and that session's head moved."""
        self.counter += 1
        n = self.counter
        seq = n * len(entries)
        ids = [f"{n}-{i}" for i in range(len(entries))]
        self.connection.execute(
            f"WITH cp AS (INSERT INTO {self.table} (k, version, v) VALUES (%s, %s, %s) "
            "ON CONFLICT (k) DO UPDATE SET version = excluded.version, v = excluded.v "
            f"RETURNING 1), en AS (INSERT INTO {self.entries} (id, session_id, seq, payload) "
            "SELECT i, %s, %s + o - 1, p FROM unnest(%s::text[], %s::text[]) "
            f"WITH ORDINALITY AS u(i, p, o) RETURNING 1), hd AS (INSERT INTO {self.heads} "
            "(session_id, head_id, last_seq) VALUES (%s, %s, %s) ON CONFLICT (session_id) DO "
            "UPDATE SET head_id = excluded.head_id, last_seq = excluded.last_seq RETURNING 1) "
            "SELECT (SELECT count(*) FROM cp), (SELECT count(*) FROM en), "
            "(SELECT count(*) FROM hd)",
            (
                key,
                n,
                vary(value, n),
                key,
                seq,
                ids,
                [vary(p, n) for p in entries],
                key,
                ids[-1],
                seq + len(entries) - 1,
            ),
            prepare=True,
        )

    def write(self, key: str, value: str) -> None:
        """One upsert of ``value`` (varied), committed by the server (autocommit)."""
        self.counter += 1
        self.connection.execute(
            f"INSERT INTO {self.table} (k, version, v) VALUES (%s, %s, %s) "
            "ON CONFLICT (k) DO UPDATE SET version = excluded.version, v = excluded.v",
            (key, self.counter, vary(value, self.counter)),
            prepare=True,
        )

    def read(self, key: str) -> Any:
        """The row's value, JSON-decoded."""
        cursor = self.connection.execute(
            f"SELECT v FROM {self.table} WHERE k = %s", (key,), prepare=True
        )
        row = cursor.fetchone()
        assert row is not None
        return json.loads(row[0])

    def close(self) -> None:
        """Drop the table and close the connection."""
        try:
            for table in (self.table, self.entries, self.heads):
                self.connection.execute(f"DROP TABLE IF EXISTS {table}")
        finally:
            self.connection.close()


class RawRedis:
    """A plain synchronous redis-py client; keys under ``<prefix>:raw:``."""

    def __init__(self, url: str, prefix: str) -> None:
        import redis

        self.prefix = f"{prefix}:raw"
        self.client = redis.Redis.from_url(url)
        self.counter = 0

    def write(self, key: str, value: str) -> None:
        """One pipelined ``SET`` of the value (varied) and ``HSET`` of its version."""
        self.counter += 1
        pipe = self.client.pipeline(transaction=False)
        pipe.set(f"{self.prefix}:{key}", vary(value, self.counter))
        pipe.hset(f"{self.prefix}:{key}:meta", mapping={"version": self.counter})
        pipe.execute()

    def write_turn(self, key: str, value: str, entries: Sequence[str]) -> None:
        """A durable turn's own rows in one ``MULTI``/``EXEC`` round trip: the value and
        its version as :meth:`write` sets them, the turn's entries (varied) pushed to the
        session's list and its head set."""
        self.counter += 1
        n = self.counter
        pipe = self.client.pipeline(transaction=True)
        pipe.set(f"{self.prefix}:{key}", vary(value, n))
        pipe.hset(f"{self.prefix}:{key}:meta", mapping={"version": n})
        pipe.rpush(f"{self.prefix}:{key}:entries", *(vary(p, n) for p in entries))
        pipe.set(f"{self.prefix}:{key}:head", f"{n}-{len(entries) - 1}")
        pipe.execute()

    def read(self, key: str) -> Any:
        """The value, JSON-decoded."""
        data = self.client.get(f"{self.prefix}:{key}")
        assert isinstance(data, bytes)
        return json.loads(data)

    def close(self) -> None:
        """Delete this baseline's keys and close the client."""
        try:
            keys = list(self.client.scan_iter(match=f"{self.prefix}:*", count=500))
            if keys:
                self.client.delete(*keys)
        finally:
            self.client.close()
