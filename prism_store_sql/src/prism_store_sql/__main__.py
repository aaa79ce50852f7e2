"""``python -m prism_store_sql migrate URL [--table-prefix PREFIX]`` (and ``status``).

``status`` writes nothing and exits 0 when the schema is current, 1 on an error, 2 when a
migration is due (tables absent or at another version) and 3 when a SQLite database file
does not exist.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from collections.abc import Sequence

from prism_core.errors import PrismError

from ._migrations import SCHEMA_VERSION, missing_database
from ._open import migrate, read_schema_version
from ._schema import DEFAULT_TABLE_PREFIX

__all__ = ("EXIT_MIGRATION_DUE", "EXIT_NO_DATABASE", "main")

#: ``status``: the tables are absent or at another schema version.
EXIT_MIGRATION_DUE = 2
#: ``status``: the SQLite database file does not exist (and was not created).
EXIT_NO_DATABASE = 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m prism_store_sql",
        description="Create, upgrade or inspect the tables of the Prism SQL stores.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("migrate", "create or upgrade the tables (idempotent)"),
        ("status", "print the schema version recorded in the database (writes nothing)"),
    ):
        command = commands.add_parser(name, help=text, description=text)
        command.add_argument("url", help="sqlite:///path.db or postgresql://user@host/db")
        command.add_argument(
            "--table-prefix",
            default=DEFAULT_TABLE_PREFIX,
            help=f"prefix of the table names (default: {DEFAULT_TABLE_PREFIX})",
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "migrate":
            version = asyncio.run(migrate(args.url, table_prefix=args.table_prefix))
            print(f"schema version {version} (prefix {args.table_prefix!r})")
            return 0
        absent = missing_database(args.url)
        if absent is not None:
            print(
                f"no database at {absent} (nothing was created); create it with: "
                f"python -m prism_store_sql migrate {shlex.quote(args.url)}"
            )
            return EXIT_NO_DATABASE
        version = asyncio.run(read_schema_version(args.url, table_prefix=args.table_prefix))
    except PrismError as exc:
        print(f"error [{exc.code}]: {exc}", file=sys.stderr)
        return 1
    state = "up to date" if version == SCHEMA_VERSION else f"this release needs {SCHEMA_VERSION}"
    print(f"schema version {version} (prefix {args.table_prefix!r}): {state}")
    return 0 if version == SCHEMA_VERSION else EXIT_MIGRATION_DUE


if __name__ == "__main__":
    sys.exit(main())
