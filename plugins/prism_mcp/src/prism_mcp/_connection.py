"""One live connection to one MCP server, owned by a task of the ``mcp_tools`` block.

The SDK's transport and ``ClientSession`` live in a task of their own, so a transport that
fails (a server that died, a refused HTTP request) ends that task only, never the host's code
inside the block. Every call is bounded: by the call timeout, by the run's abort signal (and
the run's own cancellation: an abort or the wall-time limit), and by the connection itself,
whose end cancels the calls still waiting on it.
"""

from __future__ import annotations

import logging
from typing import Any, cast

import anyio
import mcp.types as types
from anyio.abc import TaskStatus
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED

from prism_core import ToolExecutionContext

from ._errors import MCPToolError
from ._servers import MCPServerHTTP, MCPServerStdio

__all__ = ("IDEMPOTENCY_META_KEY", "MAX_LIST_PAGES", "Connection")

logger = logging.getLogger("prism_mcp")

#: The ``_meta`` key of every ``tools/call`` that carries the call's ``idempotency_key``
#: (equal across every attempt of one call of one run), for servers that deduplicate.
IDEMPOTENCY_META_KEY = "prism/idempotency_key"
#: ``tools/list`` pages read before a server is refused as listing without end.
MAX_LIST_PAGES = 100


class Connection:
    """The session with one server: connects in :meth:`run`, calls in :meth:`call`."""

    def __init__(self, server: MCPServerStdio | MCPServerHTTP, call_timeout: float) -> None:
        self.server = server
        self.call_timeout = call_timeout
        self.tools: list[types.Tool] = []
        self._session: ClientSession | None = None
        self._stop = anyio.Event()
        self._closed = False
        self._ended: BaseException | str | None = None
        self._in_flight: set[anyio.CancelScope] = set()
        #: Whether :meth:`run` was started; ``done`` is set when it has returned (the
        #: transport closed and the server stopped).
        self.running = False
        self.done = anyio.Event()

    async def run(self, *, task_status: TaskStatus[None]) -> None:
        """Connect, hand-shake and list the tools, report started, then hold the session
        until :meth:`close`. A failure before ``started`` is raised (the block refuses to
        open); one after it ends the connection, and its calls raise ``MCPToolError``."""
        started = False
        self.running = True
        try:
            async with (
                self.server.open(self.call_timeout) as (read, write),
                ClientSession(read, write) as session,
            ):
                initialized = await session.initialize()
                self.tools = await _list_tools(session, self.server.describe)
                self._session = session
                logger.info(
                    "%s connected: %s %s, protocol %s, %d tools",
                    self.server.describe,
                    initialized.server_info.name,
                    initialized.server_info.version,
                    session.protocol_version,
                    len(self.tools),
                )
                task_status.started()
                started = True
                await self._stop.wait()
        except Exception as exc:
            if not started:
                if isinstance(exc, MCPToolError):
                    raise
                raise MCPToolError(
                    f"{self.server.describe} could not be connected: {_describe(exc)}"
                ) from exc
            logger.warning("%s: the connection ended: %s", self.server.describe, _describe(exc))
            if self._ended is None:
                self._ended = exc
        finally:
            self._session = None
            if self._ended is None:
                self._ended = "the mcp_tools block has closed" if self._closed else "it hung up"
            for scope in tuple(self._in_flight):
                scope.cancel()
            self.done.set()
        if not self._closed:
            logger.warning("%s: the connection ended before the block closed", self.server.describe)

    def close(self) -> None:
        """Refuse every further call and let :meth:`run` disconnect."""
        self._closed = True
        self._stop.set()

    async def call(
        self, tool: str, arguments: dict[str, Any], context: ToolExecutionContext
    ) -> types.CallToolResult:
        """``tools/call`` of ``tool``, or ``MCPToolError`` when the connection cannot carry it
        or no answer came in time. A call that had left when the connection ended may or may
        not have reached the server, and the error says so; once the server has closed the
        connection, every later call is refused unsent."""
        session = self._session
        if self._closed:
            raise MCPToolError(
                f"{self.server.describe}: the mcp_tools block has closed; {tool!r} was not called"
            )
        if session is None:
            raise MCPToolError(
                f"{self.server.describe}: the connection has ended ({_describe(self._ended)}); "
                f"{tool!r} was not called"
            )
        if context.signal.aborted:
            raise MCPToolError(f"the run was aborted; {tool!r} was not called")
        scope = anyio.CancelScope(deadline=anyio.current_time() + self.call_timeout)
        context.signal.on_abort(lambda _reason: scope.cancel())
        self._in_flight.add(scope)
        try:
            with scope:
                result = await session.call_tool(tool, arguments, meta=_meta(context))
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self._lose("the server closed the connection")
                raise MCPToolError(
                    f"{self.server.describe}: the call of {tool!r} was cut off: the connection "
                    "closed; the server may or may not have carried it out"
                ) from exc
            raise MCPToolError(
                f"{self.server.describe}: the call of {tool!r} failed: {_describe(exc)}"
            ) from exc
        except Exception as exc:
            # Anything else the SDK raises (a result that breaks the tool's output schema,
            # a transport error) is the server's failure too, typed the same way.
            raise MCPToolError(
                f"{self.server.describe}: the call of {tool!r} failed: {_describe(exc)}"
            ) from exc
        finally:
            self._in_flight.discard(scope)
        if scope.cancelled_caught:
            raise MCPToolError(f"{self.server.describe}: the call of {tool!r} {self._why(context)}")
        assert isinstance(result, types.CallToolResult)
        return result

    def _lose(self, reason: str) -> None:
        """The server is gone: refuse further calls unsent and let :meth:`run` disconnect
        (which stops a stdio server process that is still alive)."""
        if self._ended is None:
            self._ended = reason
        self._session = None
        self._stop.set()

    def _why(self, context: ToolExecutionContext) -> str:
        """Why a call's scope was cancelled, in words an operator can act on."""
        if self._ended is not None:
            return (
                f"was cut off: the connection ended ({_describe(self._ended)}); the server may "
                "or may not have carried it out"
            )
        if context.signal.aborted:
            return "was abandoned: the run was aborted"
        return f"got no answer within {self.call_timeout:g} s"


def _meta(context: ToolExecutionContext) -> types.RequestParamsMeta:
    return cast("types.RequestParamsMeta", {IDEMPOTENCY_META_KEY: context.idempotency_key})


async def _list_tools(session: ClientSession, describe: str) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_LIST_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools
    raise MCPToolError(f"{describe} listed more than {MAX_LIST_PAGES} pages of tools")


def _describe(error: BaseException | str | None) -> str:
    """One line for an error, reaching into the groups anyio task groups raise."""
    if isinstance(error, str) or error is None:
        return error or "unknown"
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in error.exceptions)
    text = str(error) or type(error).__name__
    return f"{type(error).__name__}: {text}" if type(error).__name__ not in text else text
