"""The console's runs list (``GET /``): every run the caller may see, filtered and paged.

Only the runs no other run started are listed unless ``subagents=true`` (a sub-agent run is
on its parent's page). Status and recoverable filter in the store (``list_agent_runs``); the
agent filter keeps the matching runs of each store page the list reads, so a page the agent
filter thins out reads further store pages, up to :data:`MAX_STORE_PAGES`, and then says how
far it looked. A page never stops inside a store page, so its cursor is always one the store
handed out.
"""

from __future__ import annotations

import time
from typing import Any, cast
from urllib.parse import urlencode

import attrs

from prism_core import AgentRunSummary, RunStatus, list_agent_runs
from prism_core.stores import UnreadableRecord

from ._console_html import STATUS_WORDS, age, stamp, text
from ._errors import BadRequest
from ._views import summary_json

__all__ = ("MAX_STORE_PAGES", "RunsQuery", "list_page", "parse_query")

RUN_STATUSES = tuple(STATUS_WORDS)
#: Store pages one list page reads at most while the agent filter leaves it short.
MAX_STORE_PAGES = 20
DEFAULT_LIMIT = 50
MAX_LIMIT = 200
MAX_AGENT_CHARS = 256


@attrs.frozen
class RunsQuery:
    """The list's filters and page: ``status``, ``agent``, ``recoverable``, ``limit``,
    ``cursor``."""

    status: str | None = None
    agent: str | None = None
    recoverable: bool | None = None
    limit: int = DEFAULT_LIMIT
    cursor: str | None = None
    #: Sub-agent runs listed too (by default only the runs no other run started).
    subagents: bool = False

    def filters(self) -> dict[str, str]:
        """The filters as query parameters (the empty ones left out)."""
        found = {"status": self.status or "", "agent": self.agent or ""}
        if self.subagents:
            found["subagents"] = "true"
        if self.recoverable is not None:
            found["recoverable"] = "true" if self.recoverable else "false"
        if self.limit != DEFAULT_LIMIT:
            found["limit"] = str(self.limit)
        return {key: value for key, value in found.items() if value}


def parse_query(params: Any) -> RunsQuery:
    """The list's query parameters, checked; :class:`BadRequest` for a bad one."""
    status = params.get("status") or None
    if status is not None and status not in RUN_STATUSES:
        raise BadRequest(f"status must be one of {', '.join(RUN_STATUSES)}")
    agent = (params.get("agent") or "").strip() or None
    if agent is not None and len(agent) > MAX_AGENT_CHARS:
        raise BadRequest(f"agent must be at most {MAX_AGENT_CHARS} characters")
    recoverable_text = params.get("recoverable") or ""
    if recoverable_text not in ("", "true", "false"):
        raise BadRequest("recoverable must be true or false")
    limit_text = params.get("limit") or str(DEFAULT_LIMIT)
    if not limit_text.isdigit() or not 1 <= int(limit_text) <= MAX_LIMIT:
        raise BadRequest(f"limit must be a whole number from 1 to {MAX_LIMIT}")
    subagents = params.get("subagents") or ""
    if subagents not in ("", "true", "false"):
        raise BadRequest("subagents must be true or false")
    return RunsQuery(
        status=status,
        agent=agent,
        recoverable=None if not recoverable_text else recoverable_text == "true",
        limit=int(limit_text),
        cursor=params.get("cursor") or None,
        subagents=subagents == "true",
    )


def _why(item: dict[str, Any]) -> str:
    if item["in_doubt"]:
        return f"in doubt: {', '.join(item['in_doubt'])}"
    if item["status"] == "suspended":
        return f"{item['pending_decisions']} decision(s) waiting"
    if item["status"] == "running":
        lease = item["lease_expires_at"]
        if lease is None:
            return "stopped while running; can be continued"
        if lease <= time.time():
            return "its worker's lease ran out; can be continued"
        return "a worker is running it"
    return "nothing (it ended)"


@attrs.frozen
class _Found:
    runs: list[AgentRunSummary]
    cursor: str | None
    stopped_early: bool
    unreadable: list[UnreadableRecord]


async def _read(ctx: Any, scope: dict[str, str] | None, query: RunsQuery) -> _Found:
    """The runs of one list page, its next cursor, whether it stopped looking early, and the
    records the store could not read on the way."""
    runs: list[AgentRunSummary] = []
    unreadable: list[UnreadableRecord] = []
    cursor = query.cursor
    for _ in range(MAX_STORE_PAGES):
        page = await list_agent_runs(
            ctx.checkpoints,
            ownership=scope,
            status=cast(RunStatus | None, query.status),
            recoverable=query.recoverable,
            limit=query.limit,
            cursor=cursor,
            top_level=None if query.subagents else True,
        )
        runs.extend(run for run in page.runs if query.agent is None or run.agent_id == query.agent)
        unreadable.extend(page.unreadable)
        cursor = page.cursor
        if cursor is None or len(runs) >= query.limit:
            return _Found(runs, cursor, False, unreadable)
    return _Found(runs, cursor, True, unreadable)


def _unreadable_note(unreadable: list[UnreadableRecord]) -> str:
    """Records the store could not decode: named, so an operator can repair them, never hidden."""
    if not unreadable:
        return ""
    items = "".join(
        f"<li><code>{text(item.key)}</code>: {text(item.reason)}</li>" for item in unreadable
    )
    return (
        f'<section class="note unreadable" aria-label="Unreadable records"><p>{len(unreadable)} '
        "stored record(s) on this page could not be read and are left out of the list:</p>"
        f"<ul>{items}</ul></section>"
    )


def _filters_form(query: RunsQuery) -> str:
    options = ['<option value="">any</option>'] + [
        f'<option value="{name}"{" selected" if query.status == name else ""}>'
        f"{name} ({STATUS_WORDS[name]})</option>"
        if name == "suspended"
        else f'<option value="{name}"{" selected" if query.status == name else ""}>{name}</option>'
        for name in RUN_STATUSES
    ]
    chosen = {None: "", True: "true", False: "false"}[query.recoverable]
    filtered = any(name != "limit" for name in query.filters())
    recoverable = "".join(
        f'<option value="{value}"{" selected" if chosen == value else ""}>{label}</option>'
        for value, label in (("", "either"), ("true", "yes: no worker holds it"), ("false", "no"))
    )
    return (
        f'<details class="filter-box"{" open" if filtered else ""}><summary>Filter runs</summary>'
        '<form method="get" action="/" class="filters" role="search" aria-label="Filter runs">'
        '<div class="field"><label for="f-status">Status</label>'
        f'<select id="f-status" name="status">{"".join(options)}</select></div>'
        '<div class="field"><label for="f-agent">Agent</label><input id="f-agent" name="agent" '
        f'value="{text(query.agent)}" maxlength="{MAX_AGENT_CHARS}" autocomplete="off"></div>'
        '<div class="field"><label for="f-recoverable">Can be continued</label>'
        f'<select id="f-recoverable" name="recoverable">{recoverable}</select></div>'
        '<div class="field"><label><input type="checkbox" name="subagents" value="true"'
        f"{' checked' if query.subagents else ''}> Runs started by other runs too</label></div>"
        f'<input type="hidden" name="limit" value="{query.limit}">'
        '<div class="field"><button type="submit">Show runs</button> <a href="/">Clear</a></div>'
        "</form></details>"
        '<nav class="views" aria-label="Common views"><a href="/?status=suspended">Waiting for a '
        'decision</a> <a href="/?recoverable=true">Stopped, can be continued</a> '
        '<a href="/?status=failed">Failed</a> <a href="/">All runs</a></nav>'
    )


def _row(item: dict[str, Any]) -> str:
    rid = text(item["run_id"])
    status = text(item["status"])
    return (
        f'<tr><td data-label="Run"><a href="/runs/{rid}">{rid}</a></td>'
        f'<td data-label="Agent">{text(item["agent_id"])}</td>'
        f'<td data-label="Status"><span class="status status-{status}">{status}</span></td>'
        f'<td data-label="Updated">{age(item["updated_at"])} ago '
        f"<small>{stamp(item['updated_at'])}</small></td>"
        f'<td data-label="Needs">{text(_why(item))}</td></tr>'
    )


async def list_page(ctx: Any, scope: dict[str, str] | None, query: RunsQuery) -> str:
    """The list page's body: the filters, one page of runs (newest update first), the pager."""
    found = await _read(ctx, scope, query)
    cursor, stopped_early = found.cursor, found.stopped_early
    items = sorted((summary_json(run) for run in found.runs), key=lambda r: -r["updated_at"])
    described = ", ".join(
        f"{name} {text(value)}" for name, value in query.filters().items() if name != "limit"
    )
    if items:
        caption = "Runs" + (f" ({described})" if described else "")
        table = (
            f"<table><caption>{caption}</caption><thead><tr>"
            '<th scope="col">Run</th><th scope="col">Agent</th><th scope="col">Status</th>'
            '<th scope="col">Updated</th><th scope="col">Needs</th></tr></thead><tbody>'
            + "".join(_row(item) for item in items)
            + "</tbody></table>"
        )
    elif query.status == "suspended" and query.agent is None and query.cursor is None:
        table = "<p>Nothing is waiting for a decision.</p>"
    else:
        table = "<p>No runs match" + (f" ({described})" if described else "") + ".</p>"
    pager = []
    if stopped_early:
        pager.append(
            f'<p class="note">This page looked through {MAX_STORE_PAGES} store pages of '
            f"{query.limit} runs for agent {text(query.agent)}; more may match further on.</p>"
        )
    if cursor is not None:
        href = "/?" + urlencode({**query.filters(), "cursor": cursor})
        pager.append(f'<a rel="next" href="{text(href)}">Next page</a>')
    if query.cursor is not None:
        first = "/?" + urlencode(query.filters()) if query.filters() else "/"
        pager.append(f'<a href="{text(first)}">First page</a>')
    nav = f'<nav class="pager" aria-label="Pages">{" ".join(pager)}</nav>' if pager else ""
    return f"{_filters_form(query)}{_unreadable_note(found.unreadable)}{table}{nav}"
