"""The JSON shapes of the API: run summaries, a run's detail with its pending calls, results."""

from __future__ import annotations

import json
from typing import Any

from prism_core import AgentRunResult, AgentRunSummary, CheckpointStore, inspect_agent_run

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
        "parent_run_id": summary.parent_run_id,
    }


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
    """Status, version, counters, pending decisions (tool, redacted arguments, idempotency
    key, reason, guardrail, elicitation schema, the tool's parameter schema, approvers needed
    and given, deadline), in-doubt calls, the decision audit with the receipts of the calls
    that ran (oldest first), every call of the run (arguments, key, status, result), the
    sub-agent runs its calls started, and metadata; ``None`` when the caller cannot see the
    run."""
    detail = await inspect_agent_run(
        checkpoints,
        sessions,
        {"run_id": run_id},
        ownership=ownership,
        redactor=getattr(agent, "redactor", None),
    )
    if detail is None:
        return None
    state = detail.state
    schemas = _tool_schemas(agent)
    pending = [
        {
            "approval_id": call.approval_id,
            "kind": call.kind,
            "tool_call_id": call.tool_call_id,
            "tool": call.tool_name,
            "arguments": call.arguments,
            "idempotency_key": call.idempotency_key,
            "reason": call.reason,
            "guardrail": call.guardrail,
            "elicitation_schema": call.elicitation_schema,
            "parameters": schemas.get(call.tool_name or ""),
            "approvers": call.approvers,
            "approved_by": list(call.approved_by),
            "pending_since": call.pending_since,
            "expires_at": call.expires_at,
        }
        for call in detail.pending
    ]
    in_doubt = [
        {
            "tool_call_id": call.tool_call_id,
            "tool": call.tool_name,
            "arguments": call.arguments,
            "idempotency_key": call.idempotency_key,
        }
        for call in detail.in_doubt
    ]
    counters = state.counters
    return {
        **summary_json(detail.summary),
        "counters": {
            "turns": counters.turns,
            "provider_attempts": counters.provider_attempts,
            "tool_rounds": counters.tool_rounds,
            "tool_calls": counters.tool_calls,
        },
        "pending": pending,
        "in_doubt_calls": in_doubt,
        "audit": [record.to_json() for record in detail.audit],
        "calls": [
            {
                "tool_call_id": call.tool_call_id,
                "tool": call.tool_name,
                "arguments": call.arguments,
                "idempotency_key": call.idempotency_key,
                "status": call.status,
                "result": call.result,
                "error": call.error,
                "approved_by": list(call.approved_by),
            }
            for call in detail.calls
        ],
        "children": [summary_json(child) for child in detail.children],
        "audit_omitted": detail.audit_omitted,
        "metadata": dict(detail.metadata or {}),
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
