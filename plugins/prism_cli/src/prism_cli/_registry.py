"""The subcommands of ``prism``: the entry points of the group ``prism.commands``.

A distribution adds a subcommand by declaring an entry point in its ``pyproject.toml``::

    [project.entry-points."prism.commands"]
    serve = "prism_server._serve_cli:command"

The entry point's name is the subcommand's name; the object it names is a :class:`Command`.
The CLI's own commands (``demo``, ``chat``, ``runs``, ``plugins``) are declared the same way
by ``prism-runtime-cli``. The table is read from package metadata alone; a command's module is
imported when that command runs, or when ``prism`` lists every command (``--help``, a usage
error), so a command module should import nothing heavy at module level.
"""

from __future__ import annotations

import argparse
import re
from importlib.metadata import EntryPoint, entry_points
from typing import Protocol, cast, runtime_checkable

from prism_core import PrismError

__all__ = ("COMMAND_GROUP", "Command", "CommandError", "command_table", "load_command")

#: The entry-point group whose entry points are the subcommands of ``prism``.
COMMAND_GROUP = "prism.commands"

# What argparse can take as a subcommand and a shell user can type without quoting.
_NAME = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")


@runtime_checkable
class Command(Protocol):
    """One subcommand of ``prism``, the object a ``prism.commands`` entry point names.

    ``help`` is its line in ``prism --help``; :meth:`configure` adds its arguments to the
    subparser ``prism`` made for it; :meth:`run` runs it with the parsed arguments and
    returns the process exit code (0 done, 1 refused, 2 usage, by convention).
    """

    help: str
    """One line for ``prism --help``."""

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add this command's arguments (and subcommands, if it has any) to ``parser``."""

    def run(self, args: argparse.Namespace) -> int:
        """Run the command with the parsed ``args``; returns the exit code."""


class CommandError(PrismError):
    """A ``prism.commands`` entry point is unusable: a bad or duplicated name, a module that
    cannot be imported, or an object that is not a :class:`Command`."""

    code = "ERR_PRISM_CLI_COMMAND"


def _origin(entry: EntryPoint) -> str:
    dist = entry.dist
    return f"{dist.name if dist is not None else 'an unknown distribution'}: {entry.value}"


def command_table(group: str = COMMAND_GROUP) -> dict[str, EntryPoint]:
    """``{name: entry point}`` for every command installed under ``group``, sorted by name.

    Reads package metadata only: nothing is imported. Raises :class:`CommandError` for a
    name that is not a plain lowercase word (``serve``, ``check-config``) and for a name two
    distributions declare, since either choice would run a command the user may not mean.
    """
    table: dict[str, EntryPoint] = {}
    for entry in sorted(entry_points(group=group), key=lambda e: (e.name, e.value)):
        if not _NAME.fullmatch(entry.name):
            raise CommandError(
                f"the command name {entry.name!r} ({_origin(entry)}) is not a lowercase word "
                "(letters, digits and inner hyphens)"
            )
        if entry.name in table:
            raise CommandError(
                f"two distributions declare the command {entry.name!r}: "
                f"{_origin(table[entry.name])} and {_origin(entry)}; uninstall one of them"
            )
        table[entry.name] = entry
    return table


def load_command(entry: EntryPoint) -> Command:
    """Import the object ``entry`` names and check that it is a :class:`Command`.

    Raises :class:`CommandError` (the import error as its cause) when the module cannot be
    imported or the object lacks a string ``help`` or callable ``configure`` and ``run``.
    """
    try:
        command = entry.load()
    except Exception as exc:
        raise CommandError(
            f"the command {entry.name!r} ({_origin(entry)}) cannot be loaded: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    missing = [
        what
        for what, ok in (
            ("a string help", isinstance(getattr(command, "help", None), str)),
            ("configure(parser)", callable(getattr(command, "configure", None))),
            ("run(args)", callable(getattr(command, "run", None))),
        )
        if not ok
    ]
    if missing:
        raise CommandError(
            f"the command {entry.name!r} ({_origin(entry)}) is not a prism command: "
            f"{type(command).__name__} has no {', no '.join(missing)}"
        )
    return cast(Command, command)
