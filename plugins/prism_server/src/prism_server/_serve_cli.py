"""``prism serve``: the subcommand this distribution adds to the ``prism`` command line.

Registered under the entry-point group ``prism.commands`` (``serve``), so ``prism`` lists it
without knowing this package. It parses the arguments, refuses an unsafe configuration before
the host's module is imported, finds the host's ``resolve_agent`` and hands over to
:mod:`prism_server._serve`. It must not import the command line's own modules: the command
is an object with ``help``, ``configure(parser)`` and ``run(args)``, nothing more.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

from ._serve import serve, start_refusal

__all__ = ("AppSpecError", "ServeCommand", "command", "load_app")


class AppSpecError(Exception):
    """``--app`` does not name an importable callable (a usage error, exit status 2)."""


def load_app(spec: str) -> Callable[..., Any]:
    """The host's ``resolve_agent`` named ``MODULE:ATTR`` (the working directory is importable,
    as for ``python -m``); :class:`AppSpecError` says what is wrong with ``spec``."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise AppSpecError(f"--app must be MODULE:ATTR, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise AppSpecError(f"--app: cannot import {module_name!r}: {exc}") from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise AppSpecError(f"--app: {module_name!r} has no attribute {attribute!r}") from None
    if not callable(target):
        raise AppSpecError(f"--app: {spec} is not callable")
    return target  # type: ignore[no-any-return]


class ServeCommand:
    """``prism serve --store URL --app MODULE:ATTR [--host 127.0.0.1] [--port 8000]
    [--workers 1] [--notify URL]…``."""

    help = "serve the approval API and console over a store (prism-runtime[server])"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add ``--store``, ``--app``, ``--host`` and ``--port``."""
        parser.add_argument(
            "--store", required=True, metavar="URL", help="checkpoint and session store"
        )
        parser.add_argument(
            "--app", required=True, metavar="MODULE:ATTR", help="the host's resolve_agent(agent_id)"
        )
        parser.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
        parser.add_argument("--port", type=int, default=8000, help="port to listen on (8000)")
        parser.add_argument(
            "--workers",
            type=int,
            default=1,
            metavar="N",
            help="decided runs run at once by the server's own workers (1; 0: none, leave "
            "them to prism worker processes)",
        )
        parser.add_argument(
            "--notify",
            action="append",
            default=[],
            metavar="URL",
            help="POST the runs' notifications to this webhook, signed with the secret in "
            "PRISM_NOTIFY_SECRET (repeatable)",
        )

    def run(self, args: argparse.Namespace) -> int:
        """Serve until interrupted; returns the exit code (2 for usage and a refusal to serve,
        1 for a store that cannot be opened); refusals are printed on stderr."""
        # Refused before the host's module is imported: importing it may have effects.
        refusal = start_refusal(args)
        if refusal is not None:
            print(refusal, file=sys.stderr)
            return 2
        if args.workers < 0:
            print("prism serve: --workers must be 0 or more", file=sys.stderr)
            return 2
        try:
            resolve_agent = load_app(args.app)
        except AppSpecError as exc:
            print(f"prism serve: {exc}", file=sys.stderr)
            return 2
        return serve(args, resolve_agent)


#: The ``serve`` command (entry point ``prism.commands`` → ``serve``).
command = ServeCommand()
