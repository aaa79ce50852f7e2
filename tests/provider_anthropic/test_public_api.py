"""The public surface of ``prism_provider_anthropic``: ``__all__``, docstrings, discovery."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import prism_provider_anthropic
from prism_core import ModelConfig, create_plugin_manager, discover_plugins


def module_names() -> list[str]:
    """The package and each of its modules."""
    names = [info.name for info in pkgutil.iter_modules(prism_provider_anthropic.__path__)]
    return ["prism_provider_anthropic", *(f"prism_provider_anthropic.{n}" for n in names)]


def test_every_module_declares_a_tuple_all_and_documents_its_names() -> None:
    """Each module has a docstring and a tuple ``__all__``; exported classes and functions,
    and their public methods, have docstrings."""
    for name in module_names():
        module = importlib.import_module(name)
        assert inspect.getdoc(module), name
        assert isinstance(module.__all__, tuple), name
        for exported in module.__all__:
            value = getattr(module, exported)
            if not (inspect.isclass(value) or inspect.isfunction(value)):
                continue
            assert inspect.getdoc(value), f"{name}.{exported}"
            if inspect.isclass(value):
                for member, attribute in vars(value).items():
                    if not member.startswith("_") and callable(attribute):
                        assert inspect.getdoc(attribute), f"{name}.{exported}.{member}"


def test_the_plugin_is_discovered_and_answers_only_for_anthropic() -> None:
    """The entry point exposes ``plugin``; through a plugin manager it answers for
    ``anthropic`` models and leaves every other provider id to other plugins."""
    assert prism_provider_anthropic.plugin in discover_plugins()
    hooks = {n for n in dir(prism_provider_anthropic.plugin) if n.startswith("prism_")}
    assert hooks == {"prism_provider"}
    manager = create_plugin_manager(prism_provider_anthropic.plugin)
    assert manager.hook.prism_provider(model=ModelConfig("mock", "demo")) is None
    provider = manager.hook.prism_provider(model=ModelConfig("anthropic", "claude-sonnet-4-6"))
    assert provider.id == "anthropic"
