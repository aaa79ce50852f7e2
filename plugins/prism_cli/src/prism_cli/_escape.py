"""Printing stored text on a terminal: every control character escaped.

Whatever a run stored (a reason, an actor, a tool's arguments or result) was written by
someone else and may hold a newline, a carriage return, an escape sequence or a bidirectional
override that would forge a line or recolour the terminal. :func:`shown` prints such text
with each of those characters as a visible escape (``\\n``, ``\\x1b``, ``\\u202e``) and a
backslash doubled (so an escape printed cannot be mistaken for text that was stored that way),
:func:`shown_json` does the same to compact JSON, and :func:`printable` escapes a line built
from stored strings (its backslashes left as they are).
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

__all__ = ("printable", "shown", "shown_json")

# Unicode categories printed escaped: controls (Cc), format characters such as the
# bidirectional overrides (Cf), line and paragraph separators (Zl, Zp), unassigned (Cn).
_ESCAPED = frozenset({"Cc", "Cf", "Zl", "Zp", "Cn", "Cs", "Co"})
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def _escape(char: str) -> str:
    named = _NAMED.get(char)
    if named is not None:
        return named
    if unicodedata.category(char) not in _ESCAPED:
        return char
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(text: str) -> str:
    """``text`` with every character that could forge or hide a line escaped:
    ``"ok\\nforged"`` prints as ``ok\\nforged`` on one line."""
    if text.isprintable():
        return text
    return "".join(
        char if char == "\\" or unicodedata.category(char) not in _ESCAPED else _escape(char)
        for char in text
    )


def shown(value: Any) -> str:
    """``value`` as text (``-`` for ``None``) with every control character escaped."""
    if value is None:
        return "-"
    text = value if isinstance(value, str) else str(value)
    if text.isascii() and text.isprintable() and "\\" not in text:
        return text
    return "".join(_escape(char) for char in text)


def shown_json(value: Any) -> str:
    """``value`` as compact JSON, with every control character in it escaped."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(", ", ": "))
    # JSON escapes C0 controls itself; the others (C1, bidi, separators) are escaped here.
    return "".join(
        char if unicodedata.category(char) not in _ESCAPED else _escape(char) for char in text
    )
