"""The kernel's private cattrs converter and canonical JSON.

Canonical JSON (sorted keys, no whitespace, UTF-8) is the one form every byte cap,
hash and fingerprint is measured on.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

import attrs
import cattrs

__all__ = ("dumps", "json_size_bound", "loads", "structure", "unstructure")

T = TypeVar("T")

_converter = cattrs.Converter(omit_if_default=False)


def unstructure(value: Any) -> Any:
    """Turn attrs values (messages, events, results, records) into JSON-compatible data."""
    return _converter.unstructure(value)


def structure(data: Any, cls: type[T]) -> T:
    """Turn JSON-compatible data back into ``cls``."""
    return _converter.structure(data, cls)


def dumps(value: Any) -> bytes:
    """Canonical JSON bytes of ``value`` (attrs values are unstructured first).

    Raises ``ValueError`` for values JSON cannot carry (NaN, cycles, unknown objects).
    """
    return json.dumps(
        _converter.unstructure(value),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    ).encode("utf-8")


def json_size_bound(value: Any) -> int:
    """An upper bound of ``len(dumps(value))`` that costs far less than encoding.

    Text counts six bytes a character (the widest JSON form of one character is a six-byte
    ``\\uXXXX`` escape; UTF-8 needs at most four), attrs values count their fields, and other
    values count six bytes per character of their ``repr``, which is never shorter per value
    than their JSON. Each field and container adds a fixed allowance for keys and punctuation.
    """
    if isinstance(value, str):
        return 6 * len(value) + 2
    if value is None or isinstance(value, bool | int | float):
        return 6 * len(repr(value)) + 2
    if attrs.has(type(value)):
        total = 2
        for field in attrs.fields(type(value)):
            total += 6 * len(field.name) + 4 + json_size_bound(getattr(value, field.name))
        return total
    if isinstance(value, tuple | list):
        return 2 + sum(json_size_bound(item) + 1 for item in value)
    return 6 * len(repr(value)) + 16


def loads(data: bytes | str) -> Any:
    """Parse JSON produced by :func:`dumps` (or any JSON text)."""
    return json.loads(data)


def converter() -> cattrs.Converter:
    """The kernel's converter, for kernel modules that register hooks on it."""
    return _converter
