"""``validation-respect``: once validation fails, stop changing things until it passes.

The pack watches the results of its validation tools (option ``validation_tools``). A
result with an ``error``, or a value whose ``exit_code`` is not 0, marks validation as
failed; a later passing validation clears the mark. While it is set, the mutating tools
are refused. The state is the failing tool's name (``None`` when nothing failed) and rides
a checkpoint as ``{"validation_failed": name}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prism_core import ToolResult
from prism_core.guardrails import GuardrailPack, PackRule, PackRuleContext, PackStateCodec

__all__ = (
    "DEFAULT_VALIDATION_TOOLS",
    "MUTATING_TOOLS",
    "VALIDATION_RESPECT",
    "mutation_after_failure",
    "observe",
    "validate_options",
)

MUTATING_TOOLS = ("write", "edit", "delete", "move", "shell")
DEFAULT_VALIDATION_TOOLS = (
    "test",
    "run_tests",
    "validate",
    "validation",
    "lint",
    "typecheck",
    "check",
)
_MAX_VALIDATION_TOOLS = 64


def validate_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Check ``validation_tools`` (default :data:`DEFAULT_VALIDATION_TOOLS`)."""
    unknown = sorted(set(options) - {"validation_tools"})
    if unknown:
        raise ValueError(f"unknown options {unknown}; validation-respect takes validation_tools")
    tools = options.get("validation_tools", list(DEFAULT_VALIDATION_TOOLS))
    if (
        isinstance(tools, str)
        or not isinstance(tools, Sequence)
        or not 1 <= len(tools) <= _MAX_VALIDATION_TOOLS
        or not all(isinstance(tool, str) and tool for tool in tools)
    ):
        raise ValueError(
            f"validation_tools must be a list of 1..{_MAX_VALIDATION_TOOLS} tool names"
        )
    return {"validation_tools": list(tools)}


def _failed(result: ToolResult) -> bool:
    if result.error is not None:
        return True
    value = result.value
    return isinstance(value, Mapping) and value.get("exit_code", 0) not in (0, None)


def observe(
    state: str | None, call_name: str, result: ToolResult, options: Mapping[str, Any]
) -> str | None:
    """The new state after ``call_name`` returned ``result``."""
    if call_name not in options["validation_tools"]:
        return state
    return call_name if _failed(result) else None


def mutation_after_failure(args: dict[str, Any], ctx: PackRuleContext) -> bool:
    """Whether this call mutates while the last validation failed."""
    # Re-running a validation tool is how the mark clears, so it is never refused.
    return ctx.state is not None and ctx.tool_name not in ctx.options["validation_tools"]


def _snapshot(state: str | None) -> dict[str, Any]:
    return {"validation_failed": state}


def _parse(data: Any) -> str | None:
    if not isinstance(data, Mapping) or set(data) != {"validation_failed"}:
        raise ValueError('expected {"validation_failed": <tool name or null>}')
    tool = data["validation_failed"]
    if tool is not None and (not isinstance(tool, str) or not tool):
        raise ValueError("validation_failed must be a tool name or null")
    return tool


VALIDATION_RESPECT = GuardrailPack(
    id="validation-respect",
    version=1,
    description="Refuses further changes while the last validation result is a failure.",
    validate_options=validate_options,
    rules=(
        PackRule(
            id="no-mutation-after-failed-validation",
            tool=MUTATING_TOOLS,
            deny=mutation_after_failure,
            reason="Changes are paused while the last validation is failing",
        ),
    ),
    observe=observe,
    initial_state=None,
    state_codec=PackStateCodec(snapshot=_snapshot, parse=_parse),
)
