"""MCP to Prism: a listed tool becomes a ``ToolDefinition``, a call's answer a tool result.

Only text and JSON reach the model. Images, audio and resources are dropped wherever they
are: as content blocks, and inside ``structuredContent`` (an object shaped like a media
block, one carrying base64 ``data`` or a ``blob`` with a media type, a ``data:`` URI), each
replaced by a short placeholder naming what was left out, and named in a ``WARNING``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import mcp.types as types

from prism_core import ErrorInfo, ToolDefinition, ToolExecutionContext, ToolResult

from ._connection import Connection
from ._errors import MCPResultTooLargeError

__all__ = ("MCP_TOOL_ERROR", "strip_media", "tool_definition", "tool_result")

logger = logging.getLogger("prism_mcp")

#: The ``ErrorInfo.code`` of the result of a call the server answered with ``isError: true``.
MCP_TOOL_ERROR = "mcp_tool_error"
_MEDIA_TYPES = frozenset({"image", "audio", "resource", "resource_link", "blob"})
_MIME_KEYS = ("mimeType", "mime_type", "mediaType", "media_type")
_MAX_DEPTH = 64


def tool_definition(connection: Connection, tool: types.Tool, name: str) -> ToolDefinition:
    """``tool`` of ``connection`` as a Prism tool called ``name``: its description, its
    ``inputSchema`` as ``parameters``; ``readOnlyHint`` makes it read-only (``effect="read"``)
    and ``idempotentHint`` idempotent; a tool with neither is a side effect."""
    hints = tool.annotations
    read_only = hints is not None and hints.read_only_hint is True
    idempotent = hints is not None and hints.idempotent_hint is True

    async def execute(args: dict[str, Any], context: ToolExecutionContext) -> Any:
        try:
            result = await connection.call(tool.name, args, context)
        except MCPResultTooLargeError as exc:
            error = ErrorInfo(exc.message, code=exc.code)
            return ToolResult(context.tool_call_id, context.tool_name, error=error)
        return tool_result(result, context)

    return ToolDefinition(
        name,
        execute,
        description=tool.description,
        parameters=tool.input_schema,
        effect="read" if read_only else None,
        idempotent=idempotent,
    )


def tool_result(result: types.CallToolResult, context: ToolExecutionContext) -> Any:
    """The tool's ``structuredContent`` (media left out) when it has one, else its text blocks
    joined by ``"\\n"``; ``isError: true`` is an error result carrying that text."""
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    left_out: set[str] = {block.type for block in result.content if block.type != "text"}
    structured = result.structured_content
    if structured is not None:
        structured, found = strip_media(structured)
        left_out |= found
    if left_out:
        # Only text and JSON reach the model; say what it does not see rather than drop it
        # unseen.
        logger.warning(
            "MCP tool %s (call %s) returned %s content; it is not passed on",
            context.tool_name,
            context.tool_call_id,
            ", ".join(sorted(left_out)),
        )
    text = "\n".join(texts)
    if result.is_error:
        message = text or f"the MCP tool {context.tool_name!r} reported an error"
        error = ErrorInfo(message, code=MCP_TOOL_ERROR)
        return ToolResult(context.tool_call_id, context.tool_name, error=error)
    if structured is not None:
        return structured
    return text


def strip_media(value: Any, depth: int = 0) -> tuple[Any, set[str]]:
    """``value`` with every media object or ``data:`` URI replaced by
    ``"[<kind> omitted]"``, and the kinds it replaced."""
    if depth > _MAX_DEPTH:
        return "[nested too deep: omitted]", {"deep nesting"}
    if isinstance(value, str):
        if value[:5].lower() == "data:":
            return "[data URI omitted]", {"data URI"}
        return value, set()
    if isinstance(value, Mapping):
        kind = _media_kind(value)
        if kind is not None:
            return f"[{kind} omitted]", {kind}
        found: set[str] = set()
        clean: dict[str, Any] = {}
        for key, item in value.items():
            clean[key], inner = strip_media(item, depth + 1)
            found |= inner
        return clean, found
    if isinstance(value, list):
        items: list[Any] = []
        found = set()
        for item in value:
            kept, inner = strip_media(item, depth + 1)
            items.append(kept)
            found |= inner
        return items, found
    return value, set()


def _media_kind(value: Mapping[str, Any]) -> str | None:
    """What media ``value`` is (a content block or base64 payload), or ``None``."""
    kind = value.get("type")
    if isinstance(kind, str) and kind in _MEDIA_TYPES:
        return kind
    has_mime = any(key in value for key in _MIME_KEYS)
    if has_mime and ("data" in value or "blob" in value):
        return "binary"
    if "blob" in value or ("uri" in value and has_mime):
        return "resource"
    return None
