"""Typed output on the Messages API: the run's output schema as a tool the model must call.

The Messages API has no response schema of its own, so a request whose run has an
``output_type`` (``request.output``, an object schema) gets one more tool carrying that schema,
and ``tool_choice`` makes the model call a tool: that tool when it is the only one, any tool
when the agent has tools of its own (so the model can still use them), or ``auto`` when
extended thinking is on (the API refuses a forced tool then). The stream decoder turns the
output tool's input back into the answer's text, so the run sees a JSON answer to validate.
A host's own ``tool_choice`` option wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prism_core import ProviderRequest

__all__ = ("OUTPUT_TOOL", "add_output_tool", "output_tool_name")

#: The output tool's name (a number is added when one of the agent's tools has it).
OUTPUT_TOOL = "final_output"


def output_tool_name(request: ProviderRequest) -> str | None:
    """The name of the output tool ``request`` gets, or ``None`` when it gets none (no output
    type, or a schema whose root is not an object, which a tool's input cannot be)."""
    output = request.output
    if output is None or output.schema.get("type") != "object":
        return None
    taken = {tool.name for tool in request.tools}
    name, suffix = OUTPUT_TOOL, 2
    while name in taken:
        name, suffix = f"{OUTPUT_TOOL}_{suffix}", suffix + 1
    return name


def add_output_tool(request: ProviderRequest, params: dict[str, Any]) -> None:
    """Add the output tool and its ``tool_choice`` to the ``messages.create`` parameters."""
    name = output_tool_name(request)
    if name is None:
        return
    assert request.output is not None
    params["tools"] = [
        *params.get("tools", ()),
        {
            "name": name,
            "description": (
                f"Give your final answer ({request.output.name}) by calling this tool; its "
                "input is the answer."
            ),
            "input_schema": dict(request.output.schema),
        },
    ]
    if "tool_choice" in params:
        return
    thinking = params.get("thinking")
    if isinstance(thinking, Mapping) and thinking.get("type") == "enabled":
        params["tool_choice"] = {"type": "auto"}
    elif request.tools:
        params["tool_choice"] = {"type": "any"}
    else:
        params["tool_choice"] = {"type": "tool", "name": name}
