"""What is installed, for ``prism --version`` and ``prism plugins``: metadata only."""

from __future__ import annotations

import argparse
import json
from importlib.metadata import PackageNotFoundError, version

import attrs

from prism_core.plugins import list_installed_plugins

__all__ = ("DISTRIBUTION", "PluginsCommand", "command", "print_plugins", "version_text")

#: The distribution whose version ``prism --version`` reports: the release of the kernel.
DISTRIBUTION = "prism-runtime-core"


def version_text() -> str:
    """``prism-runtime <version>``, read from the installed ``prism-runtime-core`` metadata."""
    try:
        found = version(DISTRIBUTION)
    except PackageNotFoundError:
        found = f"unknown ({DISTRIBUTION} is not installed as a distribution)"
    return f"prism-runtime {found}"


def print_plugins(*, as_json: bool, group: str = "prism") -> int:
    """Print the plugins declared under ``group`` without importing them; the exit code.

    With ``as_json``, one JSON object per line (``name``, ``distribution``, ``version``,
    ``value``); otherwise an aligned table, or a line saying that none is installed.
    """
    plugins = list_installed_plugins(group)
    if as_json:
        for plugin in plugins:
            print(json.dumps(attrs.asdict(plugin), sort_keys=True))
        return 0
    if not plugins:
        print(f"no plugins installed (entry-point group {group!r})")
        return 0
    rows = [(p.name, f"{p.distribution or '?'} {p.version or '?'}", p.value) for p in plugins]
    widths = [max(len(row[column]) for row in rows) for column in range(2)]
    for name, dist, value in rows:
        print(f"{name:<{widths[0]}}  {dist:<{widths[1]}}  {value}")
    return 0


class PluginsCommand:
    """``prism plugins [--json]``."""

    help = "list installed plugins (entry-point group 'prism') without loading them"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add ``--json``."""
        parser.add_argument("--json", action="store_true", help="one JSON object per line")

    def run(self, args: argparse.Namespace) -> int:
        """Print the plugins; returns 0."""
        return print_plugins(as_json=args.json)


#: The ``plugins`` command (entry point ``prism.commands`` → ``plugins``).
command = PluginsCommand()
