"""``prism serve``: the approval server of ``prism-runtime-server``, imported only when asked.

The command lives in the core so ``prism --help`` names it; the server itself is the
``prism_server`` plugin, and without it the command says how to install it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ("add_serve_parser", "run_serve")

INSTALL_HINT = "prism serve needs the server: pip install 'prism-runtime[server]'"


def add_serve_parser(commands: Any) -> None:
    """Register ``serve --store URL --app MODULE:ATTR [--host] [--port]``."""
    serve = commands.add_parser(
        "serve", help="serve the approval API and console over a store (prism-runtime[server])"
    )
    serve.add_argument("--store", required=True, metavar="URL", help="checkpoint and session store")
    serve.add_argument(
        "--app", required=True, metavar="MODULE:ATTR", help="the host's resolve_agent(agent_id)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (8000)")


def run_serve(args: argparse.Namespace) -> int:
    """Run ``prism serve``; returns the exit code (2 for usage, a missing server and a refusal to
    serve included, 1 for a store that cannot be opened); refusals are printed on stderr."""
    from ._runs_cli import _Usage, load_app

    try:
        from prism_server._serve import serve, start_refusal
    except ImportError:
        print(INSTALL_HINT, file=sys.stderr)
        return 2
    # Refused before the host's module is imported: importing it may have effects.
    refusal = start_refusal(args)
    if refusal is not None:
        print(refusal, file=sys.stderr)
        return 2
    try:
        resolve_agent = load_app(args.app)
    except _Usage as exc:
        print(f"prism serve: {exc}", file=sys.stderr)
        return 2
    return serve(args, resolve_agent)
