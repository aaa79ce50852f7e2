"""How ``prism runs`` prints runs: the list table, ``show``'s report and their JSON forms.

Every stored string (ids, reasons, actors, arguments, results, metadata) reaches the terminal
through :func:`printable` (:mod:`._escape`): control characters, line and paragraph
separators and invisible format characters are escaped (``\\n``, ``\\x1b``, ``\\u2028``), so
no stored text can start a line of its own, move the cursor or hide what follows.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from prism_core import AgentRunDetail, AgentRunSummary

from ._escape import printable

__all__ = ("age", "printable", "run_detail", "show_text", "summary_table")

_COLUMNS = ("RUN", "AGENT", "STATUS", "VERSION", "AGE", "PENDING", "IN DOUBT")
#: The outcomes of receipts: what became of a call a person allowed (``show`` lists them
#: after the decisions).
RECEIPTS = ("executed", "execution_failed", "in_doubt")


def age(updated_at: float, now: float | None = None) -> str:
    """How long ago ``updated_at`` was, in the largest whole unit (``42s``, ``5m``, ``3h``)."""
    seconds = max(0, int((time.time() if now is None else now) - updated_at))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _moment(epoch: float | None) -> str:
    if epoch is None:
        return "none"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def summary_table(runs: Sequence[AgentRunSummary], now: float | None = None) -> str:
    """The runs as an aligned text table with a header line."""
    rows: list[tuple[str, ...]] = [_COLUMNS]
    for run in runs:
        rows.append(
            (
                run.run_id,
                run.agent_id,
                run.status,
                str(run.version),
                age(run.updated_at, now),
                str(run.pending_decisions),
                ",".join(run.in_doubt) or "-",
            )
        )
    rows = [tuple(printable(cell) for cell in row) for row in rows]  # stored ids, escaped
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(", ", ": "))


def run_detail(detail: AgentRunDetail) -> dict[str, Any]:
    """``show --json``: the summary's fields, counters, decisions, in-doubt calls, the
    decision audit with the receipts of the calls that ran (oldest first), metadata.

    Each decision and in-doubt call carries its tool, its arguments as the session stored
    them (redacted when they were written) and its idempotency key, so an operator sees what
    they approve; a decision also carries its scope (effect kind, identity, arguments hash),
    the approvers it needs and who has allowed it, and its deadline.
    """
    state = detail.state
    counters = state.counters
    decisions = []
    for pending in detail.pending:
        scope = pending.scope
        decisions.append(
            {
                "approval_id": pending.approval_id,
                "kind": pending.kind,
                "tool_call_id": pending.tool_call_id,
                "tool_name": pending.tool_name,
                "arguments": pending.arguments,
                "idempotency_key": pending.idempotency_key,
                "reason": pending.reason,
                "guardrail": pending.guardrail,
                "approvers": pending.approvers,
                "approved_by": list(pending.approved_by),
                "pending_since": pending.pending_since,
                "expires_at": pending.expires_at,
                "scope": None
                if scope is None
                else {
                    "tool_name": scope.tool_name,
                    "effect_kind": scope.effect_kind,
                    "identity": scope.identity,
                    "arguments_hash": scope.arguments_hash,
                },
            }
        )
    in_doubt = [
        {
            "tool_call_id": call.tool_call_id,
            "name": call.tool_name,
            "arguments": call.arguments,
            "idempotency_key": call.idempotency_key,
        }
        for call in detail.in_doubt
    ]
    calls = [
        {
            "tool_call_id": call.tool_call_id,
            "tool_name": call.tool_name,
            "arguments": call.arguments,
            "idempotency_key": call.idempotency_key,
            "status": call.status,
            "result": call.result,
            "error": call.error,
            "approved_by": list(call.approved_by),
        }
        for call in detail.calls
    ]
    audit = [record.to_json() for record in detail.audit]
    return {
        **detail.summary.to_json(),
        "counters": {
            "turns": counters.turns,
            "provider_attempts": counters.provider_attempts,
            "tool_rounds": counters.tool_rounds,
            "tool_calls": counters.tool_calls,
        },
        "decisions": decisions,
        "in_doubt_calls": in_doubt,
        "calls": calls,
        "children": [child.to_json() for child in detail.children],
        "audit": audit,
        "audit_omitted": detail.audit_omitted,
        "metadata": dict(detail.metadata or {}),
        "error": None
        if state.error is None
        else {"code": state.error.code, "message": state.error.message},
    }


def _approvals(decision: dict[str, Any]) -> list[str]:
    """The approvals a decision needs and has (``approvals: 1 of 2 (ana)``) and its deadline."""
    lines = []
    needed = decision.get("approvers") or 1
    if needed > 1:
        given = decision.get("approved_by") or []
        who = f" ({', '.join(given)})" if given else ""
        lines.append(f"    approvals: {len(given)} of {needed}{who}")
    if decision.get("expires_at") is not None:
        lines.append(
            f"    expires: {_moment(decision['expires_at'])} "
            f"(pending since {_moment(decision.get('pending_since'))})"
        )
    return lines


def _record(record: dict[str, Any]) -> list[str]:
    """One audit record (a decision or a receipt) as its report lines."""
    call = record["tool_call_id"] or "-"
    lines = [
        f"  {_moment(record['decided_at'])}  {record['outcome']}  call {call}  "
        f"{record['tool_name'] or '-'}  by {record['actor'] or '-'}  "
        f"via {record.get('channel') or '-'}  (version {record['version']})"
    ]
    if record["reason"]:
        lines.append(f"    reason: {record['reason']}")
    return lines


def _call_lines(call: dict[str, Any]) -> list[str]:
    """One call of the run: tool, status, approvers, key, arguments, result."""
    head = f"  {call['tool_call_id']}  {call['tool_name']}  {call['status'] or '-'}"
    if call["approved_by"]:
        head += f"  approved by {','.join(call['approved_by'])}"
    lines = [
        head,
        f"    arguments: {_compact(call['arguments'])}",
        f"    idempotency key: {call['idempotency_key'] or '-'}",
    ]
    if call["error"] is not None:
        lines.append(f"    error: {call['error']}")
    elif call["status"] is not None:
        lines.append(f"    result: {_compact(call['result'])}")
    return lines


def show_text(detail: dict[str, Any], now: float | None = None) -> str:
    """``show``'s readable report of :func:`run_detail`: a pending decision's approvals
    needed and given and its deadline, the run's calls and child runs, the decision audit,
    then the receipts of the calls that ran; every line escaped (see :func:`printable`)."""
    counters = detail["counters"]
    lines = [
        f"run        {detail['run_id']}",
        f"session    {detail['session_id']}",
        f"agent      {detail['agent_id']}",
        f"status     {detail['status']}",
        f"version    {detail['version']}",
        f"updated    {_moment(detail['updated_at'])} ({age(detail['updated_at'], now)} ago)",
        f"lease      {_moment(detail['lease_expires_at'])}",
        f"started by {detail['started_by'] or '-'}",
        "counters   " + " ".join(f"{name}={value}" for name, value in counters.items()),
    ]
    if detail["parent_run_id"] is not None:
        lines.insert(3, f"parent     {detail['parent_run_id']}")
    if detail["error"] is not None:
        lines.append(f"error      {detail['error']['code']}: {detail['error']['message']}")
    lines.append(f"pending decisions: {len(detail['decisions'])}")
    for decision in detail["decisions"]:
        scope = decision["scope"]
        tool = decision["tool_name"] or (decision["guardrail"] or "-")
        call = decision["tool_call_id"] or "-"
        lines.append(f"  {decision['approval_id']}  {decision['kind']}  call {call}  {tool}")
        if decision["tool_call_id"] is not None:
            lines.append(f"    arguments: {_compact(decision['arguments'])}")
            lines.append(f"    idempotency key: {decision['idempotency_key']}")
        if scope is not None:
            lines.append(
                f"    scope: {scope['identity']}, effect {scope['effect_kind'] or '-'}, "
                f"args sha256 {scope['arguments_hash'][:12]}"
            )
        if decision["reason"]:
            lines.append(f"    reason: {decision['reason']}")
        lines.extend(_approvals(decision))
    lines.append(f"in doubt: {len(detail['in_doubt_calls'])}")
    for call in detail["in_doubt_calls"]:
        lines.append(f"  {call['tool_call_id']}  {call['name']}")
        lines.append(f"    arguments: {_compact(call['arguments'])}")
        lines.append(f"    idempotency key: {call['idempotency_key']}")
    lines.append(f"calls: {len(detail['calls'])}")
    for call in detail["calls"]:
        lines.extend(_call_lines(call))
    lines.append(f"child runs: {len(detail['children'])}")
    for child in detail["children"]:
        lines.append(
            f"  {child['run_id']}  {child['agent_id']}  {child['status']}  "
            f"(version {child['version']})"
        )
    decided = [r for r in detail["audit"] if r["outcome"] not in RECEIPTS]
    receipts = [r for r in detail["audit"] if r["outcome"] in RECEIPTS]
    lines.append(f"audit: {len(decided)}")
    if detail["audit_omitted"]:
        lines.append(f"  ({detail['audit_omitted']} older records are no longer kept)")
    lines.extend(line for record in decided for line in _record(record))
    lines.append(f"receipts: {len(receipts)}")
    lines.extend(line for record in receipts for line in _record(record))
    metadata = detail["metadata"]
    lines.append(f"metadata: {len(metadata)}")
    for key in sorted(metadata):
        lines.append(f"  {key}={metadata[key]}")
    # Each line is built from stored strings: escaped as a whole, none can break out of it.
    return "\n".join(printable(line) for line in lines)
