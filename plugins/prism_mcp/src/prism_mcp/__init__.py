"""Tools from Model Context Protocol servers as ordinary Prism tools.

``async with mcp_tools(MCPServerStdio(...), MCPServerHTTP(...)) as tools:`` connects to each
server with the official ``mcp`` SDK and yields one ``ToolDefinition`` per tool the servers
list. The kernel dispatches them like host tools, so every gate applies before a call leaves
the process: schema, guardrails, approvals, the dispatched mark of a durable run, and the
in-doubt rules after a crash (see ``docs/mcp.md``).
"""

from __future__ import annotations

from ._connection import FENCING_META_KEY, IDEMPOTENCY_META_KEY
from ._convert import MCP_TOOL_ERROR
from ._errors import MCPConfigError, MCPDuplicateToolError, MCPResultTooLargeError, MCPToolError
from ._oauth import ClientCredentials, oauth_client_credentials
from ._servers import MCPServerHTTP, MCPServerStdio
from ._toolset import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_RESULT_BYTES,
    DISCONNECT_TIMEOUT,
    MCPToolset,
    mcp_tools,
)

__all__ = (
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_RESULT_BYTES",
    "DISCONNECT_TIMEOUT",
    "FENCING_META_KEY",
    "IDEMPOTENCY_META_KEY",
    "MCP_TOOL_ERROR",
    "ClientCredentials",
    "MCPConfigError",
    "MCPDuplicateToolError",
    "MCPResultTooLargeError",
    "MCPServerHTTP",
    "MCPServerStdio",
    "MCPToolError",
    "MCPToolset",
    "mcp_tools",
    "oauth_client_credentials",
)
