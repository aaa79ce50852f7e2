"""The public surface: tuple ``__all__`` everywhere and a docstring on every public name."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import prism_store_sql


def test_every_module_declares_a_tuple_all() -> None:
    """Each module of the package has a tuple ``__all__`` naming attributes that exist."""
    names = [info.name for info in pkgutil.iter_modules(prism_store_sql.__path__)]
    for name in ["prism_store_sql", *(f"prism_store_sql.{n}" for n in names)]:
        module = importlib.import_module(name)
        assert isinstance(module.__all__, tuple), name
        for attribute in module.__all__:
            assert hasattr(module, attribute), f"{name}.{attribute}"


def test_every_public_name_is_documented() -> None:
    """Every exported class and function, and their public methods, have docstrings."""
    assert inspect.getdoc(prism_store_sql)
    for name in prism_store_sql.__all__:
        value = getattr(prism_store_sql, name)
        if not (inspect.isclass(value) or inspect.isfunction(value)):
            continue
        assert inspect.getdoc(value), name
        if inspect.isclass(value):
            for member, attribute in vars(value).items():
                if member.startswith("_") or not callable(attribute):
                    continue
                assert inspect.getdoc(attribute), f"{name}.{member}"
