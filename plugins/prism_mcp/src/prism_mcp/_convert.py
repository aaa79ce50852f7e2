"""MCP to Prism: a listed tool becomes a ``ToolDefinition``, a call's answer a tool result."""

from __future__ import annotations

import logging
from typing import Any

import mcp.types as types

from prism_core import ErrorInfo, ToolDefinition, ToolExecutionContext, ToolResult

from ._connection import Connection

__all__ = ("MCP_TOOL_ERROR", "tool_definition", "tool_result")

logger = logging.getLogger("prism_mcp")

#: The ``ErrorInfo.code`` of the result of a call the server answered with ``isError: true``.
MCP_TOOL_ERROR = "mcp_tool_error"


def tool_definition(connection: Connection, tool: types.Tool, name: str) -> ToolDefinition:
    """``tool`` of ``connection`` as a Prism tool called ``name``: its description, its
    ``inputSchema`` as ``parameters``; ``readOnlyHint`` makes it read-only (``effect="read"``)
    and ``idempotentHint`` idempotent; a tool with neither is a side effect."""
    hints = tool.annotations
    read_only = hints is not None and hints.read_only_hint is True
    idempotent = hints is not None and hints.idempotent_hint is True

    async def execute(args: dict[str, Any], context: ToolExecutionContext) -> Any:
        result = await connection.call(tool.name, args, context)
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
    """The tool's ``structuredContent`` when it has one, else its text blocks joined by
    ``"\\n"``; ``isError: true`` is an error result carrying that text."""
    text = _text(result, context)
    if result.is_error:
        message = text or f"the MCP tool {context.tool_name!r} reported an error"
        error = ErrorInfo(message, code=MCP_TOOL_ERROR)
        return ToolResult(context.tool_call_id, context.tool_name, error=error)
    if result.structured_content is not None:
        return result.structured_content
    return text


def _text(result: types.CallToolResult, context: ToolExecutionContext) -> str:
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    others = sorted({block.type for block in result.content if block.type != "text"})
    if others and result.structured_content is None:
        # Only text reaches the model; say what it does not see rather than drop it unseen.
        logger.warning(
            "MCP tool %s (call %s) returned %s content; only its text blocks are passed on",
            context.tool_name,
            context.tool_call_id,
            ", ".join(others),
        )
    return "\n".join(texts)
