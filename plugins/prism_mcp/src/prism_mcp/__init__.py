"""Tools from Model Context Protocol servers as ordinary Prism tools.

``async with mcp_tools(MCPServerStdio(...), MCPServerHTTP(...)) as tools:`` connects to each
server with the official ``mcp`` SDK and yields one ``ToolDefinition`` per tool the servers
list. The kernel dispatches them like host tools, so every gate applies before a call leaves
the process: schema, guardrails, approvals, the dispatched mark of a durable run, and the
in-doubt rules after a crash (see ``docs/mcp.md``).
"""

from __future__ import annotations

from ._connection import IDEMPOTENCY_META_KEY
from ._convert import MCP_TOOL_ERROR
from ._errors import MCPConfigError, MCPDuplicateToolError, MCPToolError
from ._servers import MCPServerHTTP, MCPServerStdio
from ._toolset import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    DISCONNECT_TIMEOUT,
    mcp_tools,
)

__all__ = (
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "DISCONNECT_TIMEOUT",
    "IDEMPOTENCY_META_KEY",
    "MCP_TOOL_ERROR",
    "MCPConfigError",
    "MCPDuplicateToolError",
    "MCPServerHTTP",
    "MCPServerStdio",
    "MCPToolError",
    "mcp_tools",
)
