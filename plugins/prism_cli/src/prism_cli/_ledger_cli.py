"""``prism effects list`` and ``prism audit export``: the store's effect ledger, from a terminal.

``effects list`` prints the effect records that match every filter given (one call of a tool
that is not read-only each: its status, who approved it, its idempotency key, its arguments),
oldest first, as a table or, with ``--json``, one JSON object per line. ``audit export`` prints
every decision record and effect record as JSON lines (ASCII, one object per line) for a SIEM.
Both read the ledger of the checkpoint store at ``--store`` (the memory, SQLite, PostgreSQL
and Redis stores keep one) under the exact ``--owner`` scope. Every stored string printed in
the table has its control characters escaped. Exit codes: 0 done, 1 refused, 2 usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any

import anyio

from prism_core import EFFECT_STATUSES, EffectRecord, PrismError, export_audit, list_effects

from ._escape import shown, shown_json
from ._stores import open_operator_stores

__all__ = (
    "AuditCommand",
    "EffectsCommand",
    "audit_command",
    "effects_command",
    "effects_table",
    "epoch_of",
    "owner_pair",
)

_COLUMNS = ("STARTED", "STATUS", "TOOL", "CALL", "RUN", "APPROVED BY", "KEY", "ARGUMENTS")


class _Usage(Exception):
    """A usage mistake found after parsing (exit code 2)."""


def owner_pair(text: str) -> tuple[str, str]:
    """One ``--owner KEY=VALUE``."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def argument_pair(text: str) -> tuple[str, Any]:
    """One ``--arg NAME=VALUE``: ``VALUE`` as JSON when it is JSON (``amount=12`` is the
    number, ``'code="12"'`` the string), else as a string (``order=A-3``)."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        return name, json.loads(value)
    except ValueError:
        return name, value


def epoch_of(text: str) -> float:
    """An ISO 8601 date or time as epoch seconds (a time without an offset is UTC)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO 8601 date or time (2026-12-01, 2026-12-01T09:30:00Z), got {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _moment(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def effects_table(effects: list[EffectRecord]) -> str:
    """The effect records as an aligned text table (stored strings escaped)."""
    rows = [_COLUMNS]
    for effect in effects:
        rows.append(
            (
                _moment(effect.started_at),
                effect.status,
                shown(effect.tool_name),
                shown(effect.tool_call_id),
                shown(effect.run_id),
                ",".join(shown(actor) for actor in effect.approved_by) or "-",
                shown(effect.idempotency_key),
                shown_json(effect.arguments),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def _store_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store", required=True, metavar="URL", help="the store, e.g. sqlite:///runs.db"
    )
    parser.add_argument(
        "--owner",
        action="append",
        type=owner_pair,
        default=[],
        metavar="KEY=VALUE",
        help="the ownership the runs were written with (repeat for each key)",
    )


async def _effects(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 1:
        raise _Usage("--limit must be at least 1")
    filters: dict[str, Any] = {
        "tool_name": args.tool,
        "actor": args.actor,
        "arguments": dict(args.arg) or None,
        "idempotency_key": args.key,
        "run_id": args.run,
        "status": args.status,
        "since": args.since,
        "until": args.until,
        "ownership": dict(args.owner) or None,
    }
    found: list[EffectRecord] = []
    stores = open_operator_stores(args.store)
    try:
        cursor = None
        while args.limit is None or len(found) < args.limit:
            page = await list_effects(stores.checkpoints, limit=1000, cursor=cursor, **filters)
            found.extend(page.effects)
            cursor = page.cursor
            if cursor is None:
                break
    finally:
        await stores.aclose()
    if args.limit is not None:
        found = found[: args.limit]
    if args.json:
        for effect in found:
            print(json.dumps(effect.to_json(), ensure_ascii=True, sort_keys=True))
    else:
        print(effects_table(found))
    return 0


async def _audit(args: argparse.Namespace) -> int:
    stores = open_operator_stores(args.store)
    try:
        async for row in export_audit(
            stores.checkpoints, since=args.since, ownership=dict(args.owner) or None
        ):
            sys.stdout.write(json.dumps(row, ensure_ascii=True, sort_keys=True) + "\n")
    finally:
        await stores.aclose()
    return 0


def _run(name: str, body: Any, args: argparse.Namespace) -> int:
    try:
        return int(anyio.run(body, args))
    except _Usage as exc:
        print(f"prism {name}: {exc}", file=sys.stderr)
        return 2
    except PrismError as exc:
        print(f"prism {name}: refused ({exc.code}): {exc}", file=sys.stderr)
        return 1


class EffectsCommand:
    """``prism effects list``."""

    help = "list the effect records of the store's ledger (who approved what, did it run)"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add ``effects list`` and its filters."""
        actions = parser.add_subparsers(dest="effects_command", required=True)
        listing = actions.add_parser("list", help="the effect records that match every filter")
        _store_arguments(listing)
        listing.add_argument("--tool", metavar="NAME", help="only calls of this tool")
        listing.add_argument("--actor", metavar="NAME", help="only calls this actor approved")
        listing.add_argument(
            "--arg",
            action="append",
            type=argument_pair,
            default=[],
            metavar="NAME=VALUE",
            help="only calls whose top-level argument NAME equals VALUE (JSON, else text)",
        )
        listing.add_argument("--key", metavar="KEY", help="only the call with this idempotency key")
        listing.add_argument("--run", metavar="RUN_ID", help="only calls of this run")
        listing.add_argument("--status", choices=EFFECT_STATUSES, help="only calls in this status")
        listing.add_argument(
            "--since", type=epoch_of, metavar="ISO", help="only calls started at or after"
        )
        listing.add_argument(
            "--until", type=epoch_of, metavar="ISO", help="only calls started before"
        )
        listing.add_argument("--limit", type=int, metavar="N", help="at most N (default: all)")
        listing.add_argument("--json", action="store_true", help="one JSON object per line")

    def run(self, args: argparse.Namespace) -> int:
        """Run ``effects list``; the exit code."""
        return _run("effects list", _effects, args)


class AuditCommand:
    """``prism audit export``."""

    help = "export every decision record and effect record as JSON lines"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add ``audit export`` and its arguments."""
        actions = parser.add_subparsers(dest="audit_command", required=True)
        export = actions.add_parser("export", help="JSON lines: decisions, then effects")
        _store_arguments(export)
        export.add_argument(
            "--since", type=epoch_of, metavar="ISO", help="only records from this time on"
        )

    def run(self, args: argparse.Namespace) -> int:
        """Run ``audit export``; the exit code."""
        return _run("audit export", _audit, args)


#: The ``effects`` command (entry point ``prism.commands`` → ``effects``).
effects_command = EffectsCommand()
#: The ``audit`` command (entry point ``prism.commands`` → ``audit``).
audit_command = AuditCommand()
