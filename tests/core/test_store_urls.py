"""Opening checkpoint and session stores from URLs."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from prism_core import hookspecs
from prism_core.content import Message
from prism_core.errors import PrismError
from prism_core.hookspecs import hookimpl
from prism_core.plugins import PluginError
from prism_core.records import MemorySessionStore, create_session_entry
from prism_core.stores import (
    STORE_INSTALL_HINTS,
    CreatesOnFirstUse,
    MemoryCheckpointStore,
    StorePair,
    open_checkpoint_store,
    open_session_store,
    open_stores,
    shared_transaction,
)


class TinyStorePlugin:
    """A plugin that opens ``tiny://`` URLs with memory stores and records what it saw."""

    store_schemes = ("tiny",)

    def __init__(self) -> None:
        self.urls: list[str] = []

    @hookimpl
    def prism_checkpoint_store(self, url: str) -> Any:
        self.urls.append(url)
        if not url.startswith("tiny://"):
            return None
        return MemoryCheckpointStore(max_records=3)

    @hookimpl
    def prism_session_store(self, url: str) -> Any:
        self.urls.append(url)
        return MemorySessionStore() if url.startswith("tiny://") else None


class DecliningPlugin:
    """Declares ``sqlite`` but never opens anything."""

    store_schemes = ("sqlite", "postgresql")

    @hookimpl
    def prism_checkpoint_store(self, url: str) -> Any:
        return None


class WrongObjectPlugin:
    """Answers the hook with something that is not a store."""

    @hookimpl
    def prism_checkpoint_store(self, url: str) -> Any:
        return "not a store"

    @hookimpl
    def prism_session_store(self, url: str) -> Any:
        return object()


@pytest.mark.anyio
@pytest.mark.parametrize("url", ["memory://", "memory:///anything", "MEMORY://x"])
async def test_memory_urls_open_fresh_checkpoint_stores(url: str) -> None:
    """Any ``memory://`` URL opens a new, empty, working checkpoint store."""
    first = open_checkpoint_store(url)
    second = open_checkpoint_store(url)
    assert isinstance(first, MemoryCheckpointStore)
    assert first is not second
    async with first as store:
        await store.save("ns", "k", {"v": 1}, version=1)
    assert await second.load("ns", "k") is None


@pytest.mark.anyio
async def test_memory_url_opens_a_session_store() -> None:
    """``memory://`` opens a working in-memory session store."""
    opened = open_session_store("memory://")
    assert isinstance(opened, MemorySessionStore)
    async with opened as store:
        entry = create_session_entry(session_id="s1", kind="message", message=Message.user("hi"))
        await store.append(entry)
        assert await store.list("s1") == [entry]
    assert isinstance(
        open_session_store("memory://", plugins=[TinyStorePlugin()]), MemorySessionStore
    )


def test_memory_url_does_not_ask_plugins() -> None:
    """The built-in scheme is answered without calling any plugin."""
    plugin = TinyStorePlugin()
    open_checkpoint_store("memory://", plugins=[plugin])
    assert plugin.urls == []


@pytest.mark.parametrize("opener", [open_checkpoint_store, open_session_store])
def test_unknown_scheme_names_schemes_and_a_fix(opener: Any) -> None:
    """An unknown scheme fails with ``ERR_PRISM_STORE_UNSUPPORTED``, the schemes and a pip hint."""
    with pytest.raises(PrismError) as info:
        opener("foo://host/db", plugins=[TinyStorePlugin()])
    error = info.value
    assert error.code == "ERR_PRISM_STORE_UNSUPPORTED"
    message = str(error)
    assert "'foo'" in message
    assert "memory, tiny" in message
    assert "pip install 'prism-runtime[sql]'" in message
    assert "pip install 'prism-runtime[redis]'" in message


@pytest.mark.parametrize(
    ("url", "hint", "plugin"),
    [
        ("sqlite:///run.db", "pip install 'prism-runtime[sql]'", "prism_store_sql.plugin"),
        (
            "sqlite+aiosqlite:///run.db",
            "pip install 'prism-runtime[sql]'",
            "prism_store_sql.plugin",
        ),
        (
            "postgresql://app@db/prod",
            "pip install 'prism-runtime[postgres]'",
            "prism_store_sql.plugin",
        ),
        (
            "redis://127.0.0.1:6379/0",
            "pip install 'prism-runtime[redis]'",
            "prism_store_redis.plugin",
        ),
    ],
)
def test_known_scheme_without_plugin_says_what_to_install(url: str, hint: str, plugin: str) -> None:
    """A well-known scheme nobody composed names the extra to install and the plugin to pass."""
    with pytest.raises(PrismError) as info:
        open_checkpoint_store(url)
    assert info.value.code == "ERR_PRISM_STORE_UNSUPPORTED"
    assert hint in str(info.value)
    assert plugin in str(info.value)
    assert "Supported schemes: memory." in str(info.value)


@pytest.mark.parametrize("opener", [open_checkpoint_store, open_session_store])
def test_credentials_never_appear_in_the_error(opener: Any) -> None:
    """User, password and query secrets of the URL stay out of the message."""
    url = "redis://admin:hunter2@cache.internal:6380/0?password=s3cret&token=abc"
    with pytest.raises(PrismError) as info:
        opener(url)
    message = str(info.value)
    for secret in ("admin", "hunter2", "s3cret", "abc", "cache.internal"):
        assert secret not in message
    assert "'redis'" in message


def test_url_without_scheme_is_unsupported() -> None:
    """A bare path is refused with the same code."""
    with pytest.raises(PrismError) as info:
        open_checkpoint_store("run.db")
    assert info.value.code == "ERR_PRISM_STORE_UNSUPPORTED"
    assert "without a scheme" in str(info.value)


def test_declared_scheme_that_declines_says_so() -> None:
    """A plugin that declares a scheme but declines the URL is named as the cause."""
    with pytest.raises(PrismError) as info:
        open_checkpoint_store("sqlite:///x.db", plugins=[DecliningPlugin()])
    message = str(info.value)
    assert "memory, sqlite, postgresql" in message
    assert "declined" in message


@pytest.mark.anyio
async def test_plugin_resolves_its_own_scheme() -> None:
    """A plugin's hook opens its scheme; the URL reaches it exactly as written."""
    plugin = TinyStorePlugin()
    store = open_checkpoint_store("tiny://bucket/runs?x=1", plugins=[plugin])
    assert isinstance(store, MemoryCheckpointStore)
    assert store.max_records == 3
    assert plugin.urls == ["tiny://bucket/runs?x=1"]
    sessions = open_session_store("tiny://bucket", plugins=[plugin])
    assert isinstance(sessions, MemorySessionStore)
    async with store:
        saved = await store.save("ns", "k", [1, 2], version=1)
        assert saved.value == [1, 2]


def test_first_answering_plugin_wins() -> None:
    """Plugins are asked in order and the first store returned is used."""
    first, second = TinyStorePlugin(), TinyStorePlugin()
    open_checkpoint_store("tiny://x", plugins=[first, second])
    assert first.urls == ["tiny://x"]
    assert second.urls == []


def test_declining_plugin_falls_through_to_the_next() -> None:
    """A plugin answering ``None`` lets the next plugin open the URL."""
    tiny = TinyStorePlugin()
    store = open_checkpoint_store("tiny://x", plugins=[DecliningPlugin(), tiny])
    assert isinstance(store, MemoryCheckpointStore)


@pytest.mark.parametrize("opener", [open_checkpoint_store, open_session_store])
def test_plugin_answering_a_non_store_is_refused(opener: Any) -> None:
    """An answer that is not a store raises ``PluginError``."""
    with pytest.raises(PluginError):
        opener("odd://x", plugins=[WrongObjectPlugin()])


@pytest.mark.parametrize("url", [None, "", b"memory://"])
def test_url_must_be_a_string(url: Any) -> None:
    """A non-string or empty URL is a ``TypeError``."""
    with pytest.raises(TypeError):
        open_checkpoint_store(url)


def test_install_hints_cover_the_shipped_stores() -> None:
    """The hints name an install command for each store Prism ships."""
    assert STORE_INSTALL_HINTS["sqlite"] == "pip install 'prism-runtime[sql]'"
    assert STORE_INSTALL_HINTS["postgresql"] == "pip install 'prism-runtime[postgres]'"
    assert STORE_INSTALL_HINTS["redis"] == "pip install 'prism-runtime[redis]'"
    with pytest.raises(TypeError):
        STORE_INSTALL_HINTS["x"] = "y"  # type: ignore[index]


class PairPlugin:
    """Opens ``pair://`` URLs as one pair of memory stores, and counts what it opened."""

    store_schemes = ("pair",)

    def __init__(self) -> None:
        self.pairs: list[StorePair] = []

    @hookimpl
    def prism_open_stores(self, url: str) -> Any:
        if not url.startswith("pair://"):
            return None
        pair = StorePair(MemoryCheckpointStore(), MemorySessionStore())
        self.pairs.append(pair)
        return pair


class WrongPairPlugin:
    """Answers ``prism_open_stores`` with a plain tuple, then with a pair of non-stores."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    @hookimpl
    def prism_open_stores(self, url: str) -> Any:
        return self.answer


@pytest.mark.anyio
async def test_memory_url_opens_a_pair_that_commits_together() -> None:
    """``open_stores("memory://")`` gives fresh memory stores that share a commit, unpacks as
    ``checkpoints, sessions`` and closes idempotently."""
    async with open_stores("memory://") as pair:
        checkpoints, sessions = pair
        assert isinstance(checkpoints, MemoryCheckpointStore)
        assert isinstance(sessions, MemorySessionStore)
        assert shared_transaction(checkpoints, sessions) is not None
    await pair.aclose()
    other = open_stores("memory://")
    assert other.checkpoints is not checkpoints


def test_the_pair_hook_answers_first() -> None:
    """A plugin's ``prism_open_stores`` answer is returned as is; the single-store hooks of a
    later plugin are not asked."""
    pairs, singles = PairPlugin(), TinyStorePlugin()
    pair = open_stores("pair://x", plugins=[pairs, singles])
    assert pairs.pairs == [pair]
    assert singles.urls == []


@pytest.mark.anyio
async def test_without_a_pair_hook_the_single_store_hooks_open_both() -> None:
    """A plugin with only the two single-store hooks still opens a pair (two separate stores)."""
    plugin = TinyStorePlugin()
    async with open_stores("tiny://db", plugins=[plugin]) as pair:
        assert isinstance(pair.checkpoints, MemoryCheckpointStore)
        assert isinstance(pair.sessions, MemorySessionStore)
    assert plugin.urls == ["tiny://db", "tiny://db"]


def test_pair_of_an_unknown_scheme_is_unsupported_without_echoing_credentials() -> None:
    """An unknown scheme fails with ``ERR_PRISM_STORE_UNSUPPORTED`` and never quotes the
    URL's user or password."""
    with pytest.raises(PrismError) as info:
        open_stores("foo://user:s3cret@host/db", plugins=[PairPlugin()])
    assert info.value.code == "ERR_PRISM_STORE_UNSUPPORTED"
    assert "s3cret" not in str(info.value)
    assert "pair" in str(info.value)


@pytest.mark.parametrize(
    "answer",
    [
        (MemoryCheckpointStore(), MemorySessionStore()),
        StorePair("not a store", MemorySessionStore()),  # type: ignore[arg-type]
        StorePair(MemoryCheckpointStore(), object()),  # type: ignore[arg-type]
    ],
    ids=["tuple", "bad-checkpoints", "bad-sessions"],
)
def test_a_pair_answer_that_is_not_a_pair_of_stores_is_refused(answer: Any) -> None:
    """``prism_open_stores`` must answer a :class:`StorePair` of two stores, else
    ``PluginError``."""
    with pytest.raises(PluginError):
        open_stores("odd://x", plugins=[WrongPairPlugin(answer)])


class Creating(MemoryCheckpointStore):
    """A memory checkpoint store that would create things on first use, recording whether it
    was told to create nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.creates = True

    def create_nothing(self) -> None:
        self.creates = False


class CreatingPairPlugin:
    """Opens ``make://`` URLs as a pair whose checkpoint store creates on first use; its hook
    takes the URL alone, as the hookspec says."""

    @hookimpl
    def prism_open_stores(self, url: str) -> Any:
        if not url.startswith("make://"):
            return None
        return StorePair(Creating(), MemorySessionStore())


@pytest.mark.parametrize("create", [True, False])
def test_create_false_tells_the_pairs_stores_to_create_nothing(create: bool) -> None:
    """``open_stores(url, create=False)`` asks the pair hook with the URL alone and then calls
    ``create_nothing()`` on each store that offers :class:`CreatesOnFirstUse` (a store
    without it is left as it is); with ``create=True`` no store is told anything."""
    pair = open_stores("make://db", plugins=[CreatingPairPlugin()], create=create)
    assert isinstance(pair.checkpoints, Creating)
    assert isinstance(pair.checkpoints, CreatesOnFirstUse)
    assert not isinstance(pair.sessions, CreatesOnFirstUse)
    assert pair.checkpoints.creates is create


def test_the_pair_hookspec_takes_the_url_alone() -> None:
    """``prism_open_stores(url)``: the hookspec has exactly the one argument API.md names."""
    assert inspect.signature(hookspecs.prism_open_stores).parameters.keys() == {"url"}
