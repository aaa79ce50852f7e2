"""The ``prism`` console script: a parser built from the ``prism.commands`` entry points.

``prism COMMAND …`` imports the module of ``COMMAND`` only; ``prism``, ``prism --help``,
``prism --version`` and an unknown command import every registered command module, since the
full list of commands is what they print. A command that a missing distribution would add
(``serve``) gets the install command instead of argparse's "invalid choice".
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from importlib.metadata import EntryPoint

from ._plugins import version_text
from ._registry import Command, CommandError, command_table, load_command

__all__ = ("INSTALL_HINTS", "main", "run_command_line")

#: What to install for a well-known command that no installed distribution declares.
INSTALL_HINTS: Mapping[str, str] = {
    "serve": "prism serve needs the server: pip install 'prism-runtime[server]'",
}


def _named_command(argv: Sequence[str]) -> str | None:
    """The first argument that is not an option: the command (``prism`` itself takes no
    option with a value, so nothing before it can be one)."""
    for arg in argv:
        if arg == "--":
            return None
        if not arg.startswith("-"):
            return arg
    return None


def run_command_line(argv: Sequence[str], table: Mapping[str, EntryPoint]) -> int:
    """Parse ``argv`` against the commands of ``table`` and run the chosen one; the exit code.

    Exit codes are the command's own; 2 for a usage error or a command whose distribution is
    missing (:data:`INSTALL_HINTS`), 1 for a command that cannot be loaded or whose ``run``
    returns something other than an ``int``.
    """
    named = _named_command(argv)
    if named is not None and named not in table and named in INSTALL_HINTS:
        print(INSTALL_HINTS[named], file=sys.stderr)
        return 2
    chosen = [named] if named is not None and named in table else sorted(table)
    parser = argparse.ArgumentParser(prog="prism", description="Prism agent runtime tools.")
    parser.add_argument("--version", action="version", version=version_text())
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    loaded: dict[str, Command] = {}
    broken: dict[str, CommandError] = {}
    for name in chosen:
        try:
            command = load_command(table[name])
        except CommandError as exc:
            broken[name] = exc
            # Listed so that --help shows why it is missing.
            subcommands.add_parser(name, help=f"unavailable ({exc})")
            continue
        command.configure(subcommands.add_parser(name, help=command.help, description=command.help))
        loaded[name] = command
    if named in broken:
        return _refused(broken[named])
    args = parser.parse_args(argv)
    if args.command in broken:
        return _refused(broken[args.command])
    code = loaded[args.command].run(args)
    # bool is an int, but True would exit 1 as if refused, without a word.
    if not isinstance(code, int) or isinstance(code, bool):
        entry = table[args.command]
        return _refused(
            CommandError(
                f"the command {args.command!r} ({entry.value}) returned {code!r}, "
                "not an exit code (an int)"
            )
        )
    return code


def _refused(error: CommandError) -> int:
    print(f"prism: refused ({error.code}): {error}", file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``prism``; returns the process exit code."""
    try:
        table = command_table()
    except CommandError as exc:
        return _refused(exc)
    return run_command_line(sys.argv[1:] if argv is None else list(argv), table)
