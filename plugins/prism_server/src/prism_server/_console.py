"""The console: server-rendered pages for the people who approve (``GET /``, ``/runs/{id}``,
``/effects``).

The pages read the same views as the API (and, for a run's conversation, the server's session
store); the buttons post ordinary resume inputs to the console's own ``/runs/{id}/resume``
(the API's resume on the ``"console"`` channel, so the audit says where each decision was
made) and show the resumed run's events as they stream back. Every page carries a content
security policy that lets only its own inline style and script run (a fresh nonce per page).
"""

from __future__ import annotations

import secrets
from html import escape
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from prism_core import PrismError
from prism_web import read_bounded

from ._auth import TOKEN_COOKIE
from ._console_assets import SCRIPT, STYLE
from ._console_effects import effects_page, parse_effects_query
from ._console_list import list_page, parse_query
from ._console_run import run_body
from ._errors import NotAuthenticated, PayloadTooLarge, status_for
from ._resume import resume_handler

if TYPE_CHECKING:
    from ._context import ServerContext

__all__ = ("console_routes",)


def _security_headers(nonce: str) -> dict[str, str]:
    # Only the page's own nonce-carrying <style> and <script> run: markup smuggled into a
    # stored value could not execute even if it escaped the escaping.
    policy = (
        f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; "
        "connect-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; "
        "frame-ancestors 'none'"
    )
    return {
        "content-security-policy": policy,
        "x-content-type-options": "nosniff",
        "referrer-policy": "no-referrer",
        "cache-control": "no-store",
    }


#: The console's pages, linked from each page's header.
_NAV = (
    '<nav class="pages" aria-label="Console pages"><a href="/">Runs</a> '
    '<a href="/effects">Effects</a></nav>'
)


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    nonce = secrets.token_urlsafe(18)
    html = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{escape(title)}</title><style nonce="{nonce}">{STYLE}</style></head>'
        f'<body>{body}<script nonce="{nonce}">{SCRIPT}</script></body></html>'
    )
    return HTMLResponse(html, status_code=status, headers=_security_headers(nonce))


def console_routes(ctx: ServerContext) -> list[Route]:
    """``/``, ``/runs/{run_id}``, ``/effects``, the buttons' ``POST /runs/{run_id}/resume``
    and, for the default token, ``/login``."""

    async def guarded(request: Request, render: Any) -> Response:
        try:
            scope = (await ctx.caller(request, "console")).scope
            return await render(scope)  # type: ignore[no-any-return]
        except NotAuthenticated:
            if ctx.default_auth:
                return RedirectResponse("/login", status_code=303)
            return _page("Sign in needed", "<h1>Sign in needed</h1>", 401)
        except PrismError as exc:
            status = status_for(exc)
            if status == 404:
                text = "No such run."
            elif status == 500:
                text = "The server could not complete the request."
            else:
                text = str(exc)
            body = (
                f"<h1>{escape(ctx.title)}</h1><p>{escape(text)}</p>"
                '<p><a href="/">Back to the runs</a></p>'
            )
            return _page(ctx.title, body, status)

    async def index(request: Request) -> Response:
        async def render(scope: dict[str, str] | None) -> Response:
            query = parse_query(request.query_params)
            listing = await list_page(ctx, scope, query)
            body = f"<header><h1>{escape(ctx.title)}</h1>{_NAV}</header><main>{listing}</main>"
            return _page(ctx.title, body)

        return await guarded(request, render)

    async def effects(request: Request) -> Response:
        async def render(scope: dict[str, str] | None) -> Response:
            query = parse_effects_query(request.query_params)
            listing = await effects_page(ctx, scope, query)
            title = f"Effects - {ctx.title}"
            body = (
                f"<header><h1>{escape(ctx.title)}: effects</h1>{_NAV}</header>"
                f"<main>{listing}</main>"
            )
            return _page(title, body)

        return await guarded(request, render)

    async def run_page(request: Request) -> Response:
        async def render(scope: dict[str, str] | None) -> Response:
            title, body = await run_body(ctx, request.path_params["run_id"], scope)
            return _page(title, body)

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
        Route("/runs/{run_id}/resume", resume_handler(ctx, "console"), methods=["POST"]),
        Route("/effects", effects, methods=["GET"]),
    ]
    if ctx.default_auth:
        routes.append(Route("/login", login, methods=["GET", "POST"]))
    return routes
