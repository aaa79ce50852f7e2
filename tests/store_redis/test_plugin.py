"""The ``plugin`` object: Redis URLs resolve to Redis stores through a plugin host."""

from __future__ import annotations

from importlib.metadata import entry_points
from urllib.parse import urlencode

import pytest
import redis.asyncio as aioredis

import prism_store_redis
from prism_core import open_checkpoint_store, open_session_store
from prism_core.content import Message
from prism_core.plugins import PluginHost
from prism_core.records import SessionStore, create_session_entry
from prism_core.stores import CheckpointStore
from prism_store_redis import RedisCheckpointStore, RedisSessionStore
from prism_store_redis._client import split_store_url
from prism_store_redis._keys import CheckpointKeys
from tests.conftest import REDIS_URL


def with_prefix(url: str, prefix: str) -> str:
    """``url`` with a ``prefix`` query parameter added."""
    return f"{url}{'&' if '?' in url else '?'}{urlencode({'prefix': prefix})}"


@pytest.mark.anyio
async def test_checkpoint_store_from_url(redis_client: aioredis.Redis, prefix: str) -> None:
    """A ``redis://…?prefix=`` URL opens a working store under that prefix."""
    host = PluginHost(plugins=[prism_store_redis.plugin])
    store = host.checkpoint_store(with_prefix(REDIS_URL, prefix))
    assert isinstance(store, RedisCheckpointStore)
    assert store.prefix == prefix
    async with store:
        await store.save("ns", "k", {"status": "running"}, version=1)
        record = await store.load("ns", "k")
        assert record is not None
        assert record.value == {"status": "running"}
    assert await redis_client.exists(CheckpointKeys(prefix).record("ns", "k"))


@pytest.mark.anyio
async def test_session_store_from_url(redis_client: aioredis.Redis, prefix: str) -> None:
    """The session hook answers the same URLs."""
    host = PluginHost(plugins=[prism_store_redis.plugin])
    store = host.session_store(with_prefix(REDIS_URL, prefix))
    assert isinstance(store, RedisSessionStore)
    assert store.prefix == prefix
    async with store:
        entry = create_session_entry(session_id="s", kind="message", message=Message.user("hi"))
        await store.append(entry)
        assert await store.read_branch_path("s", entry.id) == [entry]


@pytest.mark.anyio
async def test_default_prefix_and_tls_scheme() -> None:
    """Without ``?prefix=`` the prefix is ``prism``; ``rediss://`` is answered too."""
    host = PluginHost(plugins=[prism_store_redis.plugin])
    for url in ("redis://127.0.0.1:6379/0", "rediss://example.invalid:6380/1"):
        checkpoints = host.checkpoint_store(url)
        sessions = host.session_store(url)
        assert isinstance(checkpoints, RedisCheckpointStore)
        assert isinstance(sessions, RedisSessionStore)
        assert checkpoints.prefix == sessions.prefix == "prism"
        await checkpoints.aclose()
        await sessions.aclose()


def test_other_schemes_are_not_answered() -> None:
    """Every other URL gets ``None`` so the next plugin can answer it."""
    host = PluginHost(plugins=[prism_store_redis.plugin])
    assert prism_store_redis.plugin.store_schemes == ("redis", "rediss")
    for url in ("memory://", "sqlite:///run.db", "postgresql://localhost/db", "unix:///tmp/s"):
        assert host.checkpoint_store(url) is None
        assert host.session_store(url) is None


def test_store_url_options() -> None:
    """``prefix`` is taken out of the query; redis-py options stay; a bad prefix is refused."""
    assert split_store_url("redis://h:1/2?prefix=app%3A1&socket_timeout=5") == (
        "redis://h:1/2?socket_timeout=5",
        "app:1",
    )
    assert split_store_url("rediss://:pw@h/0") == ("rediss://:pw@h/0", None)
    assert split_store_url("redis://h/0?client_name=a%20b&prefix=p") == (
        "redis://h/0?client_name=a%20b",
        "p",
    )
    for url in ("redis://h/0?prefix=", "redis://h/0?prefix=a&prefix=b"):
        with pytest.raises(ValueError, match="prefix"):
            split_store_url(url)


def test_entry_point_names_the_plugin() -> None:
    """The ``prism`` entry point ``redis`` loads this distribution's plugin object."""
    (entry,) = entry_points(group="prism", name="redis")
    assert entry.load() is prism_store_redis.plugin


@pytest.mark.anyio
async def test_open_store_functions_resolve_redis_urls(
    redis_client: aioredis.Redis, prefix: str
) -> None:
    """``open_checkpoint_store`` / ``open_session_store`` accept the stores as protocols."""
    url = with_prefix(REDIS_URL, prefix)
    async with open_checkpoint_store(url, plugins=[prism_store_redis.plugin]) as checkpoints:
        assert isinstance(checkpoints, RedisCheckpointStore)
        assert isinstance(checkpoints, CheckpointStore)
        await checkpoints.save("ns", "k", 1, version=1)
    async with open_session_store(url, plugins=[prism_store_redis.plugin]) as sessions:
        assert isinstance(sessions, RedisSessionStore)
        assert isinstance(sessions, SessionStore)
        assert await sessions.list("s") == []
