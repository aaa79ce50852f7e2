"""Open checkpoint and session stores from URLs through the composed plugins.

``memory://`` is built in; every other scheme (``sqlite:///run.db``, ``postgresql://…``,
``redis://…``) is answered by a store plugin's ``prism_open_stores`` hook (a pair that
commits together) or its ``prism_checkpoint_store`` / ``prism_session_store`` hooks. A
plugin object may list the schemes it opens in a ``store_schemes`` attribute so an
unsupported URL's error can say what would work. It opens; it must not hold store behaviour.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from .._capability import capability
from ..durable._capabilities import CreatesOnFirstUse
from ..durable._checkpoints import CheckpointStore
from ..durable._memory import create_memory_checkpoint_store
from ..durable._pair import StorePair
from ..errors import PrismError
from ..plugins import PluginError, PluginHost
from ..records._memory import create_memory_session_store
from ..records._store import SessionStore

__all__ = ("STORE_INSTALL_HINTS", "open_checkpoint_store", "open_session_store", "open_stores")

_UNSUPPORTED_CODE = "ERR_PRISM_STORE_UNSUPPORTED"

#: How to install the store for each well-known URL scheme.
STORE_INSTALL_HINTS: Mapping[str, str] = MappingProxyType(
    {
        "sqlite": "pip install 'prism-runtime[sql]'",
        "postgresql": "pip install 'prism-runtime[postgres]'",
        "postgres": "pip install 'prism-runtime[postgres]'",
        "redis": "pip install 'prism-runtime[redis]'",
        "rediss": "pip install 'prism-runtime[redis]'",
    }
)

_PLUGIN_MODULES: Mapping[str, str] = MappingProxyType(
    {
        "sqlite": "prism_store_sql",
        "postgresql": "prism_store_sql",
        "postgres": "prism_store_sql",
        "redis": "prism_store_redis",
        "rediss": "prism_store_redis",
    }
)


def _scheme(url: str) -> str:
    # Only the scheme is ever shown: the rest of a URL may carry user:password@ or a token.
    head, sep, _ = url.partition(":")
    if not sep or not head or not head[0].isalpha():
        return ""
    if not all(ch.isalnum() or ch in "+-." for ch in head):
        return ""
    return head.lower()


def _supported_schemes(plugins: Iterable[object]) -> list[str]:
    schemes = ["memory"]
    for plugin in plugins:
        declared = getattr(plugin, "store_schemes", ())
        if isinstance(declared, str):
            declared = (declared,)
        if not isinstance(declared, Iterable):
            continue
        for scheme in declared:
            if isinstance(scheme, str) and scheme and scheme not in schemes:
                schemes.append(scheme)
    return schemes


def _unsupported(kind: str, url: str, plugins: tuple[object, ...]) -> PrismError:
    scheme = _scheme(url)
    what = f"{scheme!r} URLs" if scheme else "a URL without a scheme"
    schemes = _supported_schemes(plugins)
    supported = ", ".join(schemes)
    base = scheme.split("+", 1)[0]
    hint = STORE_INSTALL_HINTS.get(base)
    if scheme and (scheme in schemes or base in schemes):
        how = (
            f"A composed plugin declares {base!r} but declined this URL: check the URL's form "
            f"against that plugin's documentation and that it opens {kind} stores."
        )
    elif hint is not None:
        how = (
            f"To open {base} URLs: {hint}, then pass plugins=[{_PLUGIN_MODULES[base]}.plugin] "
            "(or plugins=discover_store_plugins(url), which imports only the store plugin "
            "that declares this scheme)."
        )
    else:
        examples = ", ".join(
            f"{STORE_INSTALL_HINTS[name]} for {name}" for name in ("sqlite", "postgresql", "redis")
        )
        how = (
            f"To add a scheme, install a store distribution whose plugin implements "
            f"prism_{kind}_store and pass it in plugins=[...], e.g. {examples}."
        )
    return PrismError(
        f"No {kind} store for {what}: none of the composed plugins opens it. "
        f"Supported schemes: {supported}. {how}",
        code=_UNSUPPORTED_CODE,
    )


#: The plugin hosts the openers built, by the identity of their plugins, in order.
_HOSTS: dict[tuple[int, ...], tuple[tuple[object, ...], PluginHost]] = {}
_MAX_HOSTS = 32


def _host(plugins: Iterable[object]) -> PluginHost:
    """A plugin host for ``plugins``, built once per process for the same plugin objects:
    a worker that opens its stores for every task checks and registers its plugins once,
    not on every open (the hooks they answer are called anew each time)."""
    composed = tuple(plugins)
    key = tuple(id(plugin) for plugin in composed)
    found = _HOSTS.get(key)
    # The objects themselves are kept with the host, so an id is never reused meanwhile.
    if found is not None and all(a is b for a, b in zip(found[0], composed, strict=True)):
        return found[1]
    host = PluginHost(composed)
    if len(_HOSTS) >= _MAX_HOSTS:
        _HOSTS.pop(next(iter(_HOSTS)))
    _HOSTS[key] = (composed, host)
    return host


def _check_url(url: Any) -> str:
    if not isinstance(url, str) or not url:
        raise TypeError(f"a store URL must be a non-empty string, got {type(url).__name__}")
    return url


def open_checkpoint_store(
    url: str, *, plugins: Iterable[object] = (), create: bool = True
) -> CheckpointStore:
    """A checkpoint store for ``url``: ``memory://`` built in, other schemes via ``plugins``.

    ``create=False`` opens a store that creates nothing: a database or tables that do not
    exist are refused on first use (the SQL stores: ``SqlStoreSchemaError``, "no Prism tables
    at …"); stores without a schema (memory, Redis) are unaffected.

    Each call returns a fresh store; the caller closes it (``await store.aclose()`` or
    ``async with``). Raises :class:`~prism_core.PrismError` with code
    ``ERR_PRISM_STORE_UNSUPPORTED`` when no composed plugin opens the URL's scheme.
    """
    _check_url(url)
    if _scheme(url) == "memory":
        return create_memory_checkpoint_store()
    host = _host(plugins)
    store = host.checkpoint_store(url, create=create)
    if store is None:
        raise _unsupported("checkpoint", url, host.plugins)
    if not isinstance(store, CheckpointStore):
        raise PluginError(
            f"a plugin answered prism_checkpoint_store for a {_scheme(url)!r} URL with "
            f"{type(store).__name__}, which is not a CheckpointStore"
        )
    return store


def open_session_store(
    url: str, *, plugins: Iterable[object] = (), create: bool = True
) -> SessionStore:
    """A session store for ``url``: ``memory://`` built in, other schemes via ``plugins``
    (``create`` as for :func:`open_checkpoint_store`).

    Each call returns a fresh store; the caller closes it. Raises
    :class:`~prism_core.PrismError` with code ``ERR_PRISM_STORE_UNSUPPORTED`` when no
    composed plugin opens the URL's scheme.
    """
    _check_url(url)
    if _scheme(url) == "memory":
        return create_memory_session_store()
    host = _host(plugins)
    store = host.session_store(url, create=create)
    if store is None:
        raise _unsupported("session", url, host.plugins)
    if not isinstance(store, SessionStore):
        raise PluginError(
            f"a plugin answered prism_session_store for a {_scheme(url)!r} URL with "
            f"{type(store).__name__}, which is not a SessionStore"
        )
    return store


def open_stores(url: str, *, plugins: Iterable[object] = (), create: bool = True) -> StorePair:
    """A checkpoint store and a session store for ``url``, as one :class:`StorePair`.

    ``memory://`` gives the two memory stores, which commit together. Other schemes go to the
    first plugin whose ``prism_open_stores`` hook answers: for ``sqlite:///``,
    ``postgresql://`` and ``redis://`` URLs the two stores share one connection (or engine,
    or client), so a durable turn of read-only or idempotent tools is one commit. When no
    plugin answers that hook, the two single-store hooks open the stores one by one (they do
    not commit together). Nothing connects until the first call; close the pair with
    ``await pair.aclose()`` or ``async with``. Raises :class:`~prism_core.PrismError` with
    code ``ERR_PRISM_STORE_UNSUPPORTED`` when no composed plugin opens the URL's scheme.
    ``create=False`` (what ``prism runs`` passes) opens stores that create nothing, as for
    :func:`open_checkpoint_store`: a plugin's pair is opened as for any caller and each of its
    stores that offers :class:`~prism_core.stores.CreatesOnFirstUse` is told
    ``create_nothing()`` before the pair is returned (a store without it has nothing to
    create).
    """
    _check_url(url)
    if _scheme(url) == "memory":
        return StorePair(create_memory_checkpoint_store(), create_memory_session_store())
    host = _host(plugins)
    pair = host.open_stores(url)
    opened_by_pair = pair is not None
    if pair is None:
        checkpoints = host.checkpoint_store(url, create=create)
        if checkpoints is None:
            raise _unsupported("checkpoint", url, host.plugins)
        sessions = host.session_store(url, create=create)
        if sessions is None:
            raise _unsupported("session", url, host.plugins)
        pair = StorePair(checkpoints, sessions)
    if not isinstance(pair, StorePair):
        raise PluginError(
            f"a plugin answered prism_open_stores for a {_scheme(url)!r} URL with "
            f"{type(pair).__name__}, which is not a prism_core.stores.StorePair"
        )
    for store, protocol in ((pair.checkpoints, CheckpointStore), (pair.sessions, SessionStore)):
        if not isinstance(store, protocol):
            raise PluginError(
                f"a plugin's pair for a {_scheme(url)!r} URL holds {type(store).__name__}, "
                f"which is not a {protocol.__name__}"
            )
    if opened_by_pair and not create:
        for store in pair:
            creating = capability(store, CreatesOnFirstUse)
            if creating is not None:
                creating.create_nothing()
    return pair
