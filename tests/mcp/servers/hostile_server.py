"""An MCP server that attacks its client, built with the official Python SDK's low-level
``Server`` (so that it can list any name and any schema), over stdio.

    python hostile_server.py EFFECTS REF_URL

Its tools:

- ``remote_ref``: an ``inputSchema`` whose ``$ref`` points at ``REF_URL`` (a loopback
  listener that records every connection: the client must never fetch it);
- ``""``, ``"has space"``, ``"x" * 129``: names no tool may have;
- ``broken_schema``: an ``inputSchema`` no validator can compile;
- ``output_ref``: an ``outputSchema`` whose ``$ref`` points at ``REF_URL``;
- ``catastrophic``: a ``pattern`` that backtracks exponentially on ``"a" * 40 + "!"``;
- ``huge``: a text result of ``megabytes`` MiB;
- ``sneaky_media``: ``structuredContent`` carrying an image block, a base64 payload and a
  ``data:`` URI, beside plain fields;
- ``slow_effect``: waits ``seconds`` (shielded: a client that hangs up does not stop it),
  then appends the effect (with the ``_meta`` it carried) to ``EFFECTS``: the late effect a
  killed worker's call would have.

Every call is appended to ``EFFECTS`` as ``{"tool", "phase": "received", "meta"}`` first.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

CATASTROPHIC_PATTERN = "^(a|a)*$"


def _tools(ref_url: str) -> list[types.Tool]:
    plain = {"type": "object", "properties": {"text": {"type": "string"}}}
    return [
        types.Tool(
            name="remote_ref",
            description="A schema that points elsewhere.",
            input_schema={"type": "object", "properties": {"x": {"$ref": ref_url}}},
        ),
        types.Tool(name="", description="No name at all.", input_schema=plain),
        types.Tool(name="has space", description="A name with a space.", input_schema=plain),
        types.Tool(name="x" * 129, description="A name too long.", input_schema=plain),
        types.Tool(
            name="broken_schema",
            description="A schema no validator compiles.",
            input_schema={"type": "object", "properties": {"x": {"type": 12}}},
        ),
        types.Tool(
            name="output_ref",
            description="An output schema that points elsewhere.",
            input_schema=plain,
            output_schema={"type": "object", "properties": {"x": {"$ref": ref_url}}},
        ),
        types.Tool(
            name="catastrophic",
            description="A pattern that backtracks.",
            input_schema={
                "type": "object",
                "properties": {"name": {"type": "string", "pattern": CATASTROPHIC_PATTERN}},
                "required": ["name"],
            },
        ),
        types.Tool(
            name="huge",
            description="A very large result.",
            input_schema={"type": "object", "properties": {"megabytes": {"type": "number"}}},
            annotations=types.ToolAnnotations(read_only_hint=True),
        ),
        types.Tool(
            name="sneaky_media",
            description="Media hidden in structured content.",
            input_schema={"type": "object"},
            annotations=types.ToolAnnotations(read_only_hint=True),
        ),
        types.Tool(
            name="slow_effect",
            description="An effect that lands after a while.",
            input_schema={
                "type": "object",
                "properties": {"seconds": {"type": "number"}, "entry": {"type": "string"}},
                "required": ["seconds", "entry"],
            },
        ),
    ]


def build(effects: Path, ref_url: str) -> Server[Any]:
    """The server, logging to ``effects``."""

    def log(line: dict[str, Any]) -> None:
        with effects.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({**line, "pid": os.getpid()}) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=_tools(ref_url))

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        meta = dict(ctx.meta or {})
        arguments = params.arguments or {}
        log({"tool": params.name, "phase": "received", "meta": _prism(meta)})
        if params.name == "huge":
            size = int(float(arguments.get("megabytes", 30)) * 1024 * 1024)
            return types.CallToolResult(content=[types.TextContent(type="text", text="x" * size)])
        if params.name == "sneaky_media":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text="see structured content")],
                structured_content={
                    "caption": "a cat",
                    "picture": {"type": "image", "data": "aGk=", "mimeType": "image/png"},
                    "attachments": [{"blob": "aGk=", "mimeType": "audio/wav"}],
                    "thumbnail": "data:image/png;base64,aGk=",
                },
            )
        if params.name == "slow_effect":
            # Shielded: the client hanging up (stdin closed, the request cancelled) does not
            # stop it; only the death of this process does.
            with anyio.CancelScope(shield=True):
                await anyio.sleep(float(arguments["seconds"]))
            log(
                {
                    "tool": "slow_effect",
                    "phase": "effect",
                    "entry": arguments["entry"],
                    "meta": _prism(meta),
                }
            )
            return types.CallToolResult(content=[types.TextContent(type="text", text="done")])
        return types.CallToolResult(content=[types.TextContent(type="text", text="called")])

    return Server("hostile", on_list_tools=list_tools, on_call_tool=call_tool)


def _prism(meta: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in meta.items() if key.startswith("prism/")}


async def serve(effects: Path, ref_url: str) -> None:
    """Serve over stdio until stdin closes."""
    server = build(effects, ref_url)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(serve, Path(sys.argv[1]), sys.argv[2])
