"""The ``prism`` console script."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ("main",)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``prism``; returns the process exit code."""
    from ._installed import print_plugins, version_text
    from ._runs_cli import add_runs_parser, run_runs
    from ._serve_cli import add_serve_parser, run_serve

    parser = argparse.ArgumentParser(prog="prism", description="Prism agent runtime tools.")
    parser.add_argument("--version", action="version", version=version_text())
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo",
        help="crash-recovery demo: kill a worker mid-run, continue the same run elsewhere",
    )
    demo.add_argument(
        "--store",
        metavar="URL",
        help="checkpoint and session store (default: a SQLite file in --dir); "
        "e.g. postgresql://postgres@127.0.0.1/test or redis://127.0.0.1:6379/0",
    )
    demo.add_argument("--dir", metavar="PATH", help="folder for the SQLite file and the tool log")
    demo.add_argument(
        "--kill-at-turn", type=int, default=3, metavar="N", help="kill the worker in turn N"
    )
    demo.add_argument("--no-color", action="store_true", help="plain output")
    listing = commands.add_parser(
        "plugins", help="list installed plugins (entry-point group 'prism') without loading them"
    )
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    chat = commands.add_parser("chat", help="chat with a model in the terminal (two tools)")
    chat.add_argument(
        "--model", required=True, metavar="PROVIDER:MODEL", help="openai:gpt-4.1-mini"
    )
    chat.add_argument("--base-url", metavar="URL", help="the provider's base URL (local servers)")
    chat.add_argument("--system", metavar="TEXT", help="the system prompt")
    demo.add_argument(
        "--backend", choices=("asyncio", "trio"), default="asyncio", help="the workers' event loop"
    )
    add_runs_parser(commands)
    add_serve_parser(commands)
    args = parser.parse_args(argv)
    if args.command == "plugins":
        return print_plugins(as_json=args.json)
    if args.command == "demo":
        from ._demo import run_demo

        return run_demo(
            store=args.store,
            directory=args.dir,
            kill_at_turn=args.kill_at_turn,
            color=not args.no_color and sys.stdout.isatty(),
            backend=args.backend,
        )
    if args.command == "chat":
        from ._chat import run_chat

        return run_chat(model=args.model, base_url=args.base_url, system=args.system)
    if args.command == "runs":
        return run_runs(args)
    if args.command == "serve":
        return run_serve(args)
    raise AssertionError(f"argparse accepted an unknown command {args.command!r}")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
