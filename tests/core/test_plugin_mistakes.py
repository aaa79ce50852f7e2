"""Plugin mistakes pluggy would accept silently are refused with the fix in the message."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import PluginError, create_agent, create_plugin_manager
from prism_core.hookspecs import hookimpl
from prism_core.models import ModelConfig


class UnmarkedProvider:
    """A provider plugin whose hook method lacks ``@hookimpl``."""

    def prism_provider(self, model: Any) -> Any:
        return None


class MarkedMiddleware:
    """A correct plugin: its hook is marked."""

    @hookimpl
    def prism_middleware(self) -> list[Any]:
        return []


def test_unmarked_hook_method_is_refused_and_names_hookimpl() -> None:
    """A method named ``prism_provider`` without ``@hookimpl`` fails instead of never running."""
    with pytest.raises(PluginError) as info:
        create_plugin_manager(UnmarkedProvider())
    assert info.value.code == "ERR_PRISM_PLUGIN"
    message = str(info.value)
    assert "prism_provider" in message
    assert "UnmarkedProvider" in message
    assert "@hookimpl" in message
    assert "from prism_core.hookspecs import hookimpl" in message


def test_unmarked_hook_on_an_agent_fails_at_creation() -> None:
    """The same mistake surfaces when an agent composes the plugin."""
    with pytest.raises(PluginError, match="@hookimpl"):
        create_agent(model=ModelConfig("mock", "m"), plugins=[UnmarkedProvider()])


def test_plugin_class_instead_of_instance_is_refused() -> None:
    """Passing the class says to pass an instance, spelled out with the class name."""
    with pytest.raises(PluginError) as info:
        create_plugin_manager(MarkedMiddleware)
    assert info.value.code == "ERR_PRISM_PLUGIN"
    assert "is a class" in str(info.value)
    assert "plugins=[MarkedMiddleware()]" in str(info.value)


def test_helpers_that_are_not_hooks_stay_allowed() -> None:
    """Unmarked methods whose names are not hook names, and marked hooks, register fine."""

    class Helpers(MarkedMiddleware):
        prism_label = "not a method"

        def prism_helper(self) -> int:
            return 1

    manager = create_plugin_manager(Helpers())
    assert manager.hook.prism_middleware() == [[]]
