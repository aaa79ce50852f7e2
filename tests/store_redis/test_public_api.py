"""The public surface: tuple ``__all__`` everywhere and a docstring on every public name."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import prism_store_redis


def module_names() -> list[str]:
    """The package and each of its modules."""
    names = [info.name for info in pkgutil.iter_modules(prism_store_redis.__path__)]
    return ["prism_store_redis", *(f"prism_store_redis.{name}" for name in names)]


def test_every_module_declares_a_tuple_all() -> None:
    """Each module has a tuple ``__all__`` naming attributes that exist."""
    for name in module_names():
        module = importlib.import_module(name)
        assert inspect.getdoc(module), name
        assert isinstance(module.__all__, tuple), name
        for attribute in module.__all__:
            assert hasattr(module, attribute), f"{name}.{attribute}"


def test_every_public_name_is_documented() -> None:
    """Every exported class and function, and their public methods, have docstrings."""
    for name in module_names():
        module = importlib.import_module(name)
        for exported in module.__all__:
            value = getattr(module, exported)
            if not (inspect.isclass(value) or inspect.isfunction(value)):
                continue
            assert inspect.getdoc(value), f"{name}.{exported}"
            if inspect.isclass(value):
                for member, attribute in vars(value).items():
                    if member.startswith("_") or not (
                        callable(attribute) or isinstance(attribute, property)
                    ):
                        continue
                    assert inspect.getdoc(attribute), f"{name}.{exported}.{member}"


def test_the_plugin_module_only_wires_hooks() -> None:
    """``plugin`` answers exactly the three store hooks and declares its schemes."""
    hooks = {name for name in dir(prism_store_redis.plugin) if name.startswith("prism_")}
    assert hooks == {"prism_checkpoint_store", "prism_open_stores", "prism_session_store"}
    assert prism_store_redis.plugin.store_schemes == ("redis", "rediss")
