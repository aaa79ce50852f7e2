"""The console: server-rendered pages for the people who approve (``GET /``, ``/runs/{id}``).

The pages read the same views as the API; the buttons post ordinary resume inputs to
``/api/runs/{id}/resume`` and show the resumed run's events as they stream back.
"""

from __future__ import annotations

import json
import time
from html import escape
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from prism_core import PrismError, list_agent_runs

from ._auth import TOKEN_COOKIE
from ._body import read_bounded
from ._console_assets import SCRIPT, STYLE
from ._errors import NotAuthenticated, PayloadTooLarge, status_for
from ._views import summary_json

if TYPE_CHECKING:
    from ._context import ServerContext

__all__ = ("console_routes",)

_SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; "
    "script-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    html = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head>"
        f"<body>{body}<script>{SCRIPT}</script></body></html>"
    )
    return HTMLResponse(html, status_code=status, headers=_SECURITY_HEADERS)


def _age(epoch: float) -> str:
    seconds = max(0, int(time.time() - epoch))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _json_text(value: Any) -> str:
    return escape(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True))


def _pending_card(item: dict[str, Any]) -> str:
    heading = f"{escape(str(item['tool'] or 'tool'))} <small>({escape(str(item['kind']))})</small>"
    facts = []
    if item["reason"]:
        facts.append(f"<dt>Reason</dt><dd>{escape(item['reason'])}</dd>")
    if item["guardrail"]:
        facts.append(f"<dt>Asked by</dt><dd>{escape(item['guardrail'])}</dd>")
    error_id = f"err-{escape(item['approval_id'])}"
    editor_id = f"edit-{escape(item['approval_id'])}"
    if item["kind"] == "elicitation":
        schema = item["elicitation_schema"]
        editor = (
            f'<label for="{editor_id}">Your answer (JSON)</label>'
            + (f"<pre>{_json_text(schema)}</pre>" if schema else "")
            + f'<textarea id="{editor_id}" aria-describedby="{error_id}">{{}}</textarea>'
            '<button data-action="answer">Send answer</button>'
        )
    else:
        editor = (
            f'<details><summary>Edit arguments</summary><label for="{editor_id}">Arguments '
            f'(JSON)</label><textarea id="{editor_id}" aria-describedby="{error_id}">'
            f"{_json_text(item['arguments'])}</textarea>"
            '<button data-action="edit">Approve with these arguments</button></details>'
        )
    return (
        f'<section class="card" data-approval="{escape(item["approval_id"])}" '
        f'data-call="{escape(str(item["tool_call_id"] or ""))}" '
        f'aria-labelledby="h-{escape(item["approval_id"])}">'
        f'<h2 id="h-{escape(item["approval_id"])}">{heading}</h2>'
        f"<dl>{''.join(facts)}</dl>"
        f"<p>Arguments</p><pre>{_json_text(item['arguments'])}</pre>"
        '<button data-action="approve">Approve</button>'
        '<button data-action="deny" class="danger">Deny</button>'
        '<button data-action="approve_run" class="secondary">Approve for this run</button>'
        f"{editor}"
        f'<p class="field-error error" id="{error_id}" role="alert"></p></section>'
    )


def _in_doubt_card(item: dict[str, Any]) -> str:
    call = escape(item["tool_call_id"])
    return (
        f'<section class="card" data-call="{call}" aria-labelledby="d-{call}">'
        f'<h2 id="d-{call}">{escape(item["tool"])} <small>(in doubt)</small></h2>'
        "<p>The run stopped after this call was sent; nobody knows whether it ran.</p>"
        f"<pre>{_json_text(item['arguments'])}</pre>"
        f'<label for="res-{call}">Its result (JSON), if it completed</label>'
        f'<textarea id="res-{call}" aria-describedby="err-{call}">null</textarea>'
        '<button data-action="completed">It completed (with this result)</button>'
        '<button data-action="not_started" class="secondary">It did not start</button>'
        '<button data-action="failed" class="danger">Mark failed</button>'
        f'<p class="field-error error" id="err-{call}" role="alert"></p></section>'
    )


def console_routes(ctx: ServerContext) -> list[Route]:
    """``/``, ``/runs/{run_id}`` and, for the default token, ``/login``."""

    async def guarded(request: Request, render: Any) -> Response:
        try:
            scope = await ctx.scope(request)
            return await render(scope)  # type: ignore[no-any-return]
        except NotAuthenticated:
            if ctx.default_auth:
                return RedirectResponse("/login", status_code=303)
            return _page("Sign in needed", "<h1>Sign in needed</h1>", 401)
        except PrismError as exc:
            status = status_for(exc)
            text = "No such run." if status == 404 else str(exc)
            return _page(ctx.title, f"<h1>{escape(ctx.title)}</h1><p>{escape(text)}</p>", status)

    async def index(request: Request) -> Response:
        async def render(scope: dict[str, str] | None) -> Response:
            seen: dict[str, dict[str, Any]] = {}
            for query in ({"status": "suspended"}, {"recoverable": True}):
                page = await list_agent_runs(ctx.checkpoints, ownership=scope, limit=200, **query)
                for summary in page.runs:
                    seen.setdefault(summary.run_id, summary_json(summary))
            rows = []
            for item in sorted(seen.values(), key=lambda r: r["updated_at"]):
                if item["in_doubt"]:
                    why = f"in doubt: {', '.join(item['in_doubt'])}"
                elif item["status"] == "suspended":
                    why = f"{item['pending_decisions']} decision(s) waiting"
                else:
                    why = "stopped while running; can be continued"
                rid = escape(item["run_id"])
                rows.append(
                    f'<tr><td data-label="Run"><a href="/runs/{rid}">{rid}</a></td>'
                    f'<td data-label="Agent">{escape(item["agent_id"])}</td>'
                    f'<td data-label="Age">{_age(item["updated_at"])}</td>'
                    f'<td data-label="Why">{escape(why)}</td></tr>'
                )
            table = (
                "<table><caption>Runs waiting for a person</caption><thead><tr>"
                '<th scope="col">Run</th><th scope="col">Agent</th><th scope="col">Age</th>'
                '<th scope="col">Why</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table>"
                if rows
                else "<p>Nothing is waiting for a person.</p>"
            )
            body = f"<header><h1>{escape(ctx.title)}</h1></header><main>{table}</main>"
            return _page(ctx.title, body)

        return await guarded(request, render)

    async def run_page(request: Request) -> Response:
        async def render(scope: dict[str, str] | None) -> Response:
            detail = await ctx.detail(request.path_params["run_id"], scope)
            cards = "".join(_pending_card(item) for item in detail["pending"])
            cards += "".join(_in_doubt_card(item) for item in detail["in_doubt_calls"])
            if not cards:
                cards = "<p>Nothing here needs a decision.</p>"
            rid = escape(detail["run_id"])
            body = (
                f'<header><a href="/">&larr; {escape(ctx.title)}</a><h1>Run {rid}</h1></header>'
                f'<main id="run" data-run-id="{rid}" data-version="{detail["version"]}">'
                f"<p>Agent <strong>{escape(detail['agent_id'])}</strong>, status "
                f"<strong>{escape(detail['status'])}</strong>, version {detail['version']}.</p>"
                f'{cards}<p id="status" role="status" aria-live="polite"></p>'
                '<ol id="events" class="events" aria-label="Events of the resumed run"></ol>'
                "</main>"
            )
            return _page(f"Run {detail['run_id']} - {ctx.title}", body)

        return await guarded(request, render)

    async def login(request: Request) -> Response:
        if request.method == "POST":
            # A one-field form, parsed here so the server needs no multipart library.
            try:
                form = await read_bounded(request, 4096)
            except PayloadTooLarge:
                return _page("Sign in", "<p>The form is too large.</p>", 413)
            token = parse_qs(form.decode("utf-8", "replace")).get("token", [""])[0]
            response: Response = RedirectResponse("/", status_code=303)
            response.set_cookie(
                TOKEN_COOKIE,
                token,
                httponly=True,
                samesite="strict",
                secure=request.url.scheme == "https",
            )
            return response
        body = (
            f"<h1>{escape(ctx.title)}</h1><form method=post>"
            '<label for="token">Access token</label> '
            '<input id="token" name="token" type="password" autocomplete="current-password">'
            " <button>Sign in</button></form>"
        )
        return _page(f"Sign in - {ctx.title}", body)

    routes = [
        Route("/", index, methods=["GET"]),
        Route("/runs/{run_id}", run_page, methods=["GET"]),
    ]
    if ctx.default_auth:
        routes.append(Route("/login", login, methods=["GET", "POST"]))
    return routes
