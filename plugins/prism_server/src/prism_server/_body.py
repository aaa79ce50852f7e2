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


async def read_json_object(request: Request, limit: int) -> dict[str, Any]:
    """The body as a JSON object (:class:`BadRequest` otherwise)."""
    body = await read_bounded(request, limit)
    try:
        data = json.loads(body)
    except ValueError:
        raise BadRequest("the body must be a JSON object") from None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    return data
