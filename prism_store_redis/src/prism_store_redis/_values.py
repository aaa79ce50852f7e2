"""Canonical JSON of a checkpoint value in one pass, for values that are plain JSON data.

``validate_save`` encodes through the kernel's converter, which walks every node of the
value to unstructure attrs objects; for a value that is already nothing but ``dict`` (string
keys), ``list``, ``str``, ``int``, ``float``, ``bool`` and ``None``, that walk changes nothing,
so the same canonical bytes come straight from ``json``. The walk here also yields the
independent copy a saved record returns, which spares parsing the JSON back.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ("plain_json",)

_SCALARS = frozenset({str, int, float, bool, type(None)})

# The settings of ``prism_core.codec.dumps``: sorted keys, no whitespace, UTF-8, no NaN.
_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


class _NotPlain(Exception):
    pass


def _copy(value: Any) -> Any:
    # Scalars are copied inline: most nodes are leaves, and a call per leaf would double the
    # cost of the walk.
    kind = type(value)
    if kind is dict:
        out = {}
        for name, item in value.items():
            if type(name) is not str:
                raise _NotPlain
            out[name] = item if type(item) in _SCALARS else _copy(item)
        return out
    if kind is list:
        return [item if type(item) in _SCALARS else _copy(item) for item in value]
    if kind in _SCALARS:
        return value
    raise _NotPlain


def plain_json(value: Any) -> tuple[bytes, Any] | None:
    """``(canonical JSON, an independent copy)`` of a plain JSON value, else ``None``.

    ``None`` means "take the kernel's path": anything else (attrs objects, tuples, subclasses,
    non-string keys, cycles, NaN) is left to ``validate_save``, which encodes it or raises
    exactly as in every other store.
    """
    try:
        copy = _copy(value)
        return _ENCODER.encode(copy).encode("utf-8"), copy
    except (_NotPlain, ValueError, RecursionError):
        return None
