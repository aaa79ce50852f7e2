"""Request bodies read no further than a bound (the transport's limit, not the core's)."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from ._errors import BadRequest, PayloadTooLarge

__all__ = ("read_bounded", "read_json_object")


async def read_bounded(request: Request, limit: int) -> bytes:
    """The body, or :class:`PayloadTooLarge` as soon as it passes ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the body is larger than {limit} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise PayloadTooLarge(f"the body is larger than {limit} bytes")
    return bytes(body)


class _RepeatedKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are all different (``json`` keeps the last of a repeated key,
    which would let two readers of one body see two different decisions)."""
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _RepeatedKey(key)
        found[key] = value
    return found


async def read_json_object(request: Request, limit: int) -> dict[str, Any]:
    """The body as a JSON object (:class:`BadRequest` otherwise, and for an object, at any
    depth, that repeats a key)."""
    body = await read_bounded(request, limit)
    try:
        data = json.loads(body, object_pairs_hook=_unique_keys)
    except _RepeatedKey as repeated:
        key = repeated.key if len(repeated.key) <= 80 else f"{repeated.key[:80]}…"
        raise BadRequest(f"the body repeats the key {key!r}") from None
    except ValueError:
        raise BadRequest("the body must be a JSON object") from None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    return data
