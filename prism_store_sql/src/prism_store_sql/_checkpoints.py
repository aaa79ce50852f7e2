"""The SQL ``CheckpointStore``: one ``<prefix>checkpoints`` row per ``(namespace, key)``.

Every save is one conditional statement, so the database — not a read in Python — decides
compare-and-swap, fencing and ownership, and concurrent writers on any number of connections
or processes get exactly one winner per version:

- ``expected_version=0``: ``INSERT … ON CONFLICT DO NOTHING RETURNING``;
- ``expected_version=n``: ``UPDATE … WHERE owner = … AND version = n AND version < new AND
  <fencing ok> RETURNING``;
- no ``expected_version``: ``INSERT … ON CONFLICT (namespace, key) DO UPDATE SET … WHERE
  <owner matches> AND <version above> AND <fencing ok> RETURNING``.

No row returned means the write lost, and it raises the one generic conflict error.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from prism_core.codec import dumps, loads
from prism_core.durable import (
    CheckpointPage,
    CheckpointRecord,
    InvalidCheckpointError,
    SaveRequest,
    check_name,
    check_status,
    conflict,
    corrupt_record,
    decode_stored_metadata,
    decode_stored_value,
    encode_cursor,
    list_arguments,
    normalise_ownership,
    stored_int,
    validate_save,
)

from ._base import SqlStoreBase
from ._engine import DEFAULT_TIMEOUT_MS, EngineHandle, open_engine
from ._schema import DEFAULT_TABLE_PREFIX, Tables, build_tables
from ._sqlite import SqliteDatabase, sqlite_path

if TYPE_CHECKING:
    from ._transaction import SqlTransaction

__all__ = ("SqlCheckpointStore", "create_sql_checkpoint_store")

logger = logging.getLogger(__package__ or __name__)

# BIGINT columns: a larger Python int would fail inside the driver instead of as a clear error.
_MAX_BIGINT = 2**63 - 1


def _owner_scope(ownership: dict[str, str] | None) -> str:
    return dumps(ownership).decode("utf-8") if ownership else ""


def _check_range(req: SaveRequest) -> None:
    for what, number in (
        ("version", req.version),
        ("expected_version", req.expected_version),
        ("fencing_token", req.fencing_token),
    ):
        if number is not None and number > _MAX_BIGINT:
            raise InvalidCheckpointError(f"{what} must be at most {_MAX_BIGINT} in a SQL store")


def _stored_time(value: Any, namespace: str, key: str) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise corrupt_record(namespace, key, "its timestamps are not numbers")


def _validated(namespace: Any, key: Any, value: Any, **options: Any) -> SaveRequest:
    req = validate_save(namespace, key, value, **options)
    _check_range(req)
    return req


def save_params(req: SaveRequest, now: float) -> dict[str, Any]:
    """The bound parameters of every save statement for ``req`` written at ``now``."""
    return {
        "ns": req.namespace,
        "k": req.key,
        "owner_scope": _owner_scope(req.ownership),
        "new_version": req.version,
        "expected": req.expected_version,
        "token": req.fencing_token,
        "cat": req.category,
        "val": req.value_json,
        "meta": dumps(req.metadata).decode("utf-8") if req.metadata is not None else None,
        "now": now,
        "st": req.status,
    }


def saved_record(req: SaveRequest, created_at: float, now: float) -> CheckpointRecord:
    """The record a successful save of ``req`` wrote."""
    return CheckpointRecord(
        namespace=req.namespace,
        key=req.key,
        version=req.version,
        value=loads(req.value_json),
        metadata=dict(req.metadata) if req.metadata is not None else None,
        ownership=dict(req.ownership) if req.ownership is not None else None,
        fencing_token=req.fencing_token,
        category=req.category,
        created_at=created_at,
        updated_at=now,
    )


@attrs.frozen
class _Statements:
    """The statements of the hot paths with bound parameters, built once per table and
    dialect in a process (the stores on one prefix share them).

    Reusing one statement object spares rebuilding it and lets SQLAlchemy find its compiled
    form by a cache key it computed once. Parameter names differ from column names, which
    ``UPDATE … SET`` reserves for itself.
    """

    load: sa.Executable
    create: sa.Executable  # expected_version=0
    update: sa.Executable  # expected_version=n
    upsert: sa.Executable  # no expected_version
    renew: sa.Executable  # a lease renewal: the value at exactly this version
    delete: sa.Executable


@functools.lru_cache(maxsize=128)
def _build_statements(table: sa.Table, dialect: str) -> _Statements:
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
    return _Statements(
        load=sa.select(table).where(is_record),
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


def renew_params(
    namespace: Any,
    key: Any,
    value: Any,
    *,
    version: Any,
    ownership: Any,
    fencing_token: Any,
) -> tuple[SaveRequest, dict[str, Any]]:
    """The validated request and bound parameters of a lease renewal (see
    :class:`~prism_core.durable.LeaseRenewalStore`)."""
    req = _validated(
        namespace,
        key,
        value,
        version=version,
        expected_version=version,
        ownership=ownership,
        fencing_token=fencing_token,
    )
    return req, save_params(req, time.time())


class SqlCheckpointStore(SqlStoreBase):
    """Checkpoints in ``<prefix>checkpoints`` on SQLite or PostgreSQL (asyncio only).

    Build it with :func:`create_sql_checkpoint_store`. Values, metadata and the owner scope
    are stored as canonical JSON text.
    """

    def __init__(self, handle: EngineHandle, tables: Tables, *, create_schema: bool) -> None:
        super().__init__(handle, tables, create_schema=create_schema)
        self._sql = _build_statements(tables.checkpoints, handle.backend)

    def _record(self, row: Sequence[Any], ownership: dict[str, str] | None) -> CheckpointRecord:
        # Positions, not names: a SQLAlchemy row and an asyncpg record both unpack, in table
        # order (every read selects the whole table).
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

    async def load(
        self, namespace: str, key: str, *, ownership: Mapping[str, str] | None = None
    ) -> CheckpointRecord | None:
        """The record, or ``None`` when absent or owned by someone else."""
        check_name(namespace, "namespace")
        check_name(key, "key")
        owner = normalise_ownership(ownership)
        params = {"ns": namespace, "k": key, "owner_scope": _owner_scope(owner)}
        row = await self._first_row("load a checkpoint", self._sql.load, params)
        return self._record(row, owner) if row is not None else None

    def _save_statement(self, req: SaveRequest) -> sa.Executable:
        if req.expected_version is None:
            return self._sql.upsert
        return self._sql.create if req.expected_version == 0 else self._sql.update

    def _turn_statement(self, req: SaveRequest) -> sa.Executable:
        """The one-statement commit of ``req`` and a turn's appends (PostgreSQL; built once
        per kind of save and prefix in a process, so each is compiled once)."""
        from ._pg_commit import turn_statement

        return turn_statement(self._save_statement(req), self._tables)

    def shared_transaction(self, sessions: object) -> SqlTransaction | None:
        """One transaction over this store and ``sessions`` (see
        :func:`prism_core.durable.shared_transaction`), or ``None`` unless ``sessions`` is a
        SQL session store on the same engine and table prefix."""
        from ._sessions import SqlSessionStore
        from ._transaction import EngineTransaction

        if (
            type(sessions) is SqlSessionStore
            and type(self) is SqlCheckpointStore
            and sessions.engine is self.engine
            and sessions.table_prefix == self.table_prefix
        ):
            return EngineTransaction(self, sessions)
        return None

    async def save(
        self,
        namespace: str,
        key: str,
        value: Any,
        *,
        version: int,
        expected_version: int | None = None,
        ownership: Mapping[str, str] | None = None,
        fencing_token: int | None = None,
        metadata: Mapping[str, str] | None = None,
        category: str | None = None,
    ) -> CheckpointRecord:
        """Write the record in one conditional statement or raise ``CheckpointConflictError``.

        Raises :class:`~prism_core.durable.InvalidCheckpointError` for malformed arguments
        (before any I/O) and :class:`~prism_core.durable.CheckpointStoreError` when the
        database fails; a failed save writes nothing.
        """
        req = _validated(
            namespace,
            key,
            value,
            version=version,
            expected_version=expected_version,
            ownership=ownership,
            fencing_token=fencing_token,
            metadata=metadata,
            category=category,
        )
        now = time.time()
        row = await self._first_row(
            "save a checkpoint", self._save_statement(req), save_params(req, now), write=True
        )
        if row is None:
            logger.debug("checkpoint save %s/%s lost its conditional write", req.namespace, req.key)
            raise conflict(req.namespace, req.key)
        return saved_record(req, row[0], now)

    async def renew_lease(
        self,
        namespace: str,
        key: str,
        value: Any,
        *,
        version: int,
        ownership: Mapping[str, str] | None = None,
        fencing_token: int | None = None,
    ) -> None:
        """Replace the value of the record at exactly ``version`` in one conditional
        statement, keeping its version (see :class:`~prism_core.durable.LeaseRenewalStore`);
        ``CheckpointConflictError`` otherwise."""
        req, params = renew_params(
            namespace,
            key,
            value,
            version=version,
            ownership=ownership,
            fencing_token=fencing_token,
        )
        row = await self._first_row("renew a lease", self._sql.renew, params, write=True)
        if row is None:
            raise conflict(req.namespace, req.key)

    async def delete(
        self, namespace: str, key: str, *, ownership: Mapping[str, str] | None = None
    ) -> bool:
        """Delete the record; ``False`` when absent or owned by someone else."""
        check_name(namespace, "namespace")
        check_name(key, "key")
        owner = normalise_ownership(ownership)
        params = {"ns": namespace, "k": key, "owner_scope": _owner_scope(owner)}
        async with self._write("delete a checkpoint") as connection:
            row = (await connection.execute(self._sql.delete, params)).first()
        return row is not None

    async def list(
        self,
        namespace: str | None = None,
        *,
        ownership: Mapping[str, str] | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> CheckpointPage:
        """Records visible to ``ownership`` (in ``namespace`` when given), in key order."""
        owner, after = list_arguments(namespace, ownership, limit, cursor)
        table = self._tables.checkpoints
        statement = sa.select(table).where(table.c.owner == _owner_scope(owner))
        if namespace is not None:
            statement = statement.where(table.c.namespace == namespace)
        if after is not None:
            statement = statement.where(
                sa.tuple_(table.c.namespace, table.c.key) > sa.tuple_(*after)
            )
        statement = statement.order_by(table.c.namespace, table.c.key).limit(limit + 1)
        async with self._read("list checkpoints") as connection:
            rows = (await connection.execute(statement)).all()
        return self._page(rows, owner, limit)

    def _page(
        self, rows: Sequence[Any], owner: dict[str, str] | None, limit: int
    ) -> CheckpointPage:
        records = tuple(self._record(row, owner) for row in rows[:limit])
        next_cursor = None
        if len(rows) > limit:
            next_cursor = encode_cursor(records[-1].namespace, records[-1].key)
        return CheckpointPage(records, next_cursor)

    async def list_by_status(
        self,
        namespace: str,
        status: str,
        *,
        ownership: Mapping[str, str] | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> CheckpointPage:
        """Records of exactly ``ownership`` in ``namespace`` whose value's status is
        ``status``, in key order, read through the ``(namespace, owner, status, key)`` index."""
        owner, after = list_arguments(check_name(namespace, "namespace"), ownership, limit, cursor)
        check_status(status)
        table = self._tables.checkpoints
        statement = sa.select(table).where(
            table.c.namespace == namespace,
            table.c.owner == _owner_scope(owner),
            table.c.status == status,
        )
        if after is not None:
            statement = statement.where(
                sa.tuple_(table.c.namespace, table.c.key) > sa.tuple_(*after)
            )
        statement = statement.order_by(table.c.namespace, table.c.key).limit(limit + 1)
        async with self._read("list checkpoints by status") as connection:
            rows = (await connection.execute(statement)).all()
        return self._page(rows, owner, limit)


def create_sql_checkpoint_store(
    url_or_engine: str | URL | AsyncEngine,
    *,
    create_schema: bool = True,
    table_prefix: str = DEFAULT_TABLE_PREFIX,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> SqlCheckpointStore:
    """A checkpoint store on SQLite or PostgreSQL.

    ``url_or_engine`` is ``sqlite:///path.db`` (the thread-driven SQLite backend: one stdlib
    ``sqlite3`` connection, asyncio and trio), ``postgresql://user@host/db`` (asyncpg), an
    explicit async URL (``sqlite+aiosqlite://…``, ``postgresql+asyncpg://…``) or a SQLAlchemy
    ``AsyncEngine`` (both asyncio only). An engine passed in is never disposed of by the
    store. With ``create_schema=True`` the tables are created or upgraded on first use; with
    ``False`` a missing or old schema raises :class:`~prism_store_sql.SqlStoreSchemaError`
    naming the migrate command. Building the store opens no connection. ``timeout_ms`` bounds
    each call of a connection or engine created here (connect, statement, lock wait; SQLite's
    busy timeout; see :mod:`prism_store_sql._engine`); connection failures and timeouts raise
    :class:`~prism_core.CheckpointStoreUnavailableError`. Raises
    :class:`~prism_store_sql.SqlStoreDriverError` when the driver is not installed.
    """
    tables = build_tables(table_prefix)
    target = sqlite_path(url_or_engine)
    if target is not None:
        from ._sqlite_stores import SqliteCheckpointStore

        path, url = target
        return SqliteCheckpointStore(
            SqliteDatabase(path, url, tables, create_schema=create_schema, timeout_ms=timeout_ms)
        )
    return SqlCheckpointStore(
        open_engine(url_or_engine, timeout_ms=timeout_ms), tables, create_schema=create_schema
    )
