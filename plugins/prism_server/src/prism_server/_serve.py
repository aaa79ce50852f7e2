"""``prism serve``: the app over the pair of stores one ``--store`` URL opens, under uvicorn.

The pair (:func:`prism_core.open_stores`) shares one connection, so a run resumed through the
server commits each turn's session entries and checkpoint together.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ._auth import is_loopback, token_from_environment

__all__ = ("close_on_shutdown", "serve", "start_refusal")


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
    return None


def serve(args: argparse.Namespace, resolve_agent: Any) -> int:
    """Run the server for ``prism serve`` until interrupted; returns the exit code.

    A refusal to start is printed on stderr: 2 for a configuration that must not be served
    (:func:`start_refusal`), 1 for a store that cannot be opened.
    """
    import uvicorn

    from prism_core import PrismError, discover_store_plugins, open_stores

    from ._app import create_app

    refusal = start_refusal(args)
    if refusal is not None:
        print(refusal, file=sys.stderr)
        return 2
    try:
        # One URL, one pair: both stores on one connection (or engine, or client), so a turn
        # of a run the server resumes commits its entries and checkpoint together.
        stores = open_stores(args.store, plugins=discover_store_plugins(args.store))
    except (PrismError, ValueError) as exc:
        print(f"prism serve: cannot open --store: {exc}", file=sys.stderr)
        return 1
    app = create_app(stores, resolve_agent=resolve_agent, workers=getattr(args, "workers", 1))
    close_on_shutdown(app, stores)
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return 0
