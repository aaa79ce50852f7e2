"""A small MCP server built with the official Python SDK (``MCPServer``), for the tests.

Every call that reaches a tool is appended (and fsynced) as one JSON line to the ledger file,
with the Prism idempotency key the call carried in its ``_meta``: the tests count the lines to
prove how often each call reached the server.

    python ledger_server.py stdio LEDGER [--variant 2]
    python ledger_server.py http LEDGER [--variant 2]

Over HTTP it binds a free loopback port itself, prints ``{"port": N, "pid": P}`` on stdout and
serves Streamable HTTP at ``/mcp`` with uvicorn. ``--variant 2`` gives ``append_entry`` one
more parameter (a server whose schema changed); ``--variant 3`` marks it ``idempotentHint``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import (
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    ToolAnnotations,
)
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import BaseModel

KEY = "prism/idempotency_key"


def build(ledger: Path, variant: int) -> MCPServer:
    """The server, writing to ``ledger``."""
    server = MCPServer("ledger")

    def record(ctx: Context, tool: str, **fields: Any) -> None:
        meta = ctx.request_context.meta or {}
        line = {"tool": tool, "key": meta.get(KEY), "pid": os.getpid(), **fields}
        with ledger.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    if variant in (1, 3):
        # Variant 3 claims the same tool is idempotent (a server whose hint changed).
        hint = ToolAnnotations(idempotent_hint=True) if variant == 3 else None

        @server.tool(
            description="Append an entry to the ledger.", annotations=hint, structured_output=False
        )
        def append_entry(entry: str, ctx: Context) -> str:
            record(ctx, "append_entry", entry=entry)
            return f"appended {entry}"

    else:

        @server.tool(description="Append an entry to the ledger.", structured_output=False)
        def append_entry(entry: str, note: str, ctx: Context) -> str:
            record(ctx, "append_entry", entry=entry, note=note)
            return f"appended {entry}"

    @server.tool(
        description="How many entries the ledger holds.",
        annotations=ToolAnnotations(read_only_hint=True),
    )
    def count_entries(ctx: Context) -> dict[str, int]:
        record(ctx, "count_entries")
        lines = ledger.read_text(encoding="utf-8").splitlines() if ledger.exists() else []
        return {"count": sum(1 for x in lines if json.loads(x)["tool"] == "append_entry")}

    @server.tool(
        description="Set a named flag (setting it twice changes nothing).",
        annotations=ToolAnnotations(idempotent_hint=True),
        structured_output=False,
    )
    def set_flag(flag: str, value: bool, ctx: Context) -> str:
        record(ctx, "set_flag", flag=flag, value=value)
        return f"{flag}={value}"

    @server.tool(description="Append an entry, slowly.", structured_output=False)
    async def slow_append(entry: str, seconds: float, ctx: Context) -> str:
        record(ctx, "slow_append", entry=entry, phase="started")
        await anyio.sleep(seconds)
        record(ctx, "slow_append", entry=entry, phase="finished")
        return f"appended {entry} slowly"

    @server.tool(
        description="Count the entries, slowly.",
        annotations=ToolAnnotations(read_only_hint=True),
        structured_output=False,
    )
    async def slow_count(seconds: float, ctx: Context) -> str:
        record(ctx, "slow_count", phase="started")
        await anyio.sleep(seconds)
        return "counted"

    @server.tool(description="Always fails with the given reason.", structured_output=False)
    def reject(reason: str, ctx: Context) -> str:
        record(ctx, "reject", reason=reason)
        raise ToolError(reason)

    @server.tool(
        description="The value of one header of the HTTP request that carried this call.",
        annotations=ToolAnnotations(read_only_hint=True),
        structured_output=False,
    )
    def request_header(header: str, ctx: Context) -> str:
        return (ctx.headers or {}).get(header.lower(), "")

    @server.tool(description="Count to three, reporting progress.", structured_output=False)
    async def count_to_three(ctx: Context) -> str:
        for step in (1, 2, 3):
            await ctx.report_progress(step, 3, f"step {step}")
        return "counted to three"

    class Approval(BaseModel):
        approver: str
        amount: int

    question = "Who approves this refund, and how much?"

    @server.tool(description="Ask the user who approves a refund.", structured_output=False)
    async def ask_refund(ctx: Context) -> Any:
        if ctx.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
            answer = await ctx.elicit(question, Approval)
            if answer.action != "accept" or answer.data is None:
                return f"refund {answer.action}"
            return f"refund of {answer.data.amount} approved by {answer.data.approver}"
        # 2026-07-28: no server-initiated request; the input is asked for in the result.
        responses = ctx.input_responses or {}
        reply = responses.get("approval")
        if reply is None:
            schema = Approval.model_json_schema()
            ask = ElicitRequest(
                params=ElicitRequestFormParams(message=question, requested_schema=schema)
            )
            return InputRequiredResult(input_requests={"approval": ask})
        if not isinstance(reply, ElicitResult) or reply.action != "accept" or not reply.content:
            return f"refund {getattr(reply, 'action', 'cancel')}"
        data = Approval.model_validate(reply.content)
        return f"refund of {data.amount} approved by {data.approver}"

    @server.tool(description="Two text blocks and an image.", structured_output=False)
    def mixed(ctx: Context) -> list[Any]:
        from mcp.types import ImageContent, TextContent

        record(ctx, "mixed")
        return [
            TextContent(type="text", text="first"),
            ImageContent(type="image", data="aGk=", mime_type="image/png"),
            TextContent(type="text", text="second"),
        ]

    return server


def main() -> None:
    """Serve over the transport named on the command line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("ledger")
    parser.add_argument("--variant", type=int, default=1)
    args = parser.parse_args()
    server = build(Path(args.ledger), args.variant)
    if args.transport == "stdio":
        server.run("stdio")
        return
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sys.stdout.write(json.dumps({"port": sock.getsockname()[1], "pid": os.getpid()}) + "\n")
    sys.stdout.flush()
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
