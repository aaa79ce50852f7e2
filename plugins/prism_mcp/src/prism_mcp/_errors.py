"""The errors ``prism_mcp`` raises, each a ``PrismError`` with a stable ``code``."""

from __future__ import annotations

from prism_core import PrismError

__all__ = ("MCPConfigError", "MCPDuplicateToolError", "MCPResultTooLargeError", "MCPToolError")


class MCPToolError(PrismError):
    """An MCP server could not be reached or could not answer: it failed to start or to finish
    the handshake, it died or hung up, a call found the ``mcp_tools`` block already closed, or
    a call got no answer in time. Inside a run the kernel turns it into the call's error
    result, so the run goes on."""

    code = "ERR_PRISM_MCP"


class MCPConfigError(PrismError, ValueError):
    """A server description or an ``mcp_tools`` option was refused before anything started."""

    code = "ERR_PRISM_MCP_CONFIG"


class MCPDuplicateToolError(MCPConfigError):
    """Two tools would get the same name: two servers list it (use ``prefix=True``), one server
    lists it twice, or two servers share a name under ``prefix=True``. Every server is
    disconnected before this is raised."""

    code = "ERR_PRISM_MCP_DUPLICATE_TOOL"


class MCPResultTooLargeError(MCPToolError):
    """A tool's result was larger than ``mcp_tools(max_result_bytes=…)``: it is refused, never
    passed on. Inside a run it becomes the call's error result with this code."""

    code = "ERR_PRISM_MCP_RESULT_TOO_LARGE"
