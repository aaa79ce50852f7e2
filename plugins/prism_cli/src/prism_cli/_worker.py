"""``prism worker``: run what others decided, on the stores at ``--store``.

A worker process claims the runs that wait for one (decisions recorded by ``prism runs
approve``, the console, AG-UI or A2A; runs whose worker died) under a lease and runs them with
the host's agents (``--app MODULE:ATTR``: a ``resolve_agent``, or an async context manager
factory entered once for the process's life, so MCP connections and clients last as long as
the process that runs the tools). It stops on SIGINT or SIGTERM: the runs in flight are left
``running`` and the next worker continues them once their lease has expired. With ``--notify
URL`` (signed with ``PRISM_NOTIFY_SECRET``) and the notifiers of the plugins installed under
the entry-point group ``prism.notifiers``, it also delivers the stores' notifications.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from typing import Any

import anyio

from prism_core import (
    NotifierConfigError,
    PrismError,
    WebhookNotifier,
    discover_plugins,
    run_worker,
)
from prism_core.plugins import NOTIFIER_GROUP, PluginHost

from ._runs import load_app, open_operator_stores

__all__ = ("WorkerCommand", "command")


#: The environment variable that holds the secret ``--notify`` webhooks are signed with.
NOTIFY_SECRET_VARIABLE = "PRISM_NOTIFY_SECRET"


def notifiers_from(args: argparse.Namespace) -> list[Any]:
    """A webhook per ``--notify`` URL (signed with ``PRISM_NOTIFY_SECRET``) and the installed
    ``prism.notifiers`` plugins' notifiers; :class:`~prism_core.NotifierConfigError` for a
    URL or a secret that will not do."""
    found: list[Any] = []
    if args.notify:
        secret = os.environ.get(NOTIFY_SECRET_VARIABLE, "")
        if not secret:
            raise NotifierConfigError(
                f"--notify needs the signing secret in {NOTIFY_SECRET_VARIABLE}"
            )
        found.extend(WebhookNotifier(url, secret=secret) for url in args.notify)
    found.extend(PluginHost(discover_plugins(NOTIFIER_GROUP)).notifiers())
    return found


async def _serve(args: argparse.Namespace) -> int:
    notifiers = notifiers_from(args)
    resolve = load_app(args.app)
    stores = open_operator_stores(args.store)
    stop = anyio.Event()
    try:
        async with anyio.create_task_group() as group:

            async def on_signal() -> None:
                with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as received:
                    async for number in received:
                        print(
                            f"prism worker: {signal.Signals(number).name}: stopping",
                            file=sys.stderr,
                        )
                        stop.set()
                        return

            group.start_soon(on_signal)
            print(
                f"prism worker: running decided runs from {args.store} "
                f"(concurrency {args.concurrency}, lease {args.lease_ms} ms)",
                file=sys.stderr,
                flush=True,
            )
            await run_worker(
                checkpoints=stores.checkpoints,
                sessions=stores.sessions,
                resolve_agent=resolve,
                lease_ms=args.lease_ms,
                concurrency=args.concurrency,
                stop=stop,
                notifiers=notifiers,
            )
            group.cancel_scope.cancel()
    finally:
        await stores.aclose()
    return 0


class WorkerCommand:
    """``prism worker --store URL --app MODULE:ATTR [--concurrency N] [--lease-ms N]
    [--notify URL]…``."""

    help = "run decided and abandoned durable runs (stop with Ctrl-C or SIGTERM)"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add the worker's arguments."""
        parser.add_argument("--store", required=True, metavar="URL", help="the stores' URL")
        parser.add_argument(
            "--app",
            required=True,
            metavar="MODULE:ATTR",
            help="resolve_agent, or an async context manager factory yielding it",
        )
        parser.add_argument(
            "--concurrency", type=int, default=4, metavar="N", help="runs at once (default 4)"
        )
        parser.add_argument(
            "--lease-ms",
            type=int,
            default=30000,
            metavar="N",
            help="the lease a claimed run holds, in ms (default 30000)",
        )
        parser.add_argument(
            "--notify",
            action="append",
            default=[],
            metavar="URL",
            help="POST the runs' notifications to this webhook, signed with the secret in "
            "PRISM_NOTIFY_SECRET (repeatable)",
        )
        parser.add_argument("--verbose", action="store_true", help="log every run it takes")

    def run(self, args: argparse.Namespace) -> int:
        """Run the worker until a signal stops it; the exit code."""
        logging.basicConfig(
            level=logging.INFO if args.verbose else logging.WARNING,
            format="prism worker: %(levelname)s %(name)s: %(message)s",
            stream=sys.stderr,
        )
        try:
            return anyio.run(_serve, args)
        except PrismError as exc:
            print(f"prism worker: refused ({exc.code}): {exc}", file=sys.stderr)
            return 1


#: The ``worker`` command (entry point ``prism.commands`` → ``worker``).
command = WorkerCommand()
