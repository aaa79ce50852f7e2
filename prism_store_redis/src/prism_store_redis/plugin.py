"""The plugin object that answers ``redis://`` and ``rediss://`` store URLs."""

from __future__ import annotations

from urllib.parse import urlsplit

from prism_core.hookspecs import hookimpl
from prism_core.stores import StorePair

from ._checkpoints import RedisCheckpointStore
from ._client import REDIS_SCHEMES, split_store_url
from ._open import create_redis_checkpoint_store, create_redis_session_store, open_redis_stores
from ._sessions import RedisSessionStore

__all__ = ("RedisStorePlugin", "plugin")


class RedisStorePlugin:
    """Opens Redis stores for ``redis://…`` / ``rediss://…`` URLs (``?prefix=`` optional)."""

    #: The URL schemes this plugin answers.
    store_schemes = REDIS_SCHEMES

    def _owns(self, url: str) -> bool:
        return isinstance(url, str) and urlsplit(url).scheme in self.store_schemes

    @hookimpl
    def prism_checkpoint_store(self, url: str) -> RedisCheckpointStore | None:
        """A checkpoint store for a Redis URL, or ``None`` for any other scheme."""
        if not self._owns(url):
            return None
        redis_url, prefix = split_store_url(url)
        return create_redis_checkpoint_store(redis_url, prefix=prefix or "prism")

    @hookimpl
    def prism_open_stores(self, url: str) -> StorePair | None:
        """Both Redis stores for a Redis URL on one client, committing a durable turn
        together (one script); ``None`` for any other scheme."""
        if not self._owns(url):
            return None
        redis_url, prefix = split_store_url(url)
        checkpoints, sessions = open_redis_stores(redis_url, prefix=prefix or "prism")
        return StorePair(checkpoints, sessions)

    @hookimpl
    def prism_session_store(self, url: str) -> RedisSessionStore | None:
        """A session store for a Redis URL, or ``None`` for any other scheme."""
        if not self._owns(url):
            return None
        redis_url, prefix = split_store_url(url)
        return create_redis_session_store(redis_url, prefix=prefix or "prism")


#: The plugin object (entry point ``prism`` → ``prism_store_redis:plugin``).
plugin = RedisStorePlugin()
