"""``async with mcp_tools(*servers) as tools:``: the servers' tools for as long as the block.

The block connects to each server in turn (a failure disconnects the ones already connected
and raises), screens and names the tools (leaving out, with the reason, a tool whose name or
schema cannot be trusted; refusing a name two tools would share), yields ordinary
``ToolDefinition`` objects, and disconnects every server when it ends. The tool set is fixed
when the block opens: a server's later ``tools/list_changed`` is not followed.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from prism_core import ToolDefinition

from ._connection import Connection
from ._convert import tool_definition
from ._errors import MCPConfigError, MCPDuplicateToolError, MCPToolError
from ._screening import screen_tool
from ._servers import MCPServerHTTP, MCPServerStdio

__all__ = (
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_RESULT_BYTES",
    "DISCONNECT_TIMEOUT",
    "MCPToolset",
    "mcp_tools",
)

logger = logging.getLogger("prism_mcp")

#: Seconds one ``tools/call`` may take before it fails with ``MCPToolError``.
DEFAULT_CALL_TIMEOUT = 120.0
#: Seconds a server may take to start, finish the handshake and list its tools.
DEFAULT_CONNECT_TIMEOUT = 30.0
#: Seconds the servers get to disconnect when the block ends before they are cancelled (the
#: SDK stops a stdio server within about 6.5 s: stdin closed, SIGTERM, then SIGKILL).
DISCONNECT_TIMEOUT = 15.0
#: Bytes a tool's result may have (its JSON as received) before it is refused.
DEFAULT_MAX_RESULT_BYTES = 1_048_576


class MCPToolset(list[ToolDefinition]):
    """The tools an ``mcp_tools`` block yields (a plain list of ``ToolDefinition``), and
    ``rejected``: each listed tool that was left out, by its name, with the reason."""

    def __init__(self, tools: list[ToolDefinition], rejected: dict[str, str]) -> None:
        super().__init__(tools)
        self.rejected: dict[str, str] = rejected


@asynccontextmanager
async def mcp_tools(
    *servers: MCPServerStdio | MCPServerHTTP,
    prefix: bool = False,
    call_timeout: float = DEFAULT_CALL_TIMEOUT,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    elicitation_handler: Any = None,
) -> AsyncIterator[MCPToolset]:
    """Connect to ``servers`` and yield one ``ToolDefinition`` per tool they list, named as
    listed, or ``f"{server.name}_{tool}"`` with ``prefix=True``.

    A tool whose name is not 1-128 characters of ``[A-Za-z0-9_.-]``, whose schema has a
    ``$ref`` outside itself, or whose schema cannot be compiled is left out: the yielded
    list's ``rejected`` maps its name to the reason, and a ``WARNING`` names it. A result
    larger than ``max_result_bytes`` is the call's error result
    (``ERR_PRISM_MCP_RESULT_TOO_LARGE``). ``elicitation_handler(message, schema)`` (sync or
    async) answers a server's elicitation requests with the content, or ``None`` to decline;
    without one, no elicitation capability is declared.

    Raises ``MCPDuplicateToolError`` when two tools would share a name, ``MCPConfigError``
    for a bad option, and ``MCPToolError`` when a server cannot be started or connected within
    ``connect_timeout`` seconds; every server already connected is disconnected first. A call
    fails with ``MCPToolError`` after ``call_timeout`` seconds without an answer, when its
    server's connection has ended, or once the block has closed.
    """
    _check_servers(servers, prefix)
    call_timeout = _seconds(call_timeout, "call_timeout")
    connect_timeout = _seconds(connect_timeout, "connect_timeout")
    if (
        isinstance(max_result_bytes, bool)
        or not isinstance(max_result_bytes, int)
        or max_result_bytes <= 0
    ):
        raise MCPConfigError(
            f"max_result_bytes must be a positive number of bytes, got {max_result_bytes!r}"
        )
    if elicitation_handler is not None and not callable(elicitation_handler):
        raise MCPConfigError(f"elicitation_handler must be callable, got {elicitation_handler!r}")
    connections = [
        Connection(
            server,
            call_timeout,
            max_result_bytes=max_result_bytes,
            elicitation_handler=elicitation_handler,
        )
        for server in servers
    ]
    # anyio wraps whatever leaves a task group's body in an ExceptionGroup; the host's own
    # exception (or a refusal to open) is held here and raised as itself once the
    # connections are down.
    failure: BaseException | None = None
    async with anyio.create_task_group() as group:
        try:
            for connection in connections:
                with anyio.move_on_after(connect_timeout) as waited:
                    await group.start(connection.run)
                if waited.cancelled_caught:
                    raise MCPToolError(
                        f"{connection.server.describe} did not start, finish the handshake and "
                        f"list its tools within {connect_timeout:g} s"
                    )
            definitions = _definitions(connections, prefix)
        except Exception as exc:
            failure = exc
        else:
            try:
                yield definitions
            except BaseException as exc:
                failure = exc
        finally:
            for connection in connections:
                connection.close()
            await _disconnect(connections, group.cancel_scope)
    if failure is not None:
        raise failure


async def _disconnect(connections: list[Connection], scope: anyio.CancelScope) -> None:
    """Wait (shielded, bounded) for every connection to end; cancel the stragglers (an HTTP
    server that never answers the session's closing request)."""
    with anyio.move_on_after(DISCONNECT_TIMEOUT, shield=True):
        for connection in connections:
            if connection.running:
                await connection.done.wait()
    late = [c.server.describe for c in connections if c.running and not c.done.is_set()]
    if late:
        logger.warning(
            "cancelling %s: still disconnecting after %g s", ", ".join(late), DISCONNECT_TIMEOUT
        )
        scope.cancel()


def _check_servers(servers: tuple[Any, ...], prefix: Any) -> None:
    if not isinstance(prefix, bool):
        raise MCPConfigError(f"prefix must be True or False, got {prefix!r}")
    for server in servers:
        if not isinstance(server, MCPServerStdio | MCPServerHTTP):
            raise MCPConfigError(
                f"mcp_tools takes MCPServerStdio and MCPServerHTTP servers, got {server!r}"
            )
    if prefix:
        names = [server.name for server in servers]
        shared = sorted({name for name in names if names.count(name) > 1})
        if shared:
            raise MCPDuplicateToolError(
                f"two MCP servers are named {shared[0]!r}, so prefix=True cannot tell their "
                "tools apart; give them distinct name= values"
            )


def _seconds(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MCPConfigError(f"{what} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise MCPConfigError(f"{what} must be a positive finite number of seconds, got {value!r}")
    return float(value)


def _definitions(connections: list[Connection], prefix: bool) -> MCPToolset:
    owners: dict[str, str] = {}
    definitions: list[ToolDefinition] = []
    rejected: dict[str, str] = {}
    for connection in connections:
        for tool in connection.tools:
            name = f"{connection.server.name}_{tool.name}" if prefix else tool.name
            reason = screen_tool(tool, name)
            if reason is not None:
                shown = name if len(name) <= 200 else name[:199] + "…"
                rejected[shown] = reason
                logger.warning(
                    "%s: the tool %r is left out: %s", connection.server.describe, shown, reason
                )
                continue
            owner = owners.get(name)
            if owner is not None:
                hint = "" if prefix else " (prefix=True names each after its server)"
                raise MCPDuplicateToolError(
                    f"the tool name {name!r} is listed by {owner} and by "
                    f"{connection.server.describe}{hint}"
                )
            owners[name] = connection.server.describe
            definitions.append(tool_definition(connection, tool, name))
    return MCPToolset(definitions, rejected)
