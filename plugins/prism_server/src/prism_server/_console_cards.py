"""The decision cards of a run page: one per pending call, one per call in doubt, and one to
deny every pending call at once.

A card's buttons carry ``data-action``; the console script turns them into ordinary resume
inputs. Every card has a reason field: the reason travels with the decision, and a denial's
reason is what the model is told (the kernel takes a reason on each ``reject_once`` entry, and
none on the whole-run ``deny``, so "deny all" rejects each pending call with the reason).
"""

from __future__ import annotations

import json
from typing import Any

from ._console_html import json_block, json_text, stamp, text

__all__ = ("deny_all_card", "in_doubt_card", "pending_card")

#: The longest decision reason the kernel accepts, in UTF-8 bytes (longer ones are refused).
REASON_LIMIT = 2048


def _reason_field(slug: str, hint: str, error_id: str) -> str:
    return (
        f'<label for="why-{slug}">Your reason (optional)</label>'
        f'<textarea id="why-{slug}" class="reason" data-role="reason" rows="2" '
        f'maxlength="{REASON_LIMIT}" aria-describedby="hint-{slug} {error_id}"></textarea>'
        f'<p class="hint" id="hint-{slug}">{hint}</p>'
    )


def _facts(item: dict[str, Any]) -> str:
    facts = []
    if item.get("reason"):
        facts.append(f"<dt>Why it asks</dt><dd>{text(item['reason'])}</dd>")
    if item.get("guardrail"):
        facts.append(f"<dt>Asked by</dt><dd>{text(item['guardrail'])}</dd>")
    if item.get("tool_call_id"):
        facts.append(f"<dt>Call</dt><dd><code>{text(item['tool_call_id'])}</code></dd>")
    if item.get("idempotency_key"):
        facts.append(
            f"<dt>Idempotency key</dt><dd><code>{text(item['idempotency_key'])}</code></dd>"
        )
    needed = item.get("approvers") or 1
    if needed > 1:
        given = [text(actor) for actor in item.get("approved_by") or []]
        who = f" ({', '.join(given)})" if given else ""
        facts.append(
            f"<dt>Approvals</dt><dd>{len(given)} of {text(needed)} given{who}; each approver "
            "must be a different person</dd>"
        )
    if item.get("expires_at") is not None:
        facts.append(
            f"<dt>Expires</dt><dd>{stamp(item['expires_at'])} (waiting since "
            f"{stamp(item.get('pending_since'))}); then the call is rejected</dd>"
        )
    return f"<dl>{''.join(facts)}</dl>" if facts else ""


def pending_card(item: dict[str, Any]) -> str:
    """A pending decision: the call, its redacted arguments, a reason and the choices its kind
    allows."""
    slug = text(item["approval_id"])
    kind = str(item["kind"])
    heading = f"{text(item['tool'] or 'tool')} <small>({text(kind)})</small>"
    error_id, editor_id = f"err-{slug}", f"edit-{slug}"
    deny = '<button data-action="deny" class="danger">Deny</button>'
    if kind == "elicitation":
        schema = item.get("elicitation_schema")
        choices = (
            f'<label for="{editor_id}">Your answer (JSON)</label>'
            + (f"<p>It must match this schema:</p>{json_block(schema)}" if schema else "")
            + f'<textarea id="{editor_id}" data-role="editor" aria-describedby="{error_id}">'
            "{}</textarea>"
            f'<button data-action="answer">Send answer</button>{deny}'
        )
    elif kind == "input_guardrail":
        choices = f'<button data-action="approve">Approve</button>{deny}'
    elif (item.get("approvers") or 1) > 1:
        # Each of several approvers allows this exact call once: no edit, no run-wide allow.
        choices = f'<button data-action="approve">Approve</button>{deny}'
    else:
        choices = (
            f'<button data-action="approve">Approve</button>{deny}'
            '<button data-action="approve_run" class="secondary">Approve for this run</button>'
            f'<details><summary>Edit arguments</summary><label for="{editor_id}">Arguments '
            f'(JSON)</label><textarea id="{editor_id}" data-role="editor" '
            f'aria-describedby="{error_id}">{json_text(item["arguments"])}</textarea>'
            '<button data-action="edit">Approve with these arguments</button></details>'
        )
    hint = (
        "Sent with your decision. If you deny, the model is told this reason "
        "(without one it is told &quot;Approval rejected&quot;)."
    )
    return (
        f'<section class="card" id="card-{slug}" data-approval="{slug}" '
        f'data-call="{text(item.get("tool_call_id") or "")}" aria-labelledby="h-{slug}">'
        f'<h3 id="h-{slug}">{heading}</h3>{_facts(item)}'
        f"<p>Arguments</p>{json_block(item['arguments'])}"
        f"{_reason_field(slug, hint, error_id)}{choices}"
        f'<p class="field-error error" id="{error_id}" role="alert"></p></section>'
    )


def deny_all_card(pending: list[dict[str, Any]]) -> str:
    """One reason to deny every pending call at once (``reject_once`` for each, one batch)."""
    ids = [str(item["approval_id"]) for item in pending]
    count = len(ids)
    hint = (
        "None of these calls runs. The model is told this reason for each of them and the run "
        "continues with its answer."
    )
    return (
        f'<section class="card" id="card-all" data-approvals="{text(json.dumps(ids))}" '
        'aria-labelledby="h-all">'
        f'<h3 id="h-all">All {count} calls</h3>{_reason_field("all", hint, "err-all")}'
        f'<button data-action="deny_all" class="danger">Deny all {count} calls</button>'
        '<p class="field-error error" id="err-all" role="alert"></p></section>'
    )


def in_doubt_card(item: dict[str, Any]) -> str:
    """A call a crash left in doubt, with its three resolutions."""
    call = text(item["tool_call_id"])
    key = item.get("idempotency_key")
    return (
        f'<section class="card" id="doubt-{call}" data-call="{call}" aria-labelledby="d-{call}">'
        f'<h3 id="d-{call}">{text(item["tool"])} <small>(in doubt)</small></h3>'
        "<p>The run stopped after this call was sent; nobody knows whether it ran.</p>"
        + (f"<dl><dt>Idempotency key</dt><dd><code>{text(key)}</code></dd></dl>" if key else "")
        + f"{json_block(item['arguments'])}"
        f'<label for="res-{call}">Its result (JSON), if it completed</label>'
        f'<textarea id="res-{call}" data-role="editor" aria-describedby="err-{call}">null'
        "</textarea>"
        + _reason_field(
            f"doubt-{call}",
            "If you mark it failed, the model is told this reason (without one: &quot;marked "
            "failed in the console&quot;).",
            f"err-{call}",
        )
        + '<button data-action="completed">It completed (with this result)</button>'
        '<button data-action="not_started" class="secondary">It did not start</button>'
        '<button data-action="failed" class="danger">Mark failed</button>'
        f'<p class="field-error error" id="err-{call}" role="alert"></p></section>'
    )
