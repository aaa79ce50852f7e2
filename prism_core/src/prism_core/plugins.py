"""Explicit plugin composition: a fresh pluggy manager per host, never a global one.

:class:`PluginHost` calls the hooks and returns what :mod:`prism_core.hookspecs` declares
they answer; the callers check the answers (a store opener that it got a store, the agent
that a pack is a pack). It must not open stores or build agents itself.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Sequence
from importlib.metadata import EntryPoint, distributions, entry_points
from typing import TYPE_CHECKING, Any

import attrs
import pluggy

import prism_core.hookspecs as hookspecs

from .errors import PrismError

if TYPE_CHECKING:
    from .durable._checkpoints import CheckpointStore
    from .durable._pair import StorePair
    from .guardrails import GuardrailPack
    from .models import ModelConfig
    from .providers import AIProvider
    from .records import SessionStore

__all__ = (
    "InstalledPlugin",
    "PluginError",
    "PluginHost",
    "create_plugin_manager",
    "NOTIFIER_GROUP",
    "STORE_SCHEME_GROUP",
    "discover_plugins",
    "discover_store_plugins",
    "list_installed_plugins",
)

_HOOK_NAMES = frozenset(
    name for name, value in vars(hookspecs).items() if name.startswith("prism_") and callable(value)
)


class PluginError(PrismError):
    """A plugin could not be registered or answered a hook with something unusable."""

    code = "ERR_PRISM_PLUGIN"


def _check_plugin_shape(plugin: object) -> None:
    """Refuse the plugin mistakes pluggy would accept silently, naming the fix."""
    if inspect.isclass(plugin):
        raise PluginError(
            f"plugin {plugin.__name__!r} is a class; pass an instance instead: "
            f"plugins=[{plugin.__name__}()]. Hook methods are called on the instance."
        )
    marker = f"{hookspecs.PROJECT_NAME}_impl"
    for name in dir(plugin):
        if not name.startswith("prism_"):
            continue
        impl = getattr(plugin, name, None)
        if impl is None or not inspect.isroutine(impl):
            continue
        target = getattr(impl, "__func__", impl)
        if inspect.iscoroutinefunction(target) or inspect.isasyncgenfunction(target):
            raise PluginError(
                f"plugin {_plugin_name(plugin)!r}: hook {name} is 'async def'. Prism hooks are "
                "synchronous factories: return the object and put async methods on it."
            )
        # pluggy skips an unmarked method without a word, so the hook would never be called.
        if name in _HOOK_NAMES and getattr(impl, marker, None) is None:
            raise PluginError(
                f"plugin {_plugin_name(plugin)!r}: {name} is named like a Prism hook but is not "
                "marked as one, so it would never be called. Decorate it with @hookimpl "
                "(from prism_core.hookspecs import hookimpl)."
            )


def _plugin_name(plugin: object) -> str:
    return str(getattr(plugin, "__name__", None) or type(plugin).__name__)


def create_plugin_manager(*plugins: object) -> pluggy.PluginManager:
    """A new pluggy manager with Prism's hookspecs and ``plugins`` registered in order.

    Raises :class:`PluginError` (code ``ERR_PRISM_PLUGIN``) for a plugin class passed instead
    of an instance, an ``async def`` hookimpl, a hook-named method without ``@hookimpl``, or
    an unknown ``prism_*`` hook.
    """
    manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    manager.add_hookspecs(hookspecs)
    # pluggy calls the last-registered plugin first; registering in reverse makes the
    # host's order the call order (first plugin wins a firstresult hook).
    for plugin in reversed(plugins):
        if plugin is None:
            raise PluginError("a plugin may not be None")
        _check_plugin_shape(plugin)
        if manager.is_registered(plugin):
            continue
        try:
            manager.register(plugin)
        except ValueError as exc:
            raise PluginError(
                f"plugin {_plugin_name(plugin)!r} is registered twice: {exc}"
            ) from exc
    try:
        manager.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"plugin declares an unknown Prism hook: {exc}") from exc
    return manager


#: The entry-point group a store distribution declares its URL schemes under: each entry is
#: named after a scheme (``sqlite``, ``postgresql``, ``redis``) and points at the plugin
#: object that opens it, so a URL's plugin is found from metadata without importing others.
STORE_SCHEME_GROUP = "prism.stores"
#: The entry-point group of the plugins that answer ``prism_notifiers`` (``prism serve`` and
#: ``prism worker`` load these, and no other plugin, to deliver notifications).
NOTIFIER_GROUP = "prism.notifiers"


def discover_store_plugins(url: str, group: str = STORE_SCHEME_GROUP) -> list[object]:
    """The plugin objects installed distributions declare for ``url``'s scheme, under
    ``group`` (``sqlite+aiosqlite:`` looks for ``sqlite``); only those are imported, so
    opening a store from a URL never loads a model SDK or any other plugin. Registers
    nothing; empty when no installed distribution declares the scheme (``open_stores`` then
    says what to install)."""
    head, sep, _ = url.partition(":") if isinstance(url, str) else ("", "", "")
    if not sep or not head:
        return []
    scheme = head.split("+", 1)[0].lower()
    found: list[object] = []
    for entry in sorted(_entry_points_of(group, scheme), key=lambda e: e.value):
        plugin = entry.load()
        if all(plugin is not known for known in found):
            found.append(plugin)
    return found


def _entry_points_of(group: str, name: str) -> list[EntryPoint]:
    """``entry_points(group=group, name=name)``, reading the entry points of only the
    distributions whose ``entry_points.txt`` names ``group``: a new process opening its
    stores parses two files, not every installed distribution's (about 20 ms of a cold
    continue on a loaded 2-core machine, a third of it in a quiet moment). As
    ``entry_points``, a distribution shadowed by one of the same name earlier on the path
    is left out."""
    header = f"[{group}]"
    seen: set[str] = set()
    found: list[EntryPoint] = []
    for dist in distributions():
        # The name from the distribution's folder when the finder knows it (no METADATA read).
        key = getattr(dist, "_normalized_name", None) or str(dist.metadata["Name"])
        key = key.lower().replace("-", "_")
        if key in seen:
            continue
        seen.add(key)
        text = dist.read_text("entry_points.txt")
        if text and header in text:
            found.extend(dist.entry_points.select(group=group, name=name))
    return found


def discover_plugins(group: str = "prism") -> list[object]:
    """The plugin objects installed distributions declare under ``group``.

    Registers nothing: pass the result to ``create_agent(plugins=...)`` to use them.
    """
    found: list[object] = []
    for entry in sorted(entry_points(group=group), key=lambda e: e.name):
        found.append(entry.load())
    return found


@attrs.frozen
class InstalledPlugin:
    """One entry point of an installed distribution, described without importing it."""

    name: str
    """The entry point's name (``sql``, ``packs``)."""
    value: str
    """Where the plugin object lives, as ``module:attribute``."""
    distribution: str | None
    """The distribution that declares it (``prism-runtime-sql``), when known."""
    version: str | None
    """That distribution's version, when known."""


def list_installed_plugins(group: str = "prism") -> list[InstalledPlugin]:
    """The entry points installed distributions declare under ``group``, sorted by name.

    Reads package metadata only: no plugin module is imported and nothing is registered.
    """
    found: list[InstalledPlugin] = []
    for entry in entry_points(group=group):
        dist = entry.dist
        found.append(
            InstalledPlugin(
                name=entry.name,
                value=entry.value,
                distribution=dist.name if dist is not None else None,
                version=dist.version if dist is not None else None,
            )
        )
    return sorted(found, key=lambda p: (p.name, p.value, p.distribution or ""))


class PluginHost:
    """The typed facade the kernel calls hooks through (one per agent or store opener)."""

    def __init__(self, plugins: Iterable[object] = ()) -> None:
        self.plugins: tuple[object, ...] = tuple(plugins)
        self.manager = create_plugin_manager(*self.plugins)

    def _flatten(self, results: Sequence[Any], hook: str) -> list[Any]:
        items: list[Any] = []
        for result in results:
            if result is None:
                continue
            if isinstance(result, str | bytes) or not isinstance(result, Iterable):
                raise PluginError(f"hook {hook} must return a sequence or None, got {result!r}")
            items.extend(result)
        return items

    def guardrail_packs(self) -> list[GuardrailPack]:
        """Every pack definition the plugins declare, in registration order (checked by the
        pack catalogue)."""
        return self._flatten(self.manager.hook.prism_guardrail_packs(), "prism_guardrail_packs")

    def loop_strategies(self) -> list[Any]:
        """Every loop strategy the plugins declare, in registration order."""
        return self._flatten(self.manager.hook.prism_loop_strategies(), "prism_loop_strategies")

    def restore_hooks(self) -> list[Any]:
        """Every restore hook the plugins declare, in registration order."""
        return self._flatten(self.manager.hook.prism_restore_hooks(), "prism_restore_hooks")

    def middleware(self) -> list[object]:
        """Every middleware object the plugins declare, in registration order."""
        return self._flatten(self.manager.hook.prism_middleware(), "prism_middleware")

    def notifiers(self) -> list[Any]:
        """Every notifier the plugins declare, in registration order (checked by whoever
        delivers: each needs an async ``deliver``)."""
        return self._flatten(self.manager.hook.prism_notifiers(), "prism_notifiers")

    def provider(self, model: ModelConfig) -> AIProvider | None:
        """The first plugin provider for ``model``, or ``None``."""
        provider: AIProvider | None = self.manager.hook.prism_provider(model=model)
        return provider

    def open_stores(self, url: str) -> StorePair | None:
        """The first plugin's pair of stores for ``url``, or ``None`` (the opener checks that
        it is a ``StorePair``, and tells its stores to create nothing when asked)."""
        pair: StorePair | None = self.manager.hook.prism_open_stores(url=url)
        return pair

    def checkpoint_store(self, url: str, *, create: bool = True) -> CheckpointStore | None:
        """The first plugin checkpoint store for ``url``, or ``None``."""
        store: CheckpointStore | None = self.manager.hook.prism_checkpoint_store(
            url=url, create=create
        )
        return store

    def session_store(self, url: str, *, create: bool = True) -> SessionStore | None:
        """The first plugin session store for ``url``, or ``None``."""
        store: SessionStore | None = self.manager.hook.prism_session_store(url=url, create=create)
        return store
