"""The demo's stores: a pair opened by URL under a private prefix, and its removal afterwards.

Opening goes through :func:`prism_core.open_stores` and the installed store plugins, like any
host; the prefix travels in the URL, as the store distributions document it
(``?table_prefix=`` for SQL URLs, ``?prefix=`` for Redis URLs). The plugin comes from the
URL's scheme (:func:`prism_core.discover_store_plugins`, from entry-point metadata), so the
orchestrator and each worker import that one store plugin, never a provider SDK (which can
take seconds to import); the orchestrator checks it is installed before any worker starts.

Removal is the one place the CLI knows a backend: a demo on a shared PostgreSQL or Redis
server must leave nothing behind, and no store protocol drops a prefix's tables or keys. It
uses only what the store distributions expose publicly (``SqlCheckpointStore.engine`` and
``.tables``, ``RedisCheckpointStore.client`` and ``.prefix``), imported when there is
something to drop; it must not import a driver (SQLAlchemy, redis) itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote

import anyio

from prism_core import (
    STORE_INSTALL_HINTS,
    PrismError,
    StorePair,
    discover_store_plugins,
    open_stores,
)

__all__ = (
    "drop_demo_stores",
    "check_store_installed",
    "open_demo_stores",
    "prefixed_url",
)

_SQL = ("sqlite", "postgresql", "postgres")
_REDIS = ("redis", "rediss")
_UNSUPPORTED_CODE = "ERR_PRISM_STORE_UNSUPPORTED"


def _scheme(url: str) -> str:
    return url.split(":", 1)[0].split("+", 1)[0].lower()


def prefixed_url(url: str, prefix: str) -> str:
    """``url`` with the store option that isolates the demo under ``prefix``: tables
    ``<prefix>_…`` on SQL URLs, keys ``<prefix>:…`` on Redis URLs."""
    scheme = _scheme(url)
    if scheme in _SQL:
        option = f"table_prefix={quote(prefix + '_', safe='')}"
    elif scheme in _REDIS:
        option = f"prefix={quote(prefix, safe='')}"
    else:
        raise SystemExit(f"prism demo: unsupported store URL scheme {scheme!r}")
    return f"{url}{'&' if '?' in url else '?'}{option}"


def open_demo_stores(url: str, prefix: str, plugins: Sequence[object] | None = None) -> StorePair:
    """The checkpoint and session stores for ``url`` (SQLite, PostgreSQL or Redis) under
    ``prefix``, as one pair sharing a connection, so a turn's entries and its checkpoint
    commit together. ``plugins`` defaults to the installed ones that declare the URL's
    scheme.

    Exits (``SystemExit``) with the install command when no installed plugin opens the URL.
    """
    found = discover_store_plugins(url) if plugins is None else list(plugins)
    try:
        return open_stores(prefixed_url(url, prefix), plugins=found)
    except PrismError as exc:
        raise _missing(url, exc) from exc


def _missing(url: str, cause: PrismError) -> SystemExit | PrismError:
    hint = STORE_INSTALL_HINTS.get(_scheme(url))
    if cause.code != _UNSUPPORTED_CODE or hint is None:
        return cause
    return SystemExit(f"prism demo: no store for {_scheme(url)} URLs is installed: {hint}")


def check_store_installed(url: str) -> None:
    """Exit (``SystemExit``) with the install command when no installed distribution opens
    ``url``'s scheme (or a scheme the demo cannot prefix); connects to nothing."""
    prefixed_url(url, "prismdemo_probe")
    if not discover_store_plugins(url):
        unsupported = PrismError(f"no store for {_scheme(url)} URLs", code=_UNSUPPORTED_CODE)
        raise _missing(url, unsupported)


async def _drop(pair: StorePair) -> None:
    checkpoints = pair.checkpoints
    module = type(checkpoints).__module__.split(".", 1)[0]
    if module == "prism_store_sql":
        # Deferred: prism-runtime-sql is optional; it is installed when its store is in use.
        from prism_store_sql import SqlCheckpointStore

        if isinstance(checkpoints, SqlCheckpointStore):
            async with checkpoints.engine.begin() as connection:
                await connection.run_sync(checkpoints.tables.metadata.drop_all)
    elif module == "prism_store_redis":
        # Deferred: prism-runtime-redis is optional; it is installed when its store is in use.
        from prism_store_redis import RedisCheckpointStore

        if isinstance(checkpoints, RedisCheckpointStore):
            client = checkpoints.client
            async for key in client.scan_iter(match=f"{checkpoints.prefix}:*"):
                await client.delete(key)


def drop_demo_stores(url: str, prefix: str, plugins: Sequence[object] | None = None) -> None:
    """Drop what a demo under ``prefix`` wrote on a PostgreSQL or Redis server: its tables or
    its keys. SQLite files stay in their folder; other URLs are left alone. ``plugins``
    defaults to the installed ones."""
    if _scheme(url) not in ("postgresql", "postgres", *_REDIS):
        return

    async def drop() -> None:
        async with open_demo_stores(url, prefix, plugins) as pair:
            await _drop(pair)

    anyio.run(drop)
