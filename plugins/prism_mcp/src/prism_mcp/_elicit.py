"""A server's elicitation request, answered by the host's ``elicitation_handler``.

The handler (sync or async) gets the request's message and requested schema and returns the
answer's content (a mapping) or ``None`` to decline. A sync handler runs in a worker thread so
it may block (a prompt, a queue) without holding the event loop. A URL-mode request (the
server asks the user to open a page) is declined: Prism shows no page to anyone.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeAlias

import anyio.to_thread
import mcp.types as types
from mcp.client.session import ClientRequestContext, ElicitationFnT

from ._errors import MCPConfigError

__all__ = ("ElicitationHandler", "elicitation_callback")

logger = logging.getLogger("prism_mcp")

#: ``handler(message, requested_schema)`` → the content to send, or ``None`` to decline.
ElicitationHandler: TypeAlias = Callable[
    [str, Mapping[str, Any]], "Mapping[str, Any] | Awaitable[Mapping[str, Any] | None] | None"
]


def elicitation_callback(handler: Any, describe: str) -> ElicitationFnT | None:
    """The SDK callback answering elicitation with ``handler``; ``None`` without a handler
    (the SDK then declares no elicitation capability)."""
    if handler is None:
        return None
    if not callable(handler):
        raise MCPConfigError(f"elicitation_handler must be callable, got {handler!r}")

    async def answer(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        if not isinstance(params, types.ElicitRequestFormParams):
            logger.warning("%s asked the user to open a URL; declined", describe)
            return types.ElicitResult(action="decline")
        schema = dict(params.requested_schema)
        try:
            if inspect.iscoroutinefunction(handler):
                content = await handler(params.message, schema)
            else:
                content = await anyio.to_thread.run_sync(handler, params.message, schema)
                if inspect.isawaitable(content):
                    content = await content
        except Exception as exc:
            # The handler's own failure: the server is told the request failed, the
            # connection and the call go on.
            logger.warning("%s: the elicitation handler raised %s", describe, type(exc).__name__)
            return types.ErrorData(code=types.INTERNAL_ERROR, message="the client could not answer")
        if content is None:
            return types.ElicitResult(action="decline")
        if not isinstance(content, Mapping):
            logger.warning(
                "%s: the elicitation handler returned %s, not a mapping; declined",
                describe,
                type(content).__name__,
            )
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content=dict(content))

    return answer
