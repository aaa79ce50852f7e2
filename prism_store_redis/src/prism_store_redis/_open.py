"""Opening the Redis stores: a checkpoint store, a session store, or both on one client.

The two stores on one client (:func:`open_redis_stores`, or
``create_redis_session_store(checkpoints)``) can commit together
(``prism_core.stores.shared_transaction``): a durable run's session entries and its checkpoint
go to Redis in one Lua script. This is the one module that names both stores' factories.
"""

from __future__ import annotations

from typing import Any

import attrs
import redis.asyncio as aioredis

from prism_core.stores import (
    CheckpointStoreError,
    CheckpointStoreUnavailableError,
    InvalidCheckpointError,
    StorePair,
)

from ._checkpoints import RedisCheckpointStore, positive
from ._client import DEFAULT_TIMEOUT_MS, RedisConnection
from ._sessions import RedisSessionStore, RedisSessionStoreError

__all__ = (
    "RedisStores",
    "create_redis_checkpoint_store",
    "create_redis_session_store",
    "open_redis_stores",
)


def create_redis_checkpoint_store(
    url_or_client: str | aioredis.Redis,
    *,
    prefix: str = "prism",
    finished_ttl_seconds: int | None = None,
    max_records: int | None = None,
    max_value_bytes: int | None = None,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> RedisCheckpointStore:
    """A Redis checkpoint store.

    ``url_or_client`` is a ``redis://`` / ``rediss://`` URL (the store creates its own client
    and closes it in ``aclose()``) or a ``redis.asyncio.Redis`` client (used as is and never
    closed by the store). Every key starts with ``<prefix>:``; stores with different prefixes
    share nothing.

    ``finished_ttl_seconds``: when set, a record whose value is a mapping with ``status`` in
    :data:`~prism_store_redis.FINISHED_STATUSES` expires that many seconds after it was saved;
    saving a non-finished value again removes the expiry. ``max_records`` and
    ``max_value_bytes`` bound the store like the memory store's options
    (:class:`~prism_core.stores.CheckpointLimitError`).

    The store is asyncio-only (redis-py's client is); opening it does no I/O.
    """
    if not isinstance(prefix, str) or not prefix:
        raise InvalidCheckpointError("prefix must be a non-empty string")
    finished_ttl_seconds = positive(finished_ttl_seconds, "finished_ttl_seconds")
    max_records = positive(max_records, "max_records")
    max_value_bytes = positive(max_value_bytes, "max_value_bytes")
    return RedisCheckpointStore(
        RedisConnection(
            url_or_client,
            error=CheckpointStoreError,
            transient=CheckpointStoreUnavailableError,
            timeout_ms=timeout_ms,
        ),
        prefix=prefix,
        finished_ttl_seconds=finished_ttl_seconds,
        max_records=max_records,
        max_value_bytes=max_value_bytes,
    )


def create_redis_session_store(
    url_or_client: str | aioredis.Redis | RedisCheckpointStore,
    *,
    prefix: str | None = None,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> RedisSessionStore:
    """A Redis session store.

    ``url_or_client`` is a ``redis://`` / ``rediss://`` URL (the store creates its own client
    and closes it in ``aclose()``), a ``redis.asyncio.Redis`` client (used as is and never
    closed by the store), or a :class:`~prism_store_redis.RedisCheckpointStore`: the session
    store then talks through that store's client (and never closes it), so the two can commit
    together (``prism_core.stores.shared_transaction``: one script per commit). Every key
    starts with ``<prefix>:`` (default: the checkpoint store's prefix when given one, else
    ``prism``). Redis failures raise :class:`RedisSessionStoreError`. A client created here
    bounds each command by ``timeout_ms``. The store is asyncio-only; opening it does no I/O.
    """
    target: str | aioredis.Redis
    if isinstance(url_or_client, RedisCheckpointStore):
        target = url_or_client.client
        prefix = url_or_client.prefix if prefix is None else prefix
    else:
        target = url_or_client
    prefix = "prism" if prefix is None else prefix
    if not isinstance(prefix, str) or not prefix:
        raise ValueError("prefix must be a non-empty string")
    connection = RedisConnection(target, error=RedisSessionStoreError, timeout_ms=timeout_ms)
    return RedisSessionStore(connection, prefix=prefix)


@attrs.define(eq=False)
class RedisStores(StorePair):
    """A checkpoint store and a session store sharing one client: a
    :class:`~prism_core.stores.StorePair` of the Redis stores.

    Unpacks as ``checkpoints, sessions = stores``; closing it closes both (and the client the
    checkpoint store created).
    """

    checkpoints: RedisCheckpointStore
    sessions: RedisSessionStore


def open_redis_stores(
    url: str,
    *,
    prefix: str = "prism",
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    **checkpoint_options: Any,
) -> RedisStores:
    """Both Redis stores on one client created from ``url``, able to commit together.

    ``checkpoint_options`` go to :func:`~prism_store_redis.create_redis_checkpoint_store`
    (``finished_ttl_seconds``, ``max_records``, ``max_value_bytes``). Opens no connection
    until the first call.
    """
    checkpoints = create_redis_checkpoint_store(
        url, prefix=prefix, timeout_ms=timeout_ms, **checkpoint_options
    )
    return RedisStores(checkpoints, create_redis_session_store(checkpoints))
