"""Which listed tools a host may be handed: a tool's name and schemas come from the server, so
each is screened before it becomes a ``ToolDefinition``.

A tool is left out (with the reason) when its name is not 1-128 characters of
``[A-Za-z0-9_.-]``, when its ``inputSchema`` or ``outputSchema`` holds a ``$ref`` (or
``$dynamicRef``) that does not point inside the schema (``#…``), or when the kernel's
validator cannot compile the schema. Nothing a schema names is ever fetched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import mcp.types as types

from prism_core import JsonSchemaError
from prism_core.schema import compile_json_schema

__all__ = ("TOOL_NAME", "bad_tool_name", "screen_tool")

#: What a tool name may be (the MCP specification's advice for tool names).
TOOL_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
_REFERENCES = ("$ref", "$dynamicRef")
#: Nesting a schema may have before it is refused as unreasonable.
_MAX_DEPTH = 64


def bad_tool_name(name: Any) -> str | None:
    """Why ``name`` cannot be a tool name, or ``None`` when it can."""
    if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
        shown = name[:40] + "…" if isinstance(name, str) and len(name) > 40 else name
        return f"the name {shown!r} is not 1-128 characters of letters, digits, '_', '.' or '-'"
    return None


def screen_tool(tool: types.Tool, name: str) -> str | None:
    """Why ``tool`` (to be called ``name``) is left out, or ``None`` when it is accepted."""
    for candidate in dict.fromkeys((tool.name, name)):
        reason = bad_tool_name(candidate)
        if reason is not None:
            return reason
    for what, schema in (("inputSchema", tool.input_schema), ("outputSchema", tool.output_schema)):
        if schema is None and what == "outputSchema":
            continue
        reason = _remote_reference(schema, 0)
        if reason is not None:
            return f"its {what} {reason}"
        try:
            compile_json_schema(schema, where=f"its {what}")
        except JsonSchemaError as exc:
            return exc.message
    return None


def _remote_reference(schema: Any, depth: int) -> str | None:
    """What non-local reference ``schema`` holds, if any (the first one found). Every key is
    looked at, data keywords (``const``, ``default``) included: a property may be named
    ``default``, and a tool wrongly left out is safer than a reference followed."""
    if depth > _MAX_DEPTH:
        return f"nests deeper than {_MAX_DEPTH} levels"
    if isinstance(schema, Mapping):
        for key, value in schema.items():
            if key in _REFERENCES and isinstance(value, str) and not value.startswith("#"):
                shown = value if len(value) <= 80 else value[:79] + "…"
                return f"has a {key} outside the schema ({shown!r}); it is never fetched"
            found = _remote_reference(value, depth + 1)
            if found is not None:
                return found
    elif isinstance(schema, list):
        for item in schema:
            found = _remote_reference(item, depth + 1)
            if found is not None:
                return found
    return None
