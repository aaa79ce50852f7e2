"""Helpers shared by the pack tests: compile refs, build contexts, see which rules fire."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import prism_packs
from prism_core import ErrorInfo, ToolCallContent, ToolResult
from prism_core.guardrails import (
    CompiledGuardrailPacks,
    GuardrailContext,
    GuardrailDecision,
    GuardrailPack,
    compile_guardrail_packs,
    pack_catalogue,
)
from prism_core.plugins import PluginHost

__all__ = (
    "builtin_catalogue",
    "call_context",
    "compile_packs",
    "decisions",
    "fired",
    "observe",
    "result_context",
)


def builtin_catalogue() -> dict[str, GuardrailPack]:
    """The built-in packs, resolved through a plugin host the way an agent does it."""
    return pack_catalogue(PluginHost(plugins=[prism_packs.plugin]).guardrail_packs())


def compile_packs(refs: Sequence[Any], **options: Any) -> CompiledGuardrailPacks:
    """Compile ``refs`` against the built-in catalogue."""
    return compile_guardrail_packs(refs, catalogue=builtin_catalogue(), **options)


def call_context(name: str, arguments: Mapping[str, Any]) -> GuardrailContext:
    """The context of a ``tool_input`` check of a call to ``name``."""
    return GuardrailContext(
        stage="tool_input",
        value=ToolCallContent("call_1", name, dict(arguments)),
        session_id="session_1",
        run_id="run_1",
        tool_name=name,
        tool_call_id="call_1",
    )


def result_context(
    name: str, value: Any = None, error: ErrorInfo | None = None
) -> GuardrailContext:
    """The context of a ``tool_output`` check of a result of ``name``."""
    return GuardrailContext(
        stage="tool_output",
        value=ToolResult("call_1", name, value=value, error=error),
        session_id="session_1",
        run_id="run_1",
        tool_name=name,
        tool_call_id="call_1",
    )


def decisions(
    compiled: CompiledGuardrailPacks, name: str, arguments: Mapping[str, Any]
) -> dict[str, GuardrailDecision]:
    """Every compiled ``tool_input`` guard's decision for one call, by guard name."""
    context = call_context(name, arguments)
    return {guard.name: guard.evaluate(context) for guard in compiled.tool_input}


def fired(compiled: CompiledGuardrailPacks, name: str, arguments: Mapping[str, Any]) -> set[str]:
    """The names of the guards that did not allow the call."""
    return {
        guard_name
        for guard_name, decision in decisions(compiled, name, arguments).items()
        if decision.action != "allow"
    }


def observe(
    compiled: CompiledGuardrailPacks, name: str, value: Any = None, error: ErrorInfo | None = None
) -> None:
    """Run every ``tool_output`` observer on one result; they must all allow."""
    context = result_context(name, value, error)
    for guard in compiled.tool_output:
        assert guard.evaluate(context) == GuardrailDecision("allow")
