"""Request bodies: declared JSON, read no further than a bound, parsed to one unambiguous object.

``json`` keeps the last of a repeated key, so ``{"approved": false, "approved": true}`` would
read as an approval to one reader and a refusal to another: a key repeated in any object, at
any depth, is refused. So are nesting deeper than :data:`MAX_JSON_DEPTH`, ``NaN`` and the
infinities (not JSON), and text that is not UTF-8. The body is read as it streams and the read
stops at the first byte past the bound: a larger body is never buffered.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from ._errors import BadRequest, PayloadTooLarge, UnsupportedMediaType

__all__ = (
    "DEFAULT_MAX_BODY_BYTES",
    "JSON_MEDIA_TYPE",
    "MAX_JSON_DEPTH",
    "check_max_body_bytes",
    "parse_json_object",
    "read_bounded",
    "read_json_object",
    "require_json",
)

#: The largest body every face reads unless its factory is given ``max_body_bytes``.
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
#: The deepest nesting of objects and arrays a body may have (the kernel bounds the values it
#: takes again, more tightly).
MAX_JSON_DEPTH = 100
JSON_MEDIA_TYPE = "application/json"


def check_max_body_bytes(value: Any) -> int:
    """``value`` as a body bound: a positive integer (``ValueError`` otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError("max_body_bytes must be a positive integer")
    return value


def require_json(request: Request) -> None:
    """:class:`UnsupportedMediaType` unless the body is declared ``application/json``."""
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != JSON_MEDIA_TYPE:
        raise UnsupportedMediaType(
            f"the body must be sent as Content-Type: {JSON_MEDIA_TYPE}"
            + (f", got {media_type[:60]!r}" if media_type else "")
        )


async def read_bounded(request: Request, limit: int) -> bytes:
    """The body, or :class:`PayloadTooLarge` when its declared length passes ``limit`` bytes
    (nothing is read) or as soon as the bytes read do (nothing more is read)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the body is larger than {limit} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise PayloadTooLarge(f"the body is larger than {limit} bytes")
    return bytes(body)


class _Refused(Exception):
    def __init__(self, problem: str) -> None:
        self.problem = problem


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            shown = key if len(key) <= 80 else f"{key[:80]}…"
            raise _Refused(f"the body repeats the key {shown!r}")
        found[key] = value
    return found


def _no_constant(name: str) -> Any:
    raise _Refused(f"the body holds {name}, which is not JSON")


def _depth(value: Any) -> int:
    """The nesting depth of parsed JSON (1 for an empty object), walked without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_JSON_DEPTH:
            return deepest
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest


def parse_json_object(body: bytes) -> dict[str, Any]:
    """``body`` as one JSON object, or :class:`BadRequest` (see the module)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("the body must be UTF-8 JSON") from None
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except _Refused as refused:
        raise BadRequest(refused.problem) from None
    except RecursionError:
        raise BadRequest(f"the body nests deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError:
        raise BadRequest("the body must be a JSON object") from None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    if _depth(data) > MAX_JSON_DEPTH:
        raise BadRequest(f"the body nests deeper than {MAX_JSON_DEPTH} levels")
    return data


async def read_json_object(request: Request, max_bytes: int) -> dict[str, Any]:
    """The request's body as one JSON object: :class:`UnsupportedMediaType` (415) unless it is
    declared JSON, :class:`PayloadTooLarge` (413) past ``max_bytes``, :class:`BadRequest`
    (400) for anything but one unambiguous object."""
    require_json(request)
    return parse_json_object(await read_bounded(request, max_bytes))
