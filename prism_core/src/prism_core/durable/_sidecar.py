"""Reading a checkpoint record's sidecar metadata map, tolerantly.

A sidecar that cannot be used never blocks a resume or a status read: a record without one,
a legacy value that is not a map, and an empty map read as absent (``None``); a key whose value
is not a string (or whose text is not valid UTF-8) is dropped alone, the rest kept; a map over
``MAX_AGENT_RUN_METADATA_BYTES`` of canonical JSON reads as absent. Writes are strict (see
``_writer``). It must not write or raise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..codec import dumps
from ..errors import CanonicalJsonError
from ._options import MAX_AGENT_RUN_METADATA_BYTES, is_utf8

__all__ = ("read_sidecar",)


def read_sidecar(record: Any) -> dict[str, str] | None:
    """``record.metadata`` as a map of strings, or ``None`` when absent or unusable."""
    value = getattr(record, "metadata", None)
    if not isinstance(value, Mapping):
        return None
    try:
        items = list(value.items())
    except Exception:  # a stored map whose iteration fails is unusable, not fatal
        return None
    kept: dict[str, str] = {}
    for key, item in items:
        if isinstance(key, str) and isinstance(item, str) and is_utf8(key) and is_utf8(item):
            kept[str.__str__(key)] = str.__str__(item)
    if not kept:
        return None
    try:
        size = len(dumps(kept))
    except CanonicalJsonError:
        return None
    return kept if size <= MAX_AGENT_RUN_METADATA_BYTES else None
