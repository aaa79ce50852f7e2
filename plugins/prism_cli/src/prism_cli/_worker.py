"""``prism worker``: run what others decided, on the stores at ``--store``.

A worker process claims the runs that wait for one (decisions recorded by ``prism runs
approve``, the console, AG-UI or A2A; runs whose worker died) under a lease and runs them with
the host's agents (``--app MODULE:ATTR``: a ``resolve_agent``, or an async context manager
factory entered once for the process's life, so MCP connections and clients last as long as
the process that runs the tools). It stops on SIGINT or SIGTERM: the runs in flight are left
``running`` and the next worker continues them once their lease has expired.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys

import anyio

from prism_core import PrismError, run_worker

from ._runs import load_app, open_operator_stores

__all__ = ("WorkerCommand", "command")


async def _serve(args: argparse.Namespace) -> int:
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
            )
            group.cancel_scope.cancel()
    finally:
        await stores.aclose()
    return 0


class WorkerCommand:
    """``prism worker --store URL --app MODULE:ATTR [--concurrency N] [--lease-ms N]``."""

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
