"""Bounded echoes of user values in error messages.

A message that quotes a caller's value must stay short and must never fail: a 5 MB string, a
value nested ten thousand levels deep, or an object whose ``__repr__`` raises would otherwise
turn one refusal into a huge message or into a different, untyped error.
"""

from __future__ import annotations

import reprlib
from typing import Any

__all__ = ("DEFAULT_ECHO_LIMIT", "clip", "echo")

#: How many characters of a value a message quotes by default.
DEFAULT_ECHO_LIMIT = 80

# reprlib stops at a fixed depth and element count, so a deeply nested or enormous container
# is summarised (``[[[...]]]``) instead of being walked to the bottom.
_REPR = reprlib.Repr()
_REPR.maxlevel = 4
_REPR.maxstring = 2 * DEFAULT_ECHO_LIMIT
_REPR.maxother = 2 * DEFAULT_ECHO_LIMIT
_REPR.maxlong = 2 * DEFAULT_ECHO_LIMIT
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = _REPR.maxfrozenset = 20


def echo(value: Any, limit: int = DEFAULT_ECHO_LIMIT) -> str:
    """A ``repr`` of ``value`` of at most ``limit`` characters (cut with ``…``); never raises.

    An object whose ``repr`` fails is shown as ``<TypeName object>``.
    """
    try:
        text = _REPR.repr(value)
    except Exception:  # a hostile __repr__ may raise anything
        text = f"<{_type_name(value)} object>"
    return clip(text, limit)


def clip(text: str, limit: int = DEFAULT_ECHO_LIMIT) -> str:
    """``text`` itself when it has at most ``limit`` characters, else cut with ``…``."""
    if len(text) > limit:
        return text[: max(limit - 1, 0)] + "…"
    return text


def _type_name(value: Any) -> str:
    try:
        return str(type(value).__name__)
    except Exception:  # a metaclass may misbehave too
        return "unknown"
