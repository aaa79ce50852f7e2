"""The console's Effects page (``GET /effects``): the effect ledger, filtered and paged.

The filters are those of ``prism effects list`` (tool, approver, argument values, idempotency
key, run, status, time), read from the query string and handed to
:func:`prism_core.list_effects` under the caller's scope; each row links to its run. A store
that keeps no ledger gets a page that says so. Every stored value is escaped
(:mod:`._console_html`).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import attrs

from prism_core import EFFECT_STATUSES, EffectLedgerUnsupportedError, EffectRecord, list_effects

from ._console_html import json_block, stamp, text
from ._errors import BadRequest

__all__ = ("EffectsQuery", "effects_page", "parse_effects_query")

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
MAX_FIELD_CHARS = 512
#: Argument filters one query may carry.
MAX_ARGUMENTS = 8


@attrs.frozen
class EffectsQuery:
    """The Effects page's filters and page."""

    tool: str | None = None
    actor: str | None = None
    arguments: tuple[tuple[str, Any], ...] = ()
    key: str | None = None
    run: str | None = None
    status: str | None = None
    since: str | None = None
    until: str | None = None
    limit: int = DEFAULT_LIMIT
    cursor: str | None = None

    def params(self) -> list[tuple[str, str]]:
        """The filters as query parameters (the empty ones left out)."""
        found: list[tuple[str, str]] = []
        for name in ("tool", "actor", "key", "run", "status", "since", "until"):
            value = getattr(self, name)
            if value:
                found.append((name, value))
        found.extend(("arg", f"{name}={_raw(value)}") for name, value in self.arguments)
        if self.limit != DEFAULT_LIMIT:
            found.append(("limit", str(self.limit)))
        return found


def _raw(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _field(params: Any, name: str) -> str | None:
    value = (params.get(name) or "").strip() or None
    if value is not None and len(value) > MAX_FIELD_CHARS:
        raise BadRequest(f"{name} must be at most {MAX_FIELD_CHARS} characters")
    return value


def _epoch(value: str | None, name: str) -> float | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise BadRequest(f"{name} must be an ISO 8601 date or time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def parse_effects_query(params: Any) -> EffectsQuery:
    """The page's query parameters, checked; :class:`BadRequest` for a bad one."""
    status = _field(params, "status")
    if status is not None and status not in EFFECT_STATUSES:
        raise BadRequest(f"status must be one of {', '.join(EFFECT_STATUSES)}")
    arguments: list[tuple[str, Any]] = []
    for raw in params.getlist("arg") if hasattr(params, "getlist") else ():
        raw = raw.strip()
        if not raw:
            continue
        name, sep, value = raw.partition("=")
        if not sep or not name or len(raw) > MAX_FIELD_CHARS:
            raise BadRequest("each argument filter is NAME=VALUE (VALUE as JSON, else text)")
        try:
            arguments.append((name, json.loads(value)))
        except ValueError:
            arguments.append((name, value))
    if len(arguments) > MAX_ARGUMENTS:
        raise BadRequest(f"at most {MAX_ARGUMENTS} argument filters")
    limit_text = params.get("limit") or str(DEFAULT_LIMIT)
    if not limit_text.isdigit() or not 1 <= int(limit_text) <= MAX_LIMIT:
        raise BadRequest(f"limit must be a whole number from 1 to {MAX_LIMIT}")
    query = EffectsQuery(
        tool=_field(params, "tool"),
        actor=_field(params, "actor"),
        arguments=tuple(arguments),
        key=_field(params, "key"),
        run=_field(params, "run"),
        status=status,
        since=_field(params, "since"),
        until=_field(params, "until"),
        limit=int(limit_text),
        cursor=params.get("cursor") or None,
    )
    _epoch(query.since, "since")
    _epoch(query.until, "until")
    return query


def _form(query: EffectsQuery) -> str:
    def field(name: str, label: str, value: str | None, hint: str = "") -> str:
        return (
            f'<div class="field"><label for="e-{name}">{label}</label>'
            f'<input id="e-{name}" name="{name}" value="{text(value)}" '
            f'maxlength="{MAX_FIELD_CHARS}" autocomplete="off"{hint}></div>'
        )

    statuses = ['<option value="">any</option>'] + [
        f'<option value="{name}"{" selected" if query.status == name else ""}>{name}</option>'
        for name in EFFECT_STATUSES
    ]
    args = [f"{name}={_raw(value)}" for name, value in query.arguments] or [""]
    arg_fields = "".join(
        f'<input name="arg" value="{text(arg)}" maxlength="{MAX_FIELD_CHARS}" '
        f'aria-label="Argument filter {index + 1}" placeholder="order=A-3">'
        for index, arg in enumerate([*args, ""][:MAX_ARGUMENTS])
    )
    return (
        '<form method="get" action="/effects" class="filters" role="search" '
        'aria-label="Filter effects">'
        + field("tool", "Tool", query.tool)
        + field("actor", "Approved by", query.actor)
        + f'<div class="field"><span class="label">Arguments</span>{arg_fields}</div>'
        + field("key", "Idempotency key", query.key)
        + field("run", "Run", query.run)
        + '<div class="field"><label for="e-status">Status</label>'
        f'<select id="e-status" name="status">{"".join(statuses)}</select></div>'
        + field("since", "Started since", query.since, ' placeholder="2026-12-01T09:00Z"')
        + field("until", "Started before", query.until)
        + f'<input type="hidden" name="limit" value="{query.limit}">'
        '<div class="field"><button type="submit">Show effects</button> '
        '<a href="/effects">Clear</a></div></form>'
    )


def _row(effect: EffectRecord) -> str:
    run = text(effect.run_id)
    approved = ", ".join(text(actor) for actor in effect.approved_by) or "—"
    parent = (
        f' <small>(sub-agent of <a href="/runs/{text(effect.parent_run_id)}">'
        f"{text(effect.parent_run_id)}</a>)</small>"
        if effect.parent_run_id
        else ""
    )
    status = text(effect.status)
    return (
        f'<tr><td data-label="Started">{stamp(effect.started_at)}</td>'
        f'<td data-label="Status"><span class="status status-{status}">{status}</span></td>'
        f'<td data-label="Tool">{text(effect.tool_name)} <code>{text(effect.tool_call_id)}</code>'
        f"</td>"
        f'<td data-label="Run"><a href="/runs/{run}">{run}</a>{parent}</td>'
        f'<td data-label="Approved by">{approved}</td>'
        f'<td data-label="Key"><code>{text(effect.idempotency_key)}</code></td>'
        f'<td data-label="Arguments">{json_block(effect.arguments)}</td>'
        f'<td data-label="Executed by"><small>{text(effect.executed_by)}</small></td></tr>'
    )


async def effects_page(ctx: Any, scope: dict[str, str] | None, query: EffectsQuery) -> str:
    """The Effects page's body: the filters, one page of effect records, the pager."""
    try:
        page = await list_effects(
            ctx.checkpoints,
            tool_name=query.tool,
            actor=query.actor,
            arguments=dict(query.arguments) or None,
            idempotency_key=query.key,
            run_id=query.run,
            status=query.status,
            since=_epoch(query.since, "since"),
            until=_epoch(query.until, "until"),
            ownership=scope,
            limit=query.limit,
            cursor=query.cursor,
        )
    except EffectLedgerUnsupportedError:
        return f"{_form(query)}<p>This store keeps no effect ledger.</p>"
    if page.effects:
        table = (
            '<table class="effects"><caption>Effects, oldest first</caption><thead><tr>'
            '<th scope="col">Started</th><th scope="col">Status</th><th scope="col">Tool</th>'
            '<th scope="col">Run</th><th scope="col">Approved by</th><th scope="col">Key</th>'
            '<th scope="col">Arguments</th><th scope="col">Executed by</th></tr></thead><tbody>'
            + "".join(_row(effect) for effect in page.effects)
            + "</tbody></table>"
        )
    else:
        table = "<p>No effects match.</p>"
    pager = []
    if page.cursor is not None:
        href = "/effects?" + urlencode([*query.params(), ("cursor", page.cursor)])
        pager.append(f'<a rel="next" href="{text(href)}">Next page</a>')
    if query.cursor is not None:
        pager.append(f'<a href="{text("/effects?" + urlencode(query.params()))}">First page</a>')
    nav = f'<nav class="pager" aria-label="Pages">{" ".join(pager)}</nav>' if pager else ""
    return f"{_form(query)}{table}{nav}"
