"""The JSON shapes of the API: run summaries, a run's detail with its pending calls, results."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentRunResult,
    AgentRunSummary,
    CheckpointStore,
    load_agent_run_state,
)
from prism_core.resume import summarize_run

__all__ = ("result_json", "run_detail", "summary_json")


def summary_json(summary: AgentRunSummary) -> dict[str, Any]:
    """A run summary as JSON."""
    return {
        "run_id": summary.run_id,
        "session_id": summary.session_id,
        "agent_id": summary.agent_id,
        "status": summary.status,
        "version": summary.version,
        "updated_at": summary.updated_at,
        "pending_decisions": summary.pending_decisions,
        "in_doubt": list(summary.in_doubt),
        "lease_expires_at": summary.lease_expires_at,
    }


def _redacted(value: Any, redactor: Any) -> Any:
    if redactor is None:
        return value
    if isinstance(value, str):
        return redactor.redact_text(value)
    if isinstance(value, Mapping):
        return {str(k): _redacted(v, redactor) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted(v, redactor) for v in value]
    return value


async def _call_arguments(sessions: Any, session_id: str, leaf_id: str | None) -> dict[str, Any]:
    """The arguments of every tool call on the run's branch, by call id."""
    if sessions is None or leaf_id is None:
        return {}
    found: dict[str, Any] = {}
    for entry in await sessions.read_branch_path(session_id, leaf_id):
        message = getattr(entry, "message", None)
        if message is None or message.role != "assistant":
            continue
        for block in message.content:
            if getattr(block, "type", None) == "tool_call":
                found[block.id] = block.arguments
    return found


def _tool_schemas(agent: Any) -> dict[str, Any]:
    registry = getattr(agent, "registry", None)
    tools = registry.definitions() if registry is not None else ()
    schemas: dict[str, Any] = {}
    for tool in tools:
        name = getattr(tool, "name", None)
        if isinstance(name, str):
            schemas[name] = getattr(tool, "parameters", None)
    return schemas


async def run_detail(
    checkpoints: CheckpointStore,
    sessions: Any,
    run_id: str,
    ownership: dict[str, str] | None,
    agent: Any,
) -> dict[str, Any] | None:
    """Status, version, counters, pending decisions (tool, redacted arguments, reason,
    guardrail, elicitation schema, the tool's parameter schema), in-doubt calls and metadata;
    ``None`` when the caller cannot see the run."""
    record = await checkpoints.load(AGENT_RUN_NAMESPACE, run_id, ownership=ownership)
    if record is None:
        return None
    found = await load_agent_run_state(checkpoints, {"run_id": run_id}, ownership=ownership)
    if found is None:
        return None
    summary = summarize_run(record)
    state = found.state
    redactor = getattr(agent, "redactor", None)
    arguments = await _call_arguments(sessions, state.session_id, state.leaf_id)
    schemas = _tool_schemas(agent)
    names = {call.tool_call_id: call.name for call in state.pending_calls}
    pending = []
    if state.interruption is not None:
        for decision in state.interruption.pending_decisions:
            call_id = decision.tool_call_id
            tool = decision.scope.tool_name if decision.scope is not None else None
            tool = tool or names.get(call_id or "")
            pending.append(
                {
                    "approval_id": decision.approval_id,
                    "kind": decision.kind,
                    "tool_call_id": call_id,
                    "tool": tool,
                    "arguments": _redacted(arguments.get(call_id or ""), redactor),
                    "reason": decision.reason,
                    "guardrail": decision.guardrail,
                    "elicitation_schema": decision.elicitation_schema,
                    "parameters": schemas.get(tool or ""),
                }
            )
    in_doubt = [
        {
            "tool_call_id": call.tool_call_id,
            "tool": call.name,
            "arguments": _redacted(arguments.get(call.tool_call_id), redactor),
        }
        for call in state.pending_calls
        if call.tool_call_id in summary.in_doubt
    ]
    counters = state.counters
    return {
        **summary_json(summary),
        "counters": {
            "turns": counters.turns,
            "provider_attempts": counters.provider_attempts,
            "tool_rounds": counters.tool_rounds,
            "tool_calls": counters.tool_calls,
        },
        "pending": pending,
        "in_doubt_calls": in_doubt,
        "metadata": dict(found.metadata or {}),
        "stop_reason": state.stop_reason,
        "error": None
        if state.error is None
        else {"code": state.error.code, "message": state.error.message},
    }


def result_json(result: AgentRunResult) -> dict[str, Any]:
    """What a resume answered: status, text, the new version, the stop reason or error."""
    run_state = result.run_state
    return {
        "run_id": result.run_id,
        "session_id": result.session_id,
        "status": result.status,
        "text": result.text,
        "version": getattr(run_state, "version", None),
        "stop_reason": result.stop_reason,
        "error": None
        if result.error is None
        else {"code": result.error.code, "message": result.error.message},
    }


def dumps_compact(value: Any) -> str:
    """Compact JSON text for SSE data lines (never spanning lines)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
