"""The plugin kernel: hookspecs, managers, discovery, and the public surface."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import Any

import pytest

import prism_core
from prism_core import PluginError, create_agent, create_plugin_manager, discover_plugins, hookspecs
from prism_core.hookspecs import hookimpl
from prism_core.plugins import PluginHost

from .helpers import MODEL

HOOKS = [
    "prism_checkpoint_store",
    "prism_session_store",
    "prism_provider",
    "prism_guardrail_packs",
    "prism_loop_strategies",
    "prism_restore_hooks",
    "prism_middleware",
    "prism_notifiers",
]


def test_every_hook_family_is_declared_and_documented() -> None:
    """Each hook's docstring says when it is called, what it receives and what None means."""
    for name in HOOKS:
        spec = getattr(hookspecs, name)
        doc = inspect.getdoc(spec) or ""
        assert "Called" in doc, name
        assert "None" in doc, name
        assert "Return" in doc, name


def test_managers_are_fresh_per_call() -> None:
    """Two managers never share registrations."""

    class Plugin:
        @hookimpl
        def prism_middleware(self) -> list[Any]:
            return [{}]

    first = create_plugin_manager(Plugin())
    second = create_plugin_manager()
    assert first is not second
    assert len(first.get_plugins()) == 1
    assert second.get_plugins() == set()


def test_async_hookimpl_is_rejected_with_a_clear_error() -> None:
    """An ``async def`` hookimpl fails at registration and says how to fix it."""

    class AsyncPlugin:
        @hookimpl
        async def prism_provider(self, model: Any) -> Any:
            return None

    with pytest.raises(PluginError, match="synchronous factories") as info:
        create_plugin_manager(AsyncPlugin())
    assert info.value.code == "ERR_PRISM_PLUGIN"


def test_unknown_prism_hook_is_rejected() -> None:
    """A misspelt hook name fails instead of being silently ignored."""

    class Typo:
        @hookimpl
        def prism_providr(self, model: Any) -> Any:
            return None

    with pytest.raises(PluginError, match="unknown Prism hook"):
        create_plugin_manager(Typo())


def test_discover_plugins_lists_installed_entry_points_without_registering() -> None:
    """Discovery returns plugin objects (the workspace installs several) and registers nothing."""
    found = discover_plugins()
    import prism_packs
    import prism_store_redis
    import prism_store_sql

    assert prism_store_sql.plugin in found
    assert prism_store_redis.plugin in found
    assert prism_packs.plugin in found
    assert discover_plugins(group="prism-no-such-group") == []


def test_two_agents_in_one_process_do_not_share_plugins() -> None:
    """Plugins passed to one agent are invisible to another."""
    seen: list[str] = []

    class Loud:
        @hookimpl
        def prism_middleware(self) -> list[Any]:
            seen.append("called")
            return [{"session_start": lambda ctx: None}]

    a = create_agent(model=MODEL, plugins=[Loud()])
    b = create_agent(model=MODEL)
    assert len(a.middleware) == 1
    assert len(b.middleware) == 0
    assert a.plugin_host.manager is not b.plugin_host.manager
    assert b.plugin_host.manager.get_plugins() == set()


def test_firstresult_hooks_follow_the_hosts_order() -> None:
    """The first plugin in the host's list answers a firstresult hook first."""

    class A:
        @hookimpl
        def prism_provider(self, model: Any) -> Any:
            return "a"

    class B:
        @hookimpl
        def prism_provider(self, model: Any) -> Any:
            return "b"

    assert PluginHost([A(), B()]).provider(None) == "a"
    assert PluginHost([B(), A()]).provider(None) == "b"


def test_collection_hooks_keep_registration_order() -> None:
    """Sequence hooks are flattened in the order plugins were given."""

    class One:
        @hookimpl
        def prism_middleware(self) -> list[Any]:
            return [{"name": 1}]

    class Two:
        @hookimpl
        def prism_middleware(self) -> list[Any]:
            return [{"name": 2}]

    assert [m["name"] for m in PluginHost([One(), Two()]).middleware()] == [1, 2]


def test_every_public_module_lists_its_names_in_all() -> None:
    """Each public module has a tuple ``__all__`` whose names exist."""
    modules = [prism_core]
    for info in pkgutil.walk_packages(prism_core.__path__, "prism_core."):
        leaf = info.name.rsplit(".", 1)[-1]
        if leaf.startswith("_") or ".testing" in info.name:
            continue
        modules.append(importlib.import_module(info.name))
    for module in modules:
        names = getattr(module, "__all__", None)
        assert isinstance(names, tuple), module.__name__
        for name in names:
            assert hasattr(module, name), f"{module.__name__}.{name}"


def test_public_names_have_docstrings() -> None:
    """Every public class and function exported from the package root has a docstring."""
    for name in prism_core.__all__:
        value = getattr(prism_core, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), name


def test_core_depends_on_six_libraries_only() -> None:
    """prism-runtime-core declares pluggy, attrs, cattrs, anyio, jsonschema and regex (a
    schema's ``pattern`` is matched with a timeout, so no tool argument can hold the event
    loop) and nothing else."""
    from importlib.metadata import requires

    deps = {
        r.split(">")[0].split("=")[0].split("[")[0].strip().lower()
        for r in requires("prism-runtime-core") or []
    }
    assert deps == {"pluggy", "attrs", "cattrs", "anyio", "jsonschema", "regex"}
