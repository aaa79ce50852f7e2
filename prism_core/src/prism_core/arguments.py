"""Strict parsing of tool-call arguments as a provider sends them.

Python's ``json`` accepts what JSON does not (``NaN``, ``Infinity``, a number that overflows
to infinity) and what canonical JSON cannot encode (a lone surrogate); it also recurses as
deep as the text nests. Arguments that fail here block only their call, as
``invalid_json_arguments``, instead of failing the run later when they are encoded.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from .codec import dumps

__all__ = ("MAX_TOOL_ARGUMENT_DEPTH", "check_tool_arguments", "parse_tool_arguments")

#: How deep arguments may nest (objects and arrays), as for decision payloads.
MAX_TOOL_ARGUMENT_DEPTH = 64


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("a number overflows to infinity")
    return value


def parse_tool_arguments(text: str) -> dict[str, Any] | None:
    """The JSON object ``text`` holds (``{}`` for blank text), or ``None`` when it is not a
    strict JSON object within :data:`MAX_TOOL_ARGUMENT_DEPTH` that canonical JSON can encode."""
    stripped = text.strip()
    if not stripped:
        return {}
    try:
        value = json.loads(stripped, parse_constant=_refuse_constant, parse_float=_finite_float)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or check_tool_arguments(value) is not None:
        return None
    return value


def check_tool_arguments(value: Any) -> str | None:
    """``None`` when ``value`` is a JSON object canonical JSON can encode, nesting at most
    :data:`MAX_TOOL_ARGUMENT_DEPTH` levels; else why not (without the value)."""
    if not isinstance(value, Mapping):
        return "arguments are not a JSON object"
    if _depth(value) > MAX_TOOL_ARGUMENT_DEPTH:
        return f"arguments nest deeper than {MAX_TOOL_ARGUMENT_DEPTH} levels"
    try:
        dumps(value)
    except (TypeError, ValueError, RecursionError):
        # NaN and infinities, lone surrogates (UnicodeEncodeError), non-JSON objects.
        return "arguments are not canonical JSON"
    return None


def _depth(value: Any) -> int:
    """Nesting depth of containers, without recursion (the value may be hostile)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_TOOL_ARGUMENT_DEPTH:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest
