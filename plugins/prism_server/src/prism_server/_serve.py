"""``prism serve``: the app over the pair of stores one ``--store`` URL opens, under uvicorn.

The pair (:func:`prism_core.open_stores`) shares one connection, so a run resumed through the
server commits each turn's session entries and checkpoint together. Each ``--notify URL`` is a
:class:`prism_core.WebhookNotifier` signing with ``PRISM_NOTIFY_SECRET``; the notifiers of the
plugins installed under the entry-point group ``prism.notifiers`` are added to them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from prism_core import (
    NotifierConfigError,
    PrismError,
    WebhookNotifier,
    discover_plugins,
    discover_store_plugins,
    open_stores,
)
from prism_core.plugins import NOTIFIER_GROUP, PluginHost

from ._auth import is_loopback, token_from_environment

__all__ = (
    "NOTIFY_SECRET_VARIABLE",
    "close_on_shutdown",
    "notifiers_from",
    "serve",
    "start_refusal",
)

#: The environment variable that holds the secret ``--notify`` webhooks are signed with.
NOTIFY_SECRET_VARIABLE = "PRISM_NOTIFY_SECRET"


def notifiers_from(args: argparse.Namespace) -> list[Any]:
    """The notifiers ``args`` ask for: a webhook per ``--notify`` URL (signed with
    ``PRISM_NOTIFY_SECRET``), and those of the installed ``prism.notifiers`` plugins;
    :class:`~prism_core.NotifierConfigError` for a URL or a secret that will not do."""
    urls = list(getattr(args, "notify", None) or ())
    found: list[Any] = []
    if urls:
        secret = os.environ.get(NOTIFY_SECRET_VARIABLE, "")
        if not secret:
            raise NotifierConfigError(
                f"--notify needs the signing secret in {NOTIFY_SECRET_VARIABLE}"
            )
        found.extend(WebhookNotifier(url, secret=secret) for url in urls)
    found.extend(PluginHost(discover_plugins(NOTIFIER_GROUP)).notifiers())
    return found


def close_on_shutdown(app: Any, *stores: Any) -> None:
    """Close ``stores`` when ``app`` shuts down, on the event loop that used them, after the
    app's own lifespan (its workers) has ended."""
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(served: Any) -> AsyncIterator[None]:
        try:
            async with inner(served):
                yield
        finally:
            for store in stores:
                closer = getattr(store, "aclose", None)
                if closer is not None:
                    await closer()

    app.router.lifespan_context = lifespan


def start_refusal(args: argparse.Namespace) -> str | None:
    """Why ``prism serve`` must not start with ``args``, or ``None`` when it may."""
    if token_from_environment() is None and not is_loopback(args.host):
        return (
            f"prism serve: refusing to listen on {args.host} without PRISM_SERVER_TOKEN "
            "(set a token, or bind to 127.0.0.1)"
        )
    if getattr(args, "notify", None):
        secret = os.environ.get(NOTIFY_SECRET_VARIABLE, "")
        if not secret:
            return f"prism serve: --notify needs the signing secret in {NOTIFY_SECRET_VARIABLE}"
        for url in args.notify:
            try:
                WebhookNotifier(url, secret=secret)
            except NotifierConfigError as exc:
                return f"prism serve: --notify {url!r}: {exc.message}"
    return None


def serve(args: argparse.Namespace, resolve_agent: Any) -> int:
    """Run the server for ``prism serve`` until interrupted; returns the exit code.

    A refusal to start is printed on stderr: 2 for a configuration that must not be served
    (:func:`start_refusal`), 1 for a store that cannot be opened.
    """
    # Deferred: ``prism`` imports this module to offer the ``serve`` subcommand; uvicorn and
    # the app (Starlette) load only in a process that serves.
    import uvicorn

    from ._app import create_app

    refusal = start_refusal(args)
    if refusal is not None:
        print(refusal, file=sys.stderr)
        return 2
    try:
        notifiers = notifiers_from(args)
    except PrismError as exc:
        print(f"prism serve: {exc}", file=sys.stderr)
        return 2
    try:
        # One URL, one pair: both stores on one connection (or engine, or client), so a turn
        # of a run the server resumes commits its entries and checkpoint together.
        stores = open_stores(args.store, plugins=discover_store_plugins(args.store))
    except (PrismError, ValueError) as exc:
        print(f"prism serve: cannot open --store: {exc}", file=sys.stderr)
        return 1
    app = create_app(
        stores,
        resolve_agent=resolve_agent,
        workers=getattr(args, "workers", 1),
        notifiers=notifiers,
    )
    close_on_shutdown(app, stores)
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return 0
