"""A run page's calls and child runs: what the run did, call by call, and what each sub-agent
run its calls started did in turn.

The calls come from the run detail (``calls``: arguments, idempotency key, status, result,
approvers); each child run is read the same way (its own detail, under the caller's scope)
and shown with its calls, linked to its own page. Every stored value is escaped
(:mod:`._console_html`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._console_html import json_block, text

__all__ = ("calls_section", "children_section")


def _calls_table(calls: Sequence[Mapping[str, Any]], caption: str) -> str:
    rows = []
    for call in calls:
        status = text(call.get("status") or "no result yet")
        outcome = (
            f'<span class="error-text">{text(call["error"])}</span>'
            if call.get("error")
            else json_block(call.get("result"))
            if call.get("status")
            else "—"
        )
        approved = ", ".join(text(actor) for actor in call.get("approved_by") or ()) or "—"
        rows.append(
            f'<tr><td data-label="Call">{text(call.get("tool"))} '
            f"<code>{text(call.get('tool_call_id'))}</code></td>"
            f'<td data-label="Status"><span class="status status-{status}">{status}</span></td>'
            f'<td data-label="Approved by">{approved}</td>'
            f'<td data-label="Key"><code>{text(call.get("idempotency_key"))}</code></td>'
            f'<td data-label="Arguments">{json_block(call.get("arguments"))}</td>'
            f'<td data-label="Result">{outcome}</td></tr>'
        )
    return (
        f'<table class="calls"><caption>{caption}</caption><thead><tr>'
        '<th scope="col">Call</th><th scope="col">Status</th><th scope="col">Approved by</th>'
        '<th scope="col">Key</th><th scope="col">Arguments</th><th scope="col">Result</th>'
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def calls_section(detail: Mapping[str, Any]) -> str:
    """The run's calls (nothing when it made none)."""
    calls = detail.get("calls") or []
    if not calls:
        return ""
    return (
        '<section class="calls" aria-labelledby="calls-h"><h2 id="calls-h">Calls</h2>'
        f"{_calls_table(calls, 'Every tool call of this run, in order')}</section>"
    )


async def children_section(ctx: Any, detail: Mapping[str, Any], scope: Any) -> str:
    """The sub-agent runs the run's calls started, each with its calls (nothing when none)."""
    children = detail.get("children") or []
    if not children:
        return ""
    parts = []
    for child in children:
        rid = text(child["run_id"])
        found = await ctx.detail(str(child["run_id"]), scope)
        calls = found.get("calls") or []
        table = (
            _calls_table(calls, f"Calls of sub-agent run {rid}")
            if calls
            else "<p>It made no tool call.</p>"
        )
        status = text(child["status"])
        parts.append(
            f'<article class="child" aria-label="Sub-agent run {rid}">'
            f'<h3><a href="/runs/{rid}">{rid}</a> <small>{text(child["agent_id"])}</small> '
            f'<span class="status status-{status}">{status}</span></h3>{table}</article>'
        )
    return (
        '<section class="children" aria-labelledby="children-h">'
        f'<h2 id="children-h">Sub-agent runs</h2>{"".join(parts)}</section>'
    )
