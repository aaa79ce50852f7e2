"""Asking a store for an optional capability: the one function every caller uses.

A capability is a runtime-checkable ``typing.Protocol`` (the store capabilities are listed in
:mod:`prism_core.durable._capabilities`); a store offers it by having its methods.
:func:`capability` answers with the store itself, typed as the capability, or ``None``. It
lives at the bottom of the kernel so the session records below the checkpoints can ask too.

It must not know any particular capability: it checks the one it is handed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

__all__ = ("capability",)

T = TypeVar("T")


# ``protocol`` is typed as a callable, not ``type[T]``: mypy refuses a Protocol class where
# ``type[T]`` is expected (it could not be instantiated), and every capability is one.
def capability(store: object, protocol: Callable[..., T]) -> T | None:
    """``store`` as ``protocol`` when it offers that optional capability, else ``None``.

    ``protocol`` is a runtime-checkable ``Protocol`` class, e.g.
    ``capability(checkpoints, SharedCommitStore)``; the store offers it when it has every
    method the protocol declares. Anything else as ``protocol`` raises ``TypeError``.
    """
    if not (isinstance(protocol, type) and getattr(protocol, "_is_runtime_protocol", False)):
        raise TypeError(f"capability() takes a runtime-checkable Protocol class, got {protocol!r}")
    # A class that has every method answers for all its instances, and ``issubclass`` keeps
    # that answer; ``isinstance`` would list the protocol's members again on every call.
    # Anything else (an instance's own attributes) is asked of ``isinstance`` as before.
    if _methods_only(protocol) and issubclass(store.__class__, protocol):
        return cast(T, store)
    return cast(T, store) if isinstance(store, protocol) else None


@functools.cache
def _methods_only(protocol: type[Any]) -> bool:
    """Whether every member ``protocol`` declares is a method (``issubclass`` takes only
    those protocols)."""
    try:
        issubclass(object, protocol)
    except TypeError:
        return False
    return True
