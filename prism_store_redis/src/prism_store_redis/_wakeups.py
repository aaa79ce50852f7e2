"""Run wake-ups on Redis: ``PUBLISH`` on the prefix's channel, ``SUBSCRIBE`` on a connection
of the watch's own (:class:`~prism_core.stores.RunWakeups`).

- The channel is ``<prefix>:wake`` (:func:`wake_channel`). Pub/sub channels are not keys:
  nothing is stored, and stores under other prefixes are not woken (a channel is
  server-wide, whatever the database number).
- :meth:`RedisWakeups.notify_runs` is one ``PUBLISH``, one round trip on the store's client.
- A watch subscribes on a connection of its own (redis-py's ``PubSub``, from the client's
  pool) and is open once the server has confirmed the subscription, so a notification
  published after ``watch_runs()`` was entered is never missed. A wait reads the next
  message up to its time and then every message already there: several notifications
  coalesce into one wake-up. Leaving the watch closes that connection.
- A lost connection (a server restart, a failover) is reopened by redis-py where its retry
  allows; when that fails too, the watch opens a new subscription at its next wait (while
  that fails, it waits out a backoff of up to :data:`RETRY_CAP_S`, never longer than the
  wait asked for, and logs once per outage) and reports a wake-up once it listens again,
  since a notification may have been missed meanwhile. A watch that cannot subscribe when it
  opens starts in that state instead of failing its worker.

It signals; it must not read or write records.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from prism_core.stores import RunWatch

from ._client import RedisConnection

__all__ = ("RETRY_CAP_S", "SUBSCRIBE_TIMEOUT_S", "RedisWakeups", "wake_channel")

logger = logging.getLogger(__package__ or __name__)

#: The longest pause between two attempts to subscribe again after a lost connection.
RETRY_CAP_S = 5.0
#: How long a watch waits for the server to confirm its subscription.
SUBSCRIBE_TIMEOUT_S = 10.0
_FIRST_RETRY_S = 0.1
_FAILURES = (RedisError, OSError, TimeoutError)


def wake_channel(prefix: str) -> str:
    """The pub/sub channel of the stores under key prefix ``prefix``."""
    return f"{prefix}:wake"


class _RedisWatch:
    """A subscription, opened again after it was lost (see the module docstring)."""

    def __init__(self, client: aioredis.Redis, channel: str) -> None:
        self._client = client
        self._channel = channel
        self._pubsub: Any = None
        self._retry = _FIRST_RETRY_S
        self._outage = False

    async def open(self) -> bool:
        """Subscribe and wait for the confirmation; ``False`` (logged once per outage) when
        that failed."""
        pubsub = self._client.pubsub()
        self._pubsub = pubsub
        try:
            await pubsub.subscribe(self._channel)
            with anyio.fail_after(SUBSCRIBE_TIMEOUT_S):
                while True:
                    message = await pubsub.get_message(timeout=SUBSCRIBE_TIMEOUT_S)
                    if message is not None and message.get("type") == "subscribe":
                        break
        except _FAILURES as exc:
            await self.close()
            self._failed(exc)
            return False
        if self._outage:
            logger.warning("subscribed to run wake-ups on %s again", self._channel)
        self._outage = False
        self._retry = _FIRST_RETRY_S
        return True

    def _failed(self, exc: BaseException) -> None:
        if not self._outage:
            logger.warning(
                "cannot subscribe to run wake-ups on %s (%s: %s): workers find decisions at "
                "their poll until it subscribes again",
                self._channel,
                type(exc).__name__,
                exc,
            )
        self._outage = True

    async def _message(self, seconds: float) -> bool:
        """Whether a notification arrived within ``seconds``."""
        deadline = time.monotonic() + seconds
        while True:
            remaining = max(0.0, deadline - time.monotonic())
            message = await self._pubsub.get_message(
                ignore_subscribe_messages=True, timeout=remaining
            )
            if message is not None and message.get("type") == "message":
                return True
            if remaining <= 0.0:
                return False

    async def wait(self, seconds: float) -> bool:
        """``True`` once a notification arrived since the last call (or the watch listens
        again after a lost connection), ``False`` after ``seconds`` without one."""
        if self._pubsub is None:
            pause = min(seconds, self._retry)
            self._retry = min(self._retry * 2, RETRY_CAP_S)
            await anyio.sleep(pause)
            return await self.open()
        try:
            if not await self._message(seconds):
                return False
            while await self._message(0.0):
                pass  # what else arrived: one wake-up for all of them
            return True
        except _FAILURES as exc:
            self._failed(exc)
            await self.close()
            return await self.open()

    async def close(self) -> None:
        """Close the subscription's connection (idempotent)."""
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is None:
            return
        with anyio.CancelScope(shield=True):
            try:
                await pubsub.aclose()
            except _FAILURES as exc:
                # A connection that is already broken: nothing is left to release.
                logger.debug("closing the wake-up subscription: %s", exc)


class RedisWakeups:
    """:class:`~prism_core.stores.RunWakeups` for the stores under ``prefix`` on a client."""

    def __init__(self, connection: RedisConnection, prefix: str) -> None:
        self._connection = connection
        self.channel = wake_channel(prefix)

    async def notify_runs(self) -> None:
        """Publish on the channel: one command."""
        with self._connection.guard("wake the workers") as client:
            await client.publish(self.channel, b"")

    @asynccontextmanager
    async def watch_runs(self) -> AsyncIterator[RunWatch]:
        """A watch on its own subscribed connection (see the module docstring)."""
        with self._connection.guard("watch for run wake-ups") as client:
            pass
        watch = _RedisWatch(client, self.channel)
        try:
            await watch.open()
            yield watch
        finally:
            await watch.close()
