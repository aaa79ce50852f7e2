"""The ``<prefix>checkpoints`` rows both SQL backends write and read: statements, bound
parameters, and records decoded from rows.

Every save is one conditional statement, so the database — not a read in Python — decides
compare-and-swap, fencing and ownership, and concurrent writers on any number of connections
or processes get exactly one winner per version:

- ``expected_version=0``: ``INSERT … ON CONFLICT DO NOTHING RETURNING``;
- ``expected_version=n``: ``UPDATE … WHERE owner = … AND version = n AND version < new AND
  <fencing ok> RETURNING``;
- no ``expected_version``: ``INSERT … ON CONFLICT (namespace, key) DO UPDATE SET … WHERE
  <owner matches> AND <version above> AND <fencing ok> RETURNING``.

No row returned means the write lost: the store raises the one generic conflict error. The
engine store runs these statements through SQLAlchemy (or asyncpg), the SQLite store compiles
them to ``sqlite3`` text; neither is imported here.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from prism_core.codec import dumps, loads
from prism_core.stores import (
    CheckpointPage,
    CheckpointRecord,
    InvalidCheckpointError,
    SaveRequest,
    check_name,
    corrupt_record,
    decode_listed,
    decode_stored_metadata,
    decode_stored_value,
    encode_cursor,
    normalise_ownership,
    stored_int,
    validate_save,
)

__all__ = (
    "CheckpointStatements",
    "check_range",
    "checkpoint_statements",
    "decode_record",
    "owner_scope",
    "page_of",
    "record_params",
    "renew_params",
    "save_params",
    "saved_record",
)

# BIGINT columns: a larger Python int would fail inside the driver instead of as a clear error.
_MAX_BIGINT = 2**63 - 1


def owner_scope(ownership: dict[str, str] | None) -> str:
    """The ``owner`` column of records of ``ownership`` (``""`` when unowned)."""
    return dumps(ownership).decode("utf-8") if ownership else ""


def record_params(
    namespace: Any, key: Any, ownership: Mapping[str, str] | None
) -> tuple[dict[str, str] | None, dict[str, Any]]:
    """The caller's ownership, normalised, and the bound parameters that find one record
    (``ns``, ``k``, ``owner_scope``) for a load, stamp read or delete; the names are checked
    first, before any I/O."""
    check_name(namespace, "namespace")
    check_name(key, "key")
    owner = normalise_ownership(ownership)
    return owner, {"ns": namespace, "k": key, "owner_scope": owner_scope(owner)}


def check_range(request: SaveRequest) -> None:
    """Refuse numbers a ``BIGINT`` column cannot hold, before any I/O."""
    for what, number in (
        ("version", request.version),
        ("expected_version", request.expected_version),
        ("fencing_token", request.fencing_token),
    ):
        if number is not None and number > _MAX_BIGINT:
            raise InvalidCheckpointError(f"{what} must be at most {_MAX_BIGINT} in a SQL store")


def _stored_time(value: Any, namespace: str, key: str) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise corrupt_record(namespace, key, "its timestamps are not numbers")


def save_params(request: SaveRequest, now: float) -> dict[str, Any]:
    """The bound parameters of every save statement for ``request`` written at ``now``."""
    return {
        "ns": request.namespace,
        "k": request.key,
        "owner_scope": owner_scope(request.ownership),
        "new_version": request.version,
        "expected": request.expected_version,
        "token": request.fencing_token,
        "cat": request.category,
        "val": request.value_json,
        "meta": dumps(request.metadata).decode("utf-8") if request.metadata is not None else None,
        "now": now,
        "st": request.status,
    }


def saved_record(request: SaveRequest, created_at: float, now: float) -> CheckpointRecord:
    """The record a successful save of ``request`` wrote."""
    return CheckpointRecord(
        namespace=request.namespace,
        key=request.key,
        version=request.version,
        value=loads(request.value_json),
        metadata=dict(request.metadata) if request.metadata is not None else None,
        ownership=dict(request.ownership) if request.ownership is not None else None,
        fencing_token=request.fencing_token,
        category=request.category,
        created_at=created_at,
        updated_at=now,
    )


def renew_params(
    namespace: Any,
    key: Any,
    value: Any,
    *,
    version: Any,
    ownership: Any,
    fencing_token: Any,
) -> tuple[SaveRequest, dict[str, Any]]:
    """The checked request and bound parameters of a lease renewal (see
    :class:`~prism_core.stores.LeaseRenewalStore`)."""
    request = validate_save(
        namespace,
        key,
        value,
        version=version,
        expected_version=version,
        ownership=ownership,
        fencing_token=fencing_token,
    )
    check_range(request)
    return request, save_params(request, time.time())


def decode_record(row: Sequence[Any], ownership: dict[str, str] | None) -> CheckpointRecord:
    """The record of one ``<prefix>checkpoints`` row read for ``ownership``, or the
    corrupt-record error naming what cannot be read back."""
    # Positions, not names: a SQLAlchemy row, an asyncpg record and a sqlite3 tuple all
    # unpack, in table order (every read selects the whole table).
    namespace, key, _, version, fence, category, value, metadata, created, updated, _ = row
    if category is not None and not isinstance(category, str):
        raise corrupt_record(namespace, key, "its category is not text")
    return CheckpointRecord(
        namespace=namespace,
        key=key,
        version=stored_int(version, namespace, key, "version"),
        value=decode_stored_value(value, namespace, key),
        metadata=decode_stored_metadata(metadata),
        ownership=dict(ownership) if ownership is not None else None,
        fencing_token=None if fence is None else stored_int(fence, namespace, key, "fence"),
        category=category,
        created_at=_stored_time(created, namespace, key),
        updated_at=_stored_time(updated, namespace, key),
    )


def page_of(rows: Sequence[Any], owner: dict[str, str] | None, limit: int) -> CheckpointPage:
    """One page from up to ``limit + 1`` rows in key order (the extra row means "more"); a
    row that cannot be read back is left out and named in ``unreadable``."""
    shown = rows[:limit]
    records, unreadable = decode_listed(
        shown, lambda row: decode_record(row, owner), lambda row: (str(row[0]), str(row[1]))
    )
    next_cursor = None
    if len(rows) > limit:
        next_cursor = encode_cursor(str(shown[-1][0]), str(shown[-1][1]))
    return CheckpointPage(records, next_cursor, unreadable)


@attrs.frozen
class CheckpointStatements:
    """The statements of the hot paths with bound parameters, built once per table and
    dialect in a process (the stores on one prefix share them).

    Reusing one statement object spares rebuilding it and lets SQLAlchemy find its compiled
    form by a cache key it computed once. Parameter names differ from column names, which
    ``UPDATE … SET`` reserves for itself.
    """

    load: sa.Executable
    stamp: sa.Executable  # the version and fencing token alone
    create: sa.Executable  # expected_version=0
    update: sa.Executable  # expected_version=n
    upsert: sa.Executable  # no expected_version
    renew: sa.Executable  # a lease renewal: the value at exactly this version
    delete: sa.Executable

    def save(self, expected_version: int | None) -> sa.Executable:
        """The save statement for ``expected_version`` (``None``, ``0`` or ``n``)."""
        if expected_version is None:
            return self.upsert
        return self.create if expected_version == 0 else self.update


@functools.lru_cache(maxsize=128)
def checkpoint_statements(table: sa.Table, dialect: str) -> CheckpointStatements:
    """The :class:`CheckpointStatements` of ``table`` for ``dialect`` (``"postgresql"`` or
    ``"sqlite"``)."""
    p = sa.bindparam
    is_record = sa.and_(
        table.c.namespace == p("ns"), table.c.key == p("k"), table.c.owner == p("owner_scope")
    )

    def fencing_ok(token: sa.ColumnElement[Any]) -> sa.ColumnElement[bool]:
        # ``<= NULL`` is never true, so without a token only an unfenced record passes.
        return sa.or_(table.c.fencing_token.is_(None), table.c.fencing_token <= token)

    changes: dict[str, sa.BindParameter[Any]] = {
        "version": p("new_version"),
        "fencing_token": p("token"),
        "category": p("cat"),
        "value": p("val"),
        "metadata": p("meta"),
        "updated_at": p("now"),
        "status": p("st"),
    }
    insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table).values(
        namespace=p("ns"), key=p("k"), owner=p("owner_scope"), created_at=p("now"), **changes
    )
    excluded = insert.excluded
    return CheckpointStatements(
        load=sa.select(table).where(is_record),
        stamp=sa.select(table.c.version, table.c.fencing_token).where(is_record),
        create=insert.on_conflict_do_nothing(
            index_elements=[table.c.namespace, table.c.key]
        ).returning(table.c.created_at),
        update=sa.update(table)
        .where(
            is_record,
            table.c.version == p("expected"),
            table.c.version < p("new_version"),
            fencing_ok(p("token")),
        )
        .values(changes)
        .returning(table.c.created_at),
        upsert=insert.on_conflict_do_update(
            index_elements=[table.c.namespace, table.c.key],
            set_={name: excluded[name] for name in changes},
            where=sa.and_(
                table.c.owner == excluded.owner,
                table.c.version < excluded.version,
                fencing_ok(excluded.fencing_token),
            ),
        ).returning(table.c.created_at),
        renew=sa.update(table)
        .where(is_record, table.c.version == p("expected"), fencing_ok(p("token")))
        .values(value=p("val"), updated_at=p("now"))
        .returning(table.c.key),
        delete=sa.delete(table).where(is_record).returning(table.c.key),
    )
