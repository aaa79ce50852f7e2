"""``open_redis_stores(url)``: a checkpoint store and a session store on one Redis client.

The two stores can commit together (``prism_core.durable.shared_transaction``): a durable
run's session entries and its checkpoint go to Redis in one Lua script.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType
from typing import Any, Self

import attrs

from ._checkpoints import RedisCheckpointStore, create_redis_checkpoint_store
from ._client import DEFAULT_TIMEOUT_MS
from ._sessions import RedisSessionStore, create_redis_session_store

__all__ = ("RedisStores", "open_redis_stores")


@attrs.frozen
class RedisStores:
    """A checkpoint store and a session store sharing one client.

    Unpacks as ``checkpoints, sessions = stores``; closing it closes both (and the client the
    checkpoint store created).
    """

    checkpoints: RedisCheckpointStore
    sessions: RedisSessionStore

    def __iter__(self) -> Iterator[Any]:
        return iter((self.checkpoints, self.sessions))

    async def aclose(self) -> None:
        """Close both stores; idempotent."""
        await self.sessions.aclose()
        await self.checkpoints.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


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
