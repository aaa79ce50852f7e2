"""Run wake-ups on PostgreSQL: ``NOTIFY`` on the table prefix's channel, ``LISTEN`` on a
connection of the watch's own.

- The channel is ``<prefix>wake`` (:func:`channel_name`; a table prefix is at most 40
  characters, so it fits PostgreSQL's 63-byte identifiers; a longer name would be hashed).
  Stores on other prefixes of the same database are not woken; PostgreSQL delivers a
  notification only within its database.
- :meth:`PostgresWakeups.notify_runs` is one statement in autocommit, one round trip:
  ``SELECT pg_notify($1, '')`` on a connection of the store's pool (sent straight to asyncpg
  on an asyncpg engine, see :mod:`._direct`). It needs no table.
- A watch takes one connection from the store's engine (so with the engine's connect settings:
  timeouts, TLS, a host's events) and detaches it from the pool: the pool's slot is free for
  the store's other work, and the connection is closed, never returned, when the watch ends.
  It listens through the driver's own notification API: asyncpg's ``add_listener`` (a
  callback per notification, on the event loop), psycopg's ``notifies()``. Notifications
  that arrive between two waits are kept (asyncpg) or stay in the connection's buffer
  (psycopg) and wake the next wait at once; several coalesce into one wake-up.
- A watch whose connection was lost (a server restart, a network cut) opens another at its
  next wait (while that fails, it waits out a backoff of up to :data:`RETRY_CAP_S`, never
  longer than the wait asked for, and logs once per outage) and reports a wake-up once it
  listens again, since a notification may have been missed meanwhile. A watch that cannot
  connect when it opens starts in that state instead of failing its worker.

It signals; it must not read or write the tables.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Protocol

import anyio
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from prism_core.stores import CheckpointStoreError, CheckpointStoreUnavailableError, RunWatch

from ._direct import DirectPostgres
from ._engine import describe, require_asyncio, translate_errors

__all__ = ("MAX_CHANNEL_BYTES", "RETRY_CAP_S", "PostgresWakeups", "channel_name")

logger = logging.getLogger(__package__ or __name__)

#: PostgreSQL's longest identifier (``NAMEDATALEN`` - 1), which a channel name is.
MAX_CHANNEL_BYTES = 63
#: The longest pause between two attempts to listen again after a lost connection.
RETRY_CAP_S = 5.0
_FIRST_RETRY_S = 0.1
_CLOSE_TIMEOUT_S = 2.0

#: ``SELECT pg_notify(:channel, '')``: the notification of :meth:`notify_runs`.
NOTIFY = sa.select(sa.func.pg_notify(sa.bindparam("channel", type_=sa.Text), sa.literal("")))


def channel_name(prefix: str) -> str:
    """The notification channel of the stores on table prefix ``prefix``."""
    name = f"{prefix}wake"
    if len(name.encode()) <= MAX_CHANNEL_BYTES:
        return name
    return "prism_wake_" + hashlib.sha256(prefix.encode()).hexdigest()[:40]


class _Lost(Exception):
    """The listening connection is gone."""


class _Listener(Protocol):
    async def listen(self, channel: str) -> None: ...

    async def wait(self, seconds: float) -> bool: ...

    async def close(self) -> None: ...


class _AsyncpgListener:
    """``add_listener`` on an asyncpg connection: the callback marks a wake-up."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection
        self._pending = False
        self._lost = False
        self._event = anyio.Event()

    async def listen(self, channel: str) -> None:
        await self._connection.add_listener(channel, self._heard)
        self._connection.add_termination_listener(self._terminated)

    def _heard(self, *_: Any) -> None:
        self._pending = True
        self._event.set()

    def _terminated(self, *_: Any) -> None:
        self._lost = True
        self._event.set()

    async def wait(self, seconds: float) -> bool:
        if not self._pending and not self._lost:
            with anyio.move_on_after(seconds):
                await self._event.wait()
        if self._lost or self._connection.is_closed():
            raise _Lost("the connection closed")
        woken = self._pending
        if woken:
            self._pending = False
            self._event = anyio.Event()
        return woken

    async def close(self) -> None:
        connection = self._connection
        if connection.is_closed():
            return
        try:
            with anyio.fail_after(_CLOSE_TIMEOUT_S):
                await connection.close()
        except Exception:
            # A server that does not answer (or a broken socket): drop the connection.
            connection.terminate()


class _PsycopgListener:
    """``LISTEN`` and ``notifies()`` on a psycopg connection in autocommit."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    async def listen(self, channel: str) -> None:
        # Deferred: psycopg is an optional dependency (the postgres extra).
        from psycopg import sql

        await self._connection.set_autocommit(True)
        await self._connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))

    async def _received(self, seconds: float, stop_after: int | None) -> bool:
        # Deferred: psycopg is an optional dependency (the postgres extra).
        import psycopg

        heard = False
        try:
            notifies = self._connection.notifies(timeout=seconds, stop_after=stop_after)
            async with contextlib.aclosing(notifies) as stream:
                async for _ in stream:
                    heard = True
        except psycopg.OperationalError as exc:
            raise _Lost(str(exc)) from exc
        return heard

    async def wait(self, seconds: float) -> bool:
        if not await self._received(seconds, 1):
            return False
        await self._received(0, None)  # what else arrived: one wake-up for all of them
        return True

    async def close(self) -> None:
        with anyio.move_on_after(_CLOSE_TIMEOUT_S) as scope:
            await self._connection.close()
        if scope.cancelled_caught:
            # A server that does not answer: close the socket without saying goodbye.
            self._connection.pgconn.finish()


class _PostgresWatch:
    """A listening connection, opened again after it was lost (see the module docstring)."""

    def __init__(self, engine: AsyncEngine, channel: str) -> None:
        self._engine = engine
        self._channel = channel
        self._listener: _Listener | None = None
        self._retry = _FIRST_RETRY_S
        self._outage = False

    async def open(self) -> bool:
        """Connect and listen; ``False`` (logged once per outage) when that failed."""
        try:
            with translate_errors("listen for run wake-ups"):
                fairy = await self._engine.raw_connection()
        except CheckpointStoreError as exc:
            self._failed(exc)
            return False
        connection = fairy.driver_connection
        # Off the pool: its slot serves the store's other work, and the connection is
        # closed here (never handed to another caller, still listening) when the watch ends.
        fairy.detach()
        listener: _Listener
        if self._engine.dialect.driver == "asyncpg":
            listener = _AsyncpgListener(connection)
        else:
            listener = _PsycopgListener(connection)
        self._listener = listener
        try:
            await listener.listen(self._channel)
        except Exception as exc:
            await self.close()
            self._failed(CheckpointStoreUnavailableError(describe(exc)))
            return False
        if self._outage:
            logger.warning("listening for run wake-ups on %s again", self._channel)
        self._outage = False
        self._retry = _FIRST_RETRY_S
        return True

    def _failed(self, exc: CheckpointStoreError) -> None:
        if not self._outage:
            logger.warning(
                "cannot listen for run wake-ups on %s (%s): workers find decisions at their "
                "poll until it listens again",
                self._channel,
                exc.message,
            )
        self._outage = True

    async def wait(self, seconds: float) -> bool:
        """``True`` once a notification arrived since the last call (or the watch listens
        again after a lost connection), ``False`` after ``seconds`` without one."""
        if self._listener is None:
            pause = min(seconds, self._retry)
            self._retry = min(self._retry * 2, RETRY_CAP_S)
            await anyio.sleep(pause)
            return await self.open()
        try:
            return await self._listener.wait(seconds)
        except _Lost as exc:
            self._failed(CheckpointStoreUnavailableError(str(exc)))
            await self.close()
            return await self.open()

    async def close(self) -> None:
        """Close the connection (idempotent)."""
        listener, self._listener = self._listener, None
        if listener is None:
            return
        with anyio.CancelScope(shield=True):
            try:
                await listener.close()
            except Exception as exc:
                # Closing a connection that is already broken: nothing is left to release.
                logger.debug("closing the wake-up connection: %s", describe(exc))


class PostgresWakeups:
    """:class:`~prism_core.stores.RunWakeups` for the stores on ``engine`` and ``prefix``."""

    def __init__(self, engine: AsyncEngine, prefix: str, direct: DirectPostgres | None) -> None:
        self.engine = engine
        self.channel = channel_name(prefix)
        self._direct = direct

    async def notify_runs(self) -> None:
        """Notify the channel: one statement in autocommit."""
        require_asyncio()
        params = {"channel": self.channel}
        action = "wake the workers"
        if self._direct is not None:
            await self._direct.fetchrow(action, NOTIFY, params)
            return
        with translate_errors(action):
            async with self.engine.connect() as connection:
                connection = await connection.execution_options(isolation_level="AUTOCOMMIT")
                await connection.execute(NOTIFY, params)

    @asynccontextmanager
    async def watch_runs(self) -> AsyncIterator[RunWatch]:
        """A watch on its own listening connection (see the module docstring)."""
        require_asyncio()
        watch = _PostgresWatch(self.engine, self.channel)
        try:
            await watch.open()
            yield watch
        finally:
            await watch.close()
