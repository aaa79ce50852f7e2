"""The per-turn statements on PostgreSQL sent straight to asyncpg.

A store on a ``postgresql+asyncpg`` engine runs its hot-path statements (checkpoint load,
save and lease renewal, a durable turn's shared commit, the branch reads of a resume) on the
asyncpg connection it checks out of the engine's pool, instead of through SQLAlchemy's
execution layer: the SQL text is the one SQLAlchemy compiles for the engine's dialect
(compiled once per statement), sent as one ``fetchrow`` or ``fetch`` in autocommit, which
asyncpg prepares once per connection and reuses. The statements, their conditions
(compare-and-swap, fencing, ownership), the pool, its timeouts and the connection settings
(``statement_timeout``, ``lock_timeout``, the client-side command timeout) are exactly those
of the SQLAlchemy path; what is skipped is per-call compilation lookup, result processing,
the execution events and most of the greenlet hand-offs of a call. Engine-level execution
events (``before_cursor_execute`` and the like) do not see these statements.

Errors are mapped as on the SQLAlchemy path (:func:`~prism_store_sql._engine.translate_errors`):
connection failures and timeouts raise :class:`~prism_core.CheckpointStoreUnavailableError`,
other database errors :class:`~prism_core.CheckpointStoreError`. A connection that failed
below the server (closed, timed out on the client, or interrupted by cancellation) is
invalidated, never returned to the pool.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
import attrs
import sqlalchemy as sa
from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.types import TypeEngine
from sqlalchemy.util import greenlet_spawn

from prism_core.stores import CheckpointStoreError, CheckpointStoreUnavailableError

from ._engine import describe, is_transient, translate_errors

__all__ = (
    "DirectStatement",
    "DirectPostgres",
    "IntegrityRefused",
    "StatementRefused",
    "direct_postgres",
)


class IntegrityRefused(Exception):
    """The server refused a statement for a constraint (SQLSTATE class 23); nothing was
    written. Raised only where the caller asked for it."""


class StatementRefused(Exception):
    """The server answered a statement with an error that is not transient (a constraint,
    bad data, …): nothing was written and the connection is usable. Raised only where the
    caller asked for it; the server's error is its ``__cause__``."""


@attrs.frozen
class DirectStatement:
    """A statement's SQL text for asyncpg and how to order (and convert) its parameters."""

    sql: str
    names: tuple[str, ...]
    processors: tuple[Callable[[Any], Any] | None, ...]
    #: The values of the statement's own literals (``sa.literal(0)``), by parameter name.
    fixed: Mapping[str, Any]

    def arguments(self, params: Mapping[str, Any]) -> list[Any]:
        """The positional arguments (``$1``, ``$2`` …) for ``params``."""
        fixed = self.fixed
        values = [params[name] if name not in fixed else fixed[name] for name in self.names]
        return [
            value if convert is None else convert(value)
            for value, convert in zip(values, self.processors, strict=True)
        ]


@attrs.frozen
class _CompiledText:
    """What compiling a statement gives, before any dialect instance's bind processors."""

    sql: str
    names: tuple[str, ...]
    types: tuple[TypeEngine[Any], ...]
    fixed: Mapping[str, Any]


def _compile_text(statement: sa.Executable, dialect: Dialect) -> _CompiledText:
    compiled = statement.compile(dialect=dialect)  # type: ignore[attr-defined]
    names = tuple(compiled.positiontup or ())
    binds = compiled.binds
    # Anonymous parameters are the statement's literals; named ones come from the caller.
    fixed = {name: binds[name].effective_value for name in names if binds[name].unique}
    types = tuple(binds[name].type for name in names)
    return _CompiledText(sql=compiled.string, names=names, types=types, fixed=fixed)


def _with_processors(text: _CompiledText, dialect: Dialect) -> DirectStatement:
    processors = tuple(kind.dialect_impl(dialect).bind_processor(dialect) for kind in text.types)
    return DirectStatement(sql=text.sql, names=text.names, processors=processors, fixed=text.fixed)


def compile_direct(statement: sa.Executable, dialect: Dialect) -> DirectStatement:
    """``statement`` compiled once for ``dialect`` (asyncpg's ``$n`` parameters)."""
    return _with_processors(_compile_text(statement, dialect), dialect)


#: Compiled text shared by the engines the stores created in this process, keyed by the
#: statement (the stores on one prefix share theirs, see ``build_tables``), the dialect's
#: class and the server's version: such engines' dialects are configured alike, so a store
#: opened again (a task queue's worker opens its stores for each task) compiles nothing.
#: A host's engine, whose dialect may be configured otherwise, compiles for itself.
_SHARED_TEXT: dict[tuple[sa.Executable, type[Dialect], Any], _CompiledText] = {}
_SHARED_TEXT_LIMIT = 1024


def _shared_text(statement: sa.Executable, dialect: Dialect) -> _CompiledText:
    key = (statement, type(dialect), dialect.server_version_info)
    text = _SHARED_TEXT.get(key)
    if text is None:
        if len(_SHARED_TEXT) >= _SHARED_TEXT_LIMIT:
            _SHARED_TEXT.clear()  # many prefixes come and go: start again
        text = _SHARED_TEXT[key] = _compile_text(statement, dialect)
    return text


class DirectPostgres:
    """One statement at a time on the raw asyncpg connections of an engine's pool."""

    def __init__(self, engine: AsyncEngine, *, generic_plans: bool = False) -> None:
        # Deferred: asyncpg is an optional dependency (the postgres extra).
        import asyncpg  # type: ignore[import-untyped]

        self._engine = engine
        self._dialect = engine.dialect
        self._generic_plans = generic_plans
        self._compiled: dict[int, tuple[sa.Executable, DirectStatement]] = {}
        self._server_error: type[BaseException] = asyncpg.PostgresError
        self._integrity: type[BaseException] = asyncpg.IntegrityConstraintViolationError

    def statement(self, statement: sa.Executable) -> DirectStatement:
        """The compiled form of ``statement`` (compiled on first use, then cached; on an
        engine the stores created, the text is shared with the process's other such
        engines)."""
        entry = self._compiled.get(id(statement))
        if entry is None or entry[0] is not statement:
            dialect = self._dialect
            if self._generic_plans:
                compiled = _with_processors(_shared_text(statement, dialect), dialect)
            else:
                compiled = compile_direct(statement, dialect)
            entry = self._compiled[id(statement)] = (statement, compiled)
        return entry[1]

    async def fetchrow(
        self,
        action: str,
        statement: sa.Executable,
        params: Mapping[str, Any],
        *,
        refuse_integrity: bool = False,
    ) -> Sequence[Any] | None:
        """The first row ``statement`` returns (``None``: no row), run in autocommit.

        With ``refuse_integrity`` a constraint violation raises :class:`IntegrityRefused`
        instead of ``CheckpointStoreError``.
        """
        row: Sequence[Any] | None = await self._run(
            action, statement, params, every_row=False, refuse_integrity=refuse_integrity
        )
        return row

    async def fetch(
        self,
        action: str,
        statement: sa.Executable,
        params: Mapping[str, Any],
        *,
        refuse_answered: bool = False,
    ) -> list[Sequence[Any]]:
        """Every row ``statement`` returns, run in autocommit.

        With ``refuse_answered`` an error the server answered that is not transient raises
        :class:`StatementRefused` instead of ``CheckpointStoreError``.
        """
        rows: list[Sequence[Any]] = await self._run(
            action,
            statement,
            params,
            every_row=True,
            refuse_integrity=False,
            refuse_answered=refuse_answered,
        )
        return rows

    async def _run(
        self,
        action: str,
        statement: sa.Executable,
        params: Mapping[str, Any],
        *,
        every_row: bool,
        refuse_integrity: bool,
        refuse_answered: bool = False,
    ) -> Any:
        direct = self.statement(statement)
        arguments = direct.arguments(params)
        with translate_errors(action):
            fairy = await self._engine.raw_connection()
        connection: Any = fairy.driver_connection
        broken: BaseException | None = None
        try:
            if self._generic_plans and connection not in _GENERIC:
                await _plan_once(connection)
            if every_row:
                return await connection.fetch(direct.sql, *arguments)
            return await connection.fetchrow(direct.sql, *arguments)
        except Exception as error:
            # As SQLAlchemy decides for asyncpg: a closed connection is a disconnect (transient,
            # and the connection is dropped); an error the server answered with leaves the
            # connection usable; anything else from the driver leaves its state unknown.
            disconnected = connection.is_closed()
            if disconnected or not isinstance(error, self._server_error):
                broken = error
            if refuse_integrity and isinstance(error, self._integrity):
                raise IntegrityRefused() from error
            transient = disconnected or is_transient(error)
            if refuse_answered and broken is None and not transient:
                raise StatementRefused() from error
            kind = CheckpointStoreUnavailableError if transient else CheckpointStoreError
            raise kind(f"SQL store failed to {action}: {describe(error)}") from error
        except BaseException as error:
            # Cancelled mid-statement: the connection's state is unknown.
            broken = error
            raise
        finally:
            await _release(fairy, broken)


#: The asyncpg connections already switched to generic plans (they keep the setting for life).
_GENERIC: weakref.WeakSet[Any] = weakref.WeakSet()


async def _plan_once(connection: Any) -> None:
    # PostgreSQL plans a prepared statement afresh on each execution while it deems a custom
    # plan cheaper, which for the turn commit (unnest of array parameters) it always does:
    # about 0.3 ms of planning per commit. The statements are key lookups and writes whose
    # plans do not depend on the values, so a generic plan, made once per connection, serves.
    # plan_cache_mode exists since PostgreSQL 12; older servers keep planning.
    if connection.get_server_version() >= (12, 0):
        await connection.execute("SET plan_cache_mode = force_generic_plan")
    _GENERIC.add(connection)


async def _release(fairy: Any, broken: BaseException | None) -> None:
    # Shielded: a connection that is neither returned nor invalidated would leak from the pool.
    with anyio.CancelScope(shield=True):
        if broken is None:
            await greenlet_spawn(fairy.close)
            return
        # A broken connection is closed at once: SQLAlchemy's invalidation would first try a
        # graceful close (up to 2 s), and a stalled server would hold the run past its wall
        # time for that long. The pool then forgets the closed connection.
        raw = fairy.driver_connection
        if raw is not None and not raw.is_closed():
            raw.terminate()
        await greenlet_spawn(fairy.invalidate, broken)


def direct_postgres(engine: AsyncEngine, *, generic_plans: bool) -> DirectPostgres | None:
    """A :class:`DirectPostgres` for an asyncpg engine; ``None`` for any other driver (or an
    engine translating schema names, whose statements only SQLAlchemy renders).

    With ``generic_plans`` (an engine the stores created, so its connections are theirs) each
    connection is switched to generic plans (``plan_cache_mode``) before its first statement
    here; a host's engine keeps its connections' settings."""
    if engine.dialect.name != "postgresql" or engine.dialect.driver != "asyncpg":
        return None
    if engine.get_execution_options().get("schema_translate_map"):
        return None
    return DirectPostgres(engine, generic_plans=generic_plans)
