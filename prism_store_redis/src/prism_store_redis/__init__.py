"""Prism checkpoint and session stores on Redis (redis-py asyncio).

Use :func:`create_redis_checkpoint_store` and :func:`create_redis_session_store` directly
(:func:`open_redis_stores` opens both on one client, so they can commit together), or
compose :data:`plugin` so ``redis://`` / ``rediss://`` store URLs resolve to these stores. The
stores run on asyncio only, because redis-py's client does.
"""

from ._checkpoints import FINISHED_STATUSES, RedisCheckpointStore
from ._open import (
    RedisStores,
    create_redis_checkpoint_store,
    create_redis_session_store,
    open_redis_stores,
)
from ._sessions import (
    RedisSessionStore,
    RedisSessionStoreError,
    RedisSessionStoreUnavailableError,
)
from .plugin import RedisStorePlugin, plugin

__all__ = (
    "FINISHED_STATUSES",
    "RedisCheckpointStore",
    "RedisSessionStore",
    "RedisSessionStoreError",
    "RedisSessionStoreUnavailableError",
    "RedisStorePlugin",
    "RedisStores",
    "create_redis_checkpoint_store",
    "create_redis_session_store",
    "open_redis_stores",
    "plugin",
)
