"""The ``prism`` command line of the Prism runtime (distribution ``prism-runtime-cli``).

``prism demo``, ``prism runs``, ``prism chat`` and ``prism plugins`` come from here; other
distributions add subcommands through the entry-point group :data:`COMMAND_GROUP`
(``prism.commands``), each naming a :class:`Command` (``prism serve`` comes from
``prism-runtime-server`` that way). :func:`main` is the console script.
"""

from ._main import main
from ._registry import COMMAND_GROUP, Command, CommandError, command_table, load_command

__version__ = "0.1.0"

__all__ = ("COMMAND_GROUP", "Command", "CommandError", "command_table", "load_command", "main")
