"""Checks of a stored run state's shape: its containers have the JSON types its schema asks
for, before cattrs sees them; and structuring did not coerce anything.

It must not structure or store a state: :mod:`._state` parses, this module only checks.
"""

from __future__ import annotations

import collections.abc
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeAlias

import attrs

from .._echo import echo
from ..errors import AgentRunStateError
from ._state_codec import field_types

__all__ = ("Path", "check_same", "check_shape", "malformed")

_SEQUENCES = (tuple, list, collections.abc.Sequence)
_MAPPINGS = (dict, collections.abc.Mapping)


def malformed(detail: str) -> AgentRunStateError:
    """The error for a stored state that does not parse ("Malformed agent run state: …")."""
    return AgentRunStateError(f"Malformed agent run state: {detail}")


#: Where a value sits in a state: the root's name, or ``(parent, key)`` with a field name or a
#: list index as ``key``. Spelled out only for an error message.
Path: TypeAlias = "str | tuple[Path, str | int]"


def _text(path: Path) -> str:
    parts: list[str] = []
    while isinstance(path, tuple):
        path, key = path
        parts.append(f"[{key}]" if isinstance(key, int) else f".{key}")
    parts.append(path)
    return "".join(reversed(parts))


# What ``_shape`` checks for a field type, worked out once per type: ``("skip",)``,
# ``("one", kind)`` (an optional of one type), ``("object",)`` (a union of records: an object
# of any of them), ``("list", item kind or None)``, ``("dict",)`` or ``("record", ((name,
# kind), ...))``.
_ShapePlan: TypeAlias = tuple[Any, ...]


@functools.cache
def _shape_plan(kind: Any) -> _ShapePlan:
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = [arg for arg in typing.get_args(kind) if arg is not type(None)]
        if len(options) == 1:
            return ("one", options[0])
        if options and all(attrs.has(arg) for arg in options):
            return ("object",)
        return ("skip",)
    if origin in _SEQUENCES:
        args = typing.get_args(kind)
        return ("list", args[0] if args else None)
    if origin in _MAPPINGS:
        return ("dict",)
    if isinstance(kind, type) and attrs.has(kind):
        hints = field_types(kind)
        return ("record", tuple((field.name, hints[field.name]) for field in attrs.fields(kind)))
    return ("skip",)


def check_shape(raw: Any, kind: Any, path: Path) -> None:
    """Check that every container in ``raw`` has the JSON type ``kind`` asks for (a list for a
    tuple, an object for a mapping or a record), before cattrs sees it: cattrs would iterate a
    string where a list belongs and fail once per character."""
    if raw is None:
        return
    plan = _shape_plan(kind)
    tag = plan[0]
    if tag == "skip":
        return
    if tag == "one":
        check_shape(raw, plan[1], path)
    elif tag == "list":
        if not isinstance(raw, list):
            raise malformed(f"{_text(path)} must be a list, got {type(raw).__name__}")
        item = plan[1]
        if item is not None:
            for index, value in enumerate(raw):
                check_shape(value, item, (path, index))
    elif not isinstance(raw, dict):  # "object", "dict" and "record"
        raise malformed(f"{_text(path)} must be an object, got {type(raw).__name__}")
    elif tag == "record":
        for name, hint in plan[1]:
            if name in raw:
                check_shape(raw[name], hint, (path, name))


def check_same(raw: Any, built: Any, path: Path) -> None:
    """Refuse any value cattrs had to coerce: structuring and unstructuring again must give
    back exactly what was stored (a string stays a string, never a list of its characters;
    an integer is never a bool or a float)."""
    if isinstance(raw, dict):
        if not isinstance(built, Mapping):
            raise malformed(f"{_text(path)} must not be an object")
        for name, item in raw.items():
            if name in built:
                check_same(item, built[name], (path, name))
        return
    if isinstance(raw, list):
        if not isinstance(built, list | tuple) or len(built) != len(raw):
            raise malformed(f"{_text(path)} must not be a list")
        for index, item in enumerate(raw):
            check_same(item, built[index], (path, index))
        return
    if type(raw) is type(built) and raw == built:
        return
    # JSON has one number type: an integer stored for a float field is the same number.
    if type(raw) is int and type(built) is float and raw == built:
        return
    raise malformed(f"{_text(path)} has the wrong type: {echo(raw)}")
