"""Serving the agent card: the A2A 1.0 card to a 1.0 client, the SDK's compatible card to others.

A client says which protocol it speaks with the ``A2A-Version`` header (or query parameter),
and A2A reads an absent one as 0.3. A request naming 1.0 (or any later version) gets the card
exactly as A2A 1.0 defines it, nothing added, so it validates against the 1.0 ``AgentCard``
schema. Any other request gets what the a2a-sdk serves: the same card plus the 0.3 fields
(``url``, ``preferredTransport``, ``protocolVersion``) a 0.3 client needs to find the
endpoint, which the 1.0 schema does not allow.

Both answers carry ``Cache-Control: public, max-age=CARD_MAX_AGE_S`` (the card changes when the
agent's revision does, which is a deploy), ``Vary: A2A-Version`` (a cache keeps the two cards
apart) and a weak ``ETag``; a matching ``If-None-Match`` is answered ``304``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types import AgentCard
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, VERSION_HEADER
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

__all__ = ("CARD_MAX_AGE_S", "card_routes", "speaks_1_0")

#: How long a client or a cache may keep the card without asking again (seconds).
CARD_MAX_AGE_S = 300


def speaks_1_0(version: str | None) -> bool:
    """Whether a request's ``A2A-Version`` names 1.0 or later (absent or empty: 0.3)."""
    if not version:
        return False
    major = version.strip().split(".", 1)[0]
    return major.isdigit() and int(major) >= 1


def _etag(card: dict[str, Any]) -> str:
    body = json.dumps(card, sort_keys=True, separators=(",", ":"))
    return f'W/"{hashlib.sha256(body.encode("utf-8")).hexdigest()}"'


def _matches(header: str, etag: str) -> bool:
    tags = [tag.strip().removeprefix("W/") for tag in header.split(",")]
    return "*" in tags or etag.removeprefix("W/") in tags


def card_routes(card: AgentCard) -> list[Route]:
    """The route that serves ``card`` at ``/.well-known/agent-card.json`` (see the module)."""
    by_version = {True: MessageToDict(card), False: agent_card_to_dict(card)}
    etags = {speaks: _etag(body) for speaks, body in by_version.items()}

    async def serve(request: Request) -> Response:
        version = request.headers.get(VERSION_HEADER) or request.query_params.get(VERSION_HEADER)
        speaks = speaks_1_0(version)
        headers = {
            "ETag": etags[speaks],
            "Cache-Control": f"public, max-age={CARD_MAX_AGE_S}",
            "Vary": VERSION_HEADER,
        }
        cached = request.headers.get("if-none-match")
        if cached and _matches(cached, etags[speaks]):
            return Response(status_code=304, headers=headers)
        return JSONResponse(by_version[speaks], headers=headers)

    return [Route(AGENT_CARD_WELL_KNOWN_PATH, endpoint=serve, methods=["GET"])]
