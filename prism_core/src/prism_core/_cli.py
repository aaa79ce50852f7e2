"""The ``prism`` console script."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ("main",)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``prism``; returns the process exit code."""
    parser = argparse.ArgumentParser(prog="prism", description="Prism agent runtime tools.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run the scripted investigation demo")
    demo.add_argument("--no-color", action="store_true", help="plain output")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from ._demo import run_demo

        return run_demo(color=not args.no_color and sys.stdout.isatty())
    raise AssertionError(f"argparse accepted an unknown command {args.command!r}")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
