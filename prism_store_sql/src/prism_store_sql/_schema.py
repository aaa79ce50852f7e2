"""The tables the SQL stores use, built per ``table_prefix``.

``<prefix>checkpoints``, ``<prefix>session_entries``, ``<prefix>session_heads``, the effect
ledger (``<prefix>effects``, ``<prefix>effect_terms``, ``<prefix>decisions``, since v3) and the
migration log ``<prefix>schema_version``. Names and keys use the ``"C"`` collation on
PostgreSQL so that ``(namespace, key)`` order is code point order on every backend, like
SQLite's and Python's.
"""

from __future__ import annotations

import functools
import re

import attrs
import sqlalchemy as sa

from prism_core.stores import echo

from ._errors import SqlStoreConfigError

__all__ = (
    "DEFAULT_TABLE_PREFIX",
    "Tables",
    "build_tables",
    "check_table_prefix",
    "name_type",
    "status_index",
)

DEFAULT_TABLE_PREFIX = "prism_"

# 40 leaves room for the longest derived name (an index) under PostgreSQL's 63-byte limit.
_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")


def check_table_prefix(prefix: object) -> str:
    """``prefix`` when it is a safe SQL identifier start (letters, digits, ``_``; ≤ 40 chars).

    Raises :class:`SqlStoreConfigError` otherwise.
    """
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise SqlStoreConfigError(
            "table_prefix must start with a letter or '_', contain only letters, digits "
            f"and '_', and be at most 40 characters; got {echo(prefix)}"
        )
    return prefix


def status_index(checkpoints: sa.Table) -> sa.Index:
    """The index ``list_by_status`` reads: (namespace, owner, status, key)."""
    prefix = checkpoints.name.removesuffix("checkpoints")
    c = checkpoints.c
    return sa.Index(f"{prefix}checkpoints_status", c.namespace, c.owner, c.status, c.key)


def name_type() -> sa.types.TypeEngine[str]:
    """Text that sorts by code point on every backend (``"C"`` collation on PostgreSQL)."""
    return sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


@attrs.frozen
class Tables:
    """The SQLAlchemy ``Table`` objects for one prefix (in their own ``MetaData``)."""

    prefix: str
    metadata: sa.MetaData
    checkpoints: sa.Table
    session_entries: sa.Table
    session_heads: sa.Table
    schema_version: sa.Table
    effects: sa.Table
    effect_terms: sa.Table
    decisions: sa.Table

    @property
    def data_tables(self) -> tuple[sa.Table, ...]:
        """The tables that hold store data (everything but the migration log)."""
        return (
            self.checkpoints,
            self.session_entries,
            self.session_heads,
            self.effects,
            self.effect_terms,
            self.decisions,
        )

    @property
    def ledger_tables(self) -> tuple[sa.Table, ...]:
        """The effect ledger's tables (created by schema version 3)."""
        return (self.effects, self.effect_terms, self.decisions)


def build_tables(prefix: str = DEFAULT_TABLE_PREFIX) -> Tables:
    """The table definitions of the current schema version for ``prefix``.

    One ``Tables`` per prefix in a process (the most recent 64 prefixes are kept): stores
    opened again on the same prefix, as a task queue's worker does for each task, reuse the
    tables and the statements built on them instead of building both anew.
    """
    return _tables_for(check_table_prefix(prefix))


@functools.lru_cache(maxsize=64)
def _tables_for(prefix: str) -> Tables:
    metadata = sa.MetaData()
    checkpoints = sa.Table(
        f"{prefix}checkpoints",
        metadata,
        sa.Column("namespace", name_type(), primary_key=True),
        sa.Column("key", name_type(), primary_key=True),
        # Canonical JSON of the ownership map; "" for unowned records.
        sa.Column("owner", name_type(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("fencing_token", sa.BigInteger(), nullable=True),
        sa.Column("category", sa.Text(), nullable=True),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("metadata", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        # The value's status (prism_core.stores.indexed_status), for list_by_status; since v2.
        sa.Column("status", sa.Text(), nullable=True),
    )
    sa.Index(
        f"{prefix}checkpoints_owner",
        checkpoints.c.owner,
        checkpoints.c.namespace,
        checkpoints.c.key,
    )
    status_index(checkpoints)
    session_entries = sa.Table(
        f"{prefix}session_entries",
        metadata,
        sa.Column("id", name_type(), primary_key=True),
        sa.Column("session_id", name_type(), nullable=False),
        sa.Column("parent_id", name_type(), nullable=True),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("timestamp", sa.Double(), nullable=False),
    )
    sa.Index(
        f"{prefix}session_entries_seq",
        session_entries.c.session_id,
        session_entries.c.seq,
        unique=True,
    )
    session_heads = sa.Table(
        f"{prefix}session_heads",
        metadata,
        sa.Column("session_id", name_type(), primary_key=True),
        sa.Column("head_id", name_type(), nullable=False),
        # The head's seq: the next append gets last_seq + 1 under the head row's lock.
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
    )
    schema_version = sa.Table(
        f"{prefix}schema_version",
        metadata,
        sa.Column("version", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("applied_at", sa.Double(), nullable=False),
    )
    effects, effect_terms, decisions = _ledger_tables(prefix, metadata)
    return Tables(
        prefix=prefix,
        metadata=metadata,
        checkpoints=checkpoints,
        session_entries=session_entries,
        session_heads=session_heads,
        schema_version=schema_version,
        effects=effects,
        effect_terms=effect_terms,
        decisions=decisions,
    )


def _row_id() -> sa.types.TypeEngine[int]:
    # A 64-bit id everywhere; on SQLite an INTEGER PRIMARY KEY (the rowid), which numbers
    # new rows by itself.
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _ledger_tables(prefix: str, metadata: sa.MetaData) -> tuple[sa.Table, sa.Table, sa.Table]:
    """The effect ledger: one row per call (``seq`` numbers rows in the order they were first
    written), the hashed terms that index approvers and argument values, one row per
    decision. ``record`` is the row's canonical JSON; ``status`` beside it is the one read."""
    effects = sa.Table(
        f"{prefix}effects",
        metadata,
        sa.Column("seq", _row_id(), primary_key=True, autoincrement=True),
        sa.Column("run_id", name_type(), nullable=False),
        sa.Column("call_id", name_type(), nullable=False),
        sa.Column("session_id", name_type(), nullable=False),
        sa.Column("owner", name_type(), nullable=False),
        sa.Column("tool_name", name_type(), nullable=False),
        sa.Column("idempotency_key", name_type(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=False),
        sa.Column("record", sa.Text(), nullable=False),
    )
    c = effects.c
    sa.Index(f"{prefix}effects_call", c.run_id, c.call_id, unique=True)
    sa.Index(f"{prefix}effects_owner", c.owner, c.seq)
    sa.Index(f"{prefix}effects_tool", c.owner, c.tool_name, c.seq)
    sa.Index(f"{prefix}effects_status", c.owner, c.status, c.seq)
    sa.Index(f"{prefix}effects_run", c.owner, c.run_id, c.seq)
    sa.Index(f"{prefix}effects_key", c.owner, c.idempotency_key, c.seq)
    sa.Index(f"{prefix}effects_started", c.owner, c.started_at, c.seq)
    sa.Index(f"{prefix}effects_session", c.session_id)
    effect_terms = sa.Table(
        f"{prefix}effect_terms",
        metadata,
        sa.Column("term", name_type(), primary_key=True),
        sa.Column("seq", sa.BigInteger(), primary_key=True),
    )
    decisions = sa.Table(
        f"{prefix}decisions",
        metadata,
        sa.Column("seq", _row_id(), primary_key=True, autoincrement=True),
        sa.Column("run_id", name_type(), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("session_id", name_type(), nullable=False),
        sa.Column("owner", name_type(), nullable=False),
        sa.Column("decided_at", sa.Double(), nullable=False),
        sa.Column("record", sa.Text(), nullable=False),
    )
    d = decisions.c
    sa.Index(f"{prefix}decisions_run", d.run_id, d.position, unique=True)
    sa.Index(f"{prefix}decisions_owner", d.owner, d.seq)
    sa.Index(f"{prefix}decisions_session", d.session_id)
    return effects, effect_terms, decisions
