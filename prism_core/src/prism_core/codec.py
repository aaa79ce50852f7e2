"""The kernel's private cattrs converter and canonical JSON.

Canonical JSON (sorted keys, no whitespace, UTF-8) is the one form every byte cap,
hash and fingerprint is measured on.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

import attrs
import cattrs

from ._echo import clip
from ._error_base import CanonicalJsonError

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

    Raises :class:`~prism_core.errors.CanonicalJsonError` (a ``ValueError`` and a
    ``TypeError``) for values JSON cannot carry: NaN, cycles, nesting too deep, lone
    surrogates, unknown objects.
    """
    try:
        return json.dumps(
            value,
            default=_unstructure_for_json,
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
        ).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CanonicalJsonError(
            "value has no canonical JSON form: a string holds a lone surrogate (not UTF-8)"
        ) from exc
    except (TypeError, ValueError, RecursionError) as exc:
        if isinstance(exc, CanonicalJsonError):
            raise
        raise CanonicalJsonError(f"value has no canonical JSON form: {_reason(exc)}") from exc


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply to encode"
    return clip(str(exc), 200) or type(exc).__name__


def _unstructure_for_json(value: Any) -> Any:
    # Called only for what json cannot encode itself, so plain JSON data (a run state, a
    # metadata map) is encoded without a cattrs pass.
    if attrs.has(type(value)):
        return _converter.unstructure(value)
    raise CanonicalJsonError(f"an object of type {type(value).__name__} is not JSON data")


def json_size_bound(value: Any) -> int:
    """An upper bound of ``len(dumps(value))`` that costs far less than encoding it.

    One character of a ``repr`` never becomes more than six bytes of JSON (the widest form is
    a ``\\uXXXX`` escape; UTF-8 needs at most four bytes), and a ``repr`` spells out every
    field name, key and value that the JSON form holds.
    """
    return 6 * len(repr(value)) + 16


def loads(data: bytes | str) -> Any:
    """Parse JSON produced by :func:`dumps` (or any JSON text)."""
    return json.loads(data)


def converter() -> cattrs.Converter:
    """The kernel's converter, for kernel modules that register hooks on it."""
    return _converter
