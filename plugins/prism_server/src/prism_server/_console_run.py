"""A run's page (``GET /runs/{run_id}``): its facts, its result once it ended, the decisions it
waits for, the conversation that led there and the audit of who decided what.

The pending calls come from the run detail (the API's JSON, ``prism_core.inspect_agent_run``);
the conversation from the branch the checkpoint points at, read at the same version as the
detail. The audit is the detail's ``audit`` list when the kernel records one: the decisions,
expiries, and the receipts of the calls that ran (who ran them, on which channel).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ._console_calls import calls_section, children_section
from ._console_cards import deny_all_card, in_doubt_card, pending_card
from ._console_conversation import read_conversation, redacted
from ._console_html import (
    STATUS_WORDS,
    TERMINAL_STATUSES,
    json_block,
    long_text,
    stamp,
    text,
)
from ._errors import RunNotFound

__all__ = ("OUTCOME_WORDS", "audit_section", "run_body")

#: How the audit words each decision outcome (the kernel's names are shown beside them).
OUTCOME_WORDS = {
    "allow_once": "approved",
    "allow_for_run": "approved for this run",
    "reject_once": "denied",
    "reject_for_run": "denied for this run",
    "approve": "approved",
    "deny": "run denied",
    "completed": "marked completed",
    "not_started": "marked not started",
    "failed": "marked failed",
    "expired": "expired (rejected)",
    "executed": "ran",
    "execution_failed": "ran and failed",
    "in_doubt": "outcome unknown after a crash",
}
#: Reads of the detail and the checkpoint that may disagree (a decision landed in between)
#: before the page says so.
_READ_ATTEMPTS = 3


def audit_section(detail: Mapping[str, Any]) -> str:
    """The audit table from ``detail["audit"]`` (nothing when the detail has no such key)."""
    if "audit" not in detail:
        return ""
    records = detail["audit"]
    head = '<section class="audit" aria-labelledby="audit-h"><h2 id="audit-h">Decisions</h2>'
    if not isinstance(records, list) or not records:
        return f"{head}<p>No decision is recorded for this run yet.</p></section>"
    rows = []
    for record in records:
        item = record if isinstance(record, Mapping) else {"outcome": record}
        outcome = str(item.get("outcome") or "")
        words = OUTCOME_WORDS.get(outcome, outcome)
        call = text(item.get("tool_name") or "")
        if item.get("tool_call_id"):
            call += f" <code>{text(item['tool_call_id'])}</code>"
        extra = []
        if item.get("version") is not None:
            extra.append(f"version {text(item['version'])}")
        if item.get("arguments_hash"):
            extra.append(f"arguments <code>{text(item['arguments_hash'])}</code>")
        if item.get("approval_id"):
            extra.append(f"approval <code>{text(item['approval_id'])}</code>")
        if item.get("channel"):
            extra.append(f"via {text(item['channel'])}")
        rows.append(
            f'<tr><td data-label="When">{stamp(item.get("decided_at"))}</td>'
            f'<td data-label="Who">{text(item.get("actor") or "unknown")}</td>'
            f'<td data-label="Call">{call}</td>'
            f'<td data-label="Decision"><strong>{text(words)}</strong>'
            + (f" <small>({text(outcome)})</small>" if words != outcome else "")
            + "</td>"
            f'<td data-label="Reason">{text(item.get("reason") or "—")}</td>'
            f'<td data-label="Details"><small>{"; ".join(extra)}</small></td></tr>'
        )
    return (
        f"{head}<table><caption>Who decided what, when and why</caption><thead><tr>"
        '<th scope="col">When</th><th scope="col">Who</th><th scope="col">Call</th>'
        '<th scope="col">Decision</th><th scope="col">Reason</th>'
        f'<th scope="col">Details</th></tr></thead><tbody>{"".join(rows)}</tbody></table>'
        "</section>"
    )


def _where(detail: Mapping[str, Any]) -> str:
    status = detail["status"]
    if status == "suspended":
        return f"It waits for {text(detail['pending_decisions'])} decision(s)."
    if detail["in_doubt_calls"]:
        return (
            f"It stopped with {len(detail['in_doubt_calls'])} call(s) in doubt: "
            "say below what happened to each."
        )
    if status == "running":
        lease = detail.get("lease_expires_at")
        if lease is None:
            return "It is running, or it stopped with no worker holding it (it can be continued)."
        if lease <= time.time():
            return f"Its worker's lease ran out at {stamp(lease)}; it can be continued."
        return f"A worker holds it; its lease runs until {stamp(lease)}."
    return ""


def _result_section(
    detail: Mapping[str, Any], state: Any, answer: str | None, redactor: Any
) -> str:
    status = detail["status"]
    sentence = {
        "succeeded": "The run succeeded.",
        "failed": "The run failed.",
        "aborted": "The run was aborted.",
        "denied": "The run was denied; nothing more ran.",
    }[status]
    parts = [f'<p><span class="status status-{text(status)}">{text(status)}</span> {sentence}</p>']
    if answer:
        parts.append(f'<h3>Final answer</h3><div class="answer">{long_text(answer)}</div>')
    output = getattr(state, "output", None)
    if output is not None:
        parts.append(f"<h3>Structured output</h3>{json_block(redacted(output, redactor))}")
    facts = []
    if detail.get("stop_reason"):
        stop = text(detail["stop_reason"])
        detail_text = getattr(state, "stop_detail", None)
        if detail_text:
            stop += f" ({text(redacted(detail_text, redactor))})"
        facts.append(f"<dt>Stop reason</dt><dd>{stop}</dd>")
    error = detail.get("error")
    if isinstance(error, Mapping):
        code = f"<code>{text(error.get('code'))}</code> " if error.get("code") else ""
        message = text(redacted(error.get("message"), redactor))
        facts.append(f'<dt>Error</dt><dd class="error-text">{code}{message}</dd>')
    if facts:
        parts.append(f"<dl>{''.join(facts)}</dl>")
    return (
        '<section class="result" aria-labelledby="result-h"><h2 id="result-h">Result</h2>'
        f"{''.join(parts)}</section>"
    )


def _decisions(detail: Mapping[str, Any]) -> str:
    pending = detail["pending"]
    cards = "".join(pending_card(item) for item in pending)
    if len(pending) > 1:
        cards += deny_all_card(pending)
    cards += "".join(in_doubt_card(item) for item in detail["in_doubt_calls"])
    if not cards:
        return (
            "" if detail["status"] in TERMINAL_STATUSES else "<p>Nothing here needs a decision.</p>"
        )
    return (
        '<section class="decide" aria-labelledby="decide-h">'
        f'<h2 id="decide-h">Waiting for your decision</h2>{cards}</section>'
    )


async def _consistent_read(
    ctx: Any, run_id: str, scope: dict[str, str] | None
) -> tuple[Any, Any, bool]:
    """The run's detail and its checkpoint at one version (``False`` when a decision kept
    landing between the two reads)."""
    for _ in range(_READ_ATTEMPTS):
        found = await ctx.lifecycle.status({"run_id": run_id}, ownership=scope)
        if found is None:
            raise RunNotFound("no such run")
        detail = await ctx.detail(run_id, scope)
        if detail["version"] == found.version:
            return detail, found, True
    return detail, found, False


async def run_body(ctx: Any, run_id: str, scope: dict[str, str] | None) -> tuple[str, str]:
    """The run page's title and body."""
    detail, found, same = await _consistent_read(ctx, run_id, scope)
    state = found.state
    agent = await ctx.agent_for(state.agent_id, state.definition_revision)
    redactor = getattr(agent, "redactor", None)
    waiting = {
        str(item["tool_call_id"]): str(item["approval_id"])
        for item in detail["pending"]
        if item.get("tool_call_id")
    }
    in_doubt = {str(item["tool_call_id"]) for item in detail["in_doubt_calls"]}
    conversation = await read_conversation(
        ctx.sessions, state, redactor, waiting=waiting, in_doubt=in_doubt
    )
    rid = text(detail["run_id"])
    status = str(detail["status"])
    counters = detail["counters"]
    facts = (
        '<dl class="facts">'
        f"<dt>Agent</dt><dd>{text(detail['agent_id'])}</dd>"
        f'<dt>Status</dt><dd><span class="status status-{text(status)}">{text(status)}</span> '
        f"{text(STATUS_WORDS.get(status, '')) if status == 'suspended' else ''}</dd>"
        f"<dt>Updated</dt><dd>{stamp(detail['updated_at'])}</dd>"
        f"<dt>Version</dt><dd>{text(detail['version'])}</dd>"
        f"<dt>Session</dt><dd><code>{text(detail['session_id'])}</code></dd>"
        + (
            f'<dt>Sub-agent of</dt><dd><a href="/runs/{text(detail["parent_run_id"])}">'
            f"{text(detail['parent_run_id'])}</a></dd>"
            if detail.get("parent_run_id")
            else ""
        )
        + f"<dt>Work so far</dt><dd>{text(counters['turns'])} turn(s), "
        f"{text(counters['tool_calls'])} tool call(s)</dd></dl>"
    )
    where = _where(detail)
    stale = (
        "" if same else '<p class="notice">The run changed while this page was read; reload it.</p>'
    )
    result = (
        _result_section(detail, state, conversation.answer, redactor)
        if status in TERMINAL_STATUSES
        else ""
    )
    # A finished run is read for its outcome (who decided, then the conversation); a waiting
    # one for the context of its decision (the conversation, then earlier decisions).
    audit = audit_section(detail)
    talk = (
        '<section aria-labelledby="conv-h"><h2 id="conv-h">Conversation</h2>'
        f"{conversation.html}</section>"
    )
    work = calls_section(detail) + await children_section(ctx, detail, scope)
    later = f"{audit}{work}{talk}" if status in TERMINAL_STATUSES else f"{talk}{work}{audit}"
    body = (
        f'<header><a href="/">&larr; {text(ctx.title)}</a>'
        f"<h1>Run <code>{rid}</code></h1></header>"
        f'<main id="run" data-run-id="{rid}" data-version="{text(detail["version"])}">'
        f"{stale}{facts}{f'<p>{where}</p>' if where else ''}{result}{_decisions(detail)}"
        '<p id="status" role="status" aria-live="polite"></p>'
        '<ol id="events" class="events" aria-label="Events of the resumed run"></ol>'
        f"{later}</main>"
    )
    return f"Run {detail['run_id']} - {ctx.title}", body
