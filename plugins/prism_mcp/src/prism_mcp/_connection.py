"""One live connection to one MCP server, owned by a task of the ``mcp_tools`` block.

The SDK's ``Client`` (its transport and ``ClientSession``) lives in a task of its own, so a
transport that fails (a server that died, a refused HTTP request) ends that task only, never
the host's code inside the block. The client negotiates the protocol itself: the stateless
2026-07-28 revision (``server/discover``) where the server speaks it, else the
``initialize`` handshake. Every call is bounded: by the call timeout, by the run's abort
signal (and the run's own cancellation: an abort or the wall-time limit), and by the
connection itself, whose end cancels the calls still waiting on it.
"""

from __future__ import annotations

import logging
from typing import Any, cast

import anyio
import mcp.types as types
from anyio.abc import TaskStatus
from mcp import Client, ClientSession
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED

from prism_core import ToolExecutionContext
from prism_core.schema import ValidationTimeoutError, compile_json_schema

from ._elicit import elicitation_callback
from ._errors import MCPResultTooLargeError, MCPToolError
from ._servers import MCPServerHTTP, MCPServerStdio

__all__ = ("FENCING_META_KEY", "IDEMPOTENCY_META_KEY", "MAX_LIST_PAGES", "Connection")

logger = logging.getLogger("prism_mcp")

#: The ``_meta`` key of every ``tools/call`` that carries the call's ``idempotency_key``
#: (equal across every attempt of one call of one run), for servers that deduplicate.
IDEMPOTENCY_META_KEY = "prism/idempotency_key"
#: The ``_meta`` key of every ``tools/call`` that carries the run's fencing token, for
#: servers that refuse a write below the highest token they have seen for the run.
FENCING_META_KEY = "prism/fencing_token"
#: ``tools/list`` pages read before a server is refused as listing without end.
MAX_LIST_PAGES = 100
#: Bytes a message may carry beyond its result (the JSON-RPC envelope) before the transport
#: refuses it unread.
ENVELOPE_BYTES = 64 * 1024
_CLIENT_INFO = types.Implementation(name="prism", version="0.1.0")


class Connection:
    """The session with one server: connects in :meth:`run`, calls in :meth:`call`."""

    def __init__(
        self,
        server: MCPServerStdio | MCPServerHTTP,
        call_timeout: float,
        *,
        max_result_bytes: int,
        elicitation_handler: Any = None,
    ) -> None:
        self.server = server
        self.call_timeout = call_timeout
        self.max_result_bytes = max_result_bytes
        self.tools: list[types.Tool] = []
        self.protocol_version: str | None = None
        self._elicit = elicitation_callback(elicitation_handler, server.describe)
        self._client: Client | None = None
        self._stop = anyio.Event()
        self._closed = False
        self._ended: BaseException | str | None = None
        self._in_flight: set[anyio.CancelScope] = set()
        #: Whether :meth:`run` was started; ``done`` is set when it has returned (the
        #: transport closed and the server stopped).
        self.running = False
        self.done = anyio.Event()

    async def run(self, *, task_status: TaskStatus[None]) -> None:
        """Connect, negotiate and list the tools, report started, then hold the session
        until :meth:`close`. A failure before ``started`` is raised (the block refuses to
        open); one after it ends the connection, and its calls raise ``MCPToolError``."""
        started = False
        self.running = True
        transport = self.server.open(self.call_timeout, self.max_result_bytes + ENVELOPE_BYTES)
        client = Client(
            transport,
            mode="auto",
            elicitation_callback=self._elicit,
            client_info=_CLIENT_INFO,
            cache=None,
        )
        try:
            async with client:
                _bound_output_validation(client.session)
                self.tools = await _list_tools(client.session, self.server.describe)
                self.protocol_version = client.protocol_version
                self._client = client
                info = client.server_info
                logger.info(
                    "%s connected: %s %s, protocol %s, %d tools",
                    self.server.describe,
                    info.name if info is not None else "(anonymous)",
                    info.version if info is not None else "",
                    client.protocol_version,
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
            self._client = None
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
        connection, every later call is refused unsent. The server's progress notifications
        become the call's progress events; a result over ``max_result_bytes`` raises
        ``MCPResultTooLargeError``."""
        client = self._client
        if self._closed:
            raise MCPToolError(
                f"{self.server.describe}: the mcp_tools block has closed; {tool!r} was not called"
            )
        if client is None:
            raise MCPToolError(
                f"{self.server.describe}: the connection has ended ({_describe(self._ended)}); "
                f"{tool!r} was not called"
            )
        if context.signal.aborted:
            raise MCPToolError(f"the run was aborted; {tool!r} was not called")

        async def progress(done: float, total: float | None, message: str | None) -> None:
            report: dict[str, Any] = {"progress": done}
            if total is not None:
                report["total"] = total
            if message is not None:
                report["message"] = message[:1000]
            context.report_progress(report)

        scope = anyio.CancelScope(deadline=anyio.current_time() + self.call_timeout)
        context.signal.on_abort(lambda _reason: scope.cancel())
        self._in_flight.add(scope)
        try:
            with scope:
                result = await client.call_tool(
                    tool,
                    arguments,
                    progress_callback=cast("ProgressFnT", progress),
                    meta=_meta(context),
                )
        except MCPError as exc:
            if _over_size(exc):
                raise self._too_large(tool) from exc
            if exc.code == CONNECTION_CLOSED:
                self._lose("the server closed the connection")
                raise MCPToolError(
                    f"{self.server.describe}: the call of {tool!r} was cut off: the connection "
                    "closed; the server may or may not have carried it out"
                ) from exc
            raise MCPToolError(
                f"{self.server.describe}: the call of {tool!r} failed: {_describe(exc)}"
            ) from exc
        except ValidationTimeoutError as exc:
            raise MCPToolError(
                f"{self.server.describe}: the result of {tool!r} could not be checked against "
                f"its outputSchema in time: {exc.message}"
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
        if len(result.model_dump_json(by_alias=True, exclude_none=True)) > self.max_result_bytes:
            raise self._too_large(tool)
        return result

    def _too_large(self, tool: str) -> MCPResultTooLargeError:
        return MCPResultTooLargeError(
            f"{self.server.describe}: the result of {tool!r} is larger than "
            f"{self.max_result_bytes} bytes; it was refused and not passed on"
        )

    def _lose(self, reason: str) -> None:
        """The server is gone: refuse further calls unsent and let :meth:`run` disconnect
        (which stops a stdio server process that is still alive)."""
        if self._ended is None:
            self._ended = reason
        self._client = None
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


def _over_size(error: MCPError) -> bool:
    """Whether the transport refused the answer for its size (an event-stream message over
    the bound: the SDK reports it as a failed stream, the connection itself is fine)."""
    return error.code == CONNECTION_CLOSED and "byte limit" in str(error)


def _meta(context: ToolExecutionContext) -> types.RequestParamsMeta:
    return cast(
        "types.RequestParamsMeta",
        {IDEMPOTENCY_META_KEY: context.idempotency_key, FENCING_META_KEY: context.fencing_token},
    )


def _bound_output_validation(session: ClientSession) -> None:
    """Check a result against its tool's ``outputSchema`` with the kernel's bounded validator
    instead of the SDK's: the SDK matches a schema's ``pattern`` with ``re``, which a
    server's catastrophic pattern and crafted result would hold for minutes, event loop and
    all. The schema never leaves the process and no reference in it is fetched."""
    listed: dict[str, Any] = {}

    async def validate(name: str, result: types.CallToolResult) -> None:
        schema = listed.get(name)
        if schema is None:
            return
        if result.structured_content is None:
            raise RuntimeError(
                f"tool {name} has an outputSchema but returned no structured content"
            )
        problem = compile_json_schema(schema).problem(result.structured_content)
        if problem is not None:
            raise RuntimeError(
                f"the structured content of {name} breaks its outputSchema: {problem}"
            )

    list_tools = session.list_tools

    async def list_and_remember(**kwargs: Any) -> types.ListToolsResult:
        page = await list_tools(**kwargs)
        for tool in page.tools:
            listed[tool.name] = tool.output_schema
        return page

    # Instance attributes: this one session uses them, the SDK's class stays as it is.
    session.validate_tool_result = validate  # type: ignore[method-assign]
    session.list_tools = list_and_remember  # type: ignore[method-assign]


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
