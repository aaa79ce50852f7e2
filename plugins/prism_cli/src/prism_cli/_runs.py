"""``prism runs``: find, inspect and settle durable runs from a terminal.

``list`` and ``show`` read the checkpoint store; ``approve``, ``deny`` and ``continue`` record
the decision through the host's ``resolve_agent(agent_id) -> (agent, definition_revision)``
(named ``MODULE:ATTR`` with ``--app``), exactly as
:meth:`~prism_core.AgentRunLifecycle.decide` does, and leave running it to a worker (or run it
here with ``--here``, see :mod:`._runs_decide`; or only say what they would do with
``--dry-run``, and ``purge`` deletes finished runs, see :mod:`._runs_ledger`). ``list`` shows
top-level runs unless ``--all``. One ``--store`` URL opens both stores as a
pair (:func:`prism_core.open_stores`): they share one connection and commit a resumed turn
together. ``--actor`` (default: the OS user name) and ``--reason`` are kept in the run's
decision audit, which ``show`` prints. Exit codes: 0 done, 1 refused (the error's code and
message are printed) or ``--wait`` gave up, 2 usage.
"""

from __future__ import annotations

import argparse
import getpass
import importlib
import json
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

import anyio

from prism_core import (
    AgentRunStatus,
    AgentRunSummary,
    PrismError,
    StorePair,
    call_resolve_agent,
    inspect_agent_run,
    list_agent_runs,
    load_agent_run_state,
)

from ._runs_decide import DEFAULT_WAIT_SECONDS, WaitTimeout, settle
from ._runs_format import run_detail, show_text, summary_table
from ._runs_ledger import add_purge_arguments, dry_run, purge, run_not_found
from ._stores import open_operator_stores

__all__ = (
    "RUN_STATUSES",
    "RunsCommand",
    "add_runs_arguments",
    "command",
    "default_actor",
    "load_app",
    "open_operator_stores",
    "parse_resolution",
    "run_runs",
)

#: The statuses ``--status`` takes: every status a durable run's checkpoint can record.
RUN_STATUSES = ("running", "suspended", "succeeded", "failed", "aborted", "denied")


class _Usage(Exception):
    """A usage mistake found after parsing (exit code 2)."""


def _owner_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def parse_resolution(text: str) -> dict[str, Any]:
    """One ``--resolve`` value as a resolution entry of the resume input.

    ``ID=completed:JSON`` (the call's result), ``ID=not_started`` or ``ID=failed:REASON``.
    """
    call_id, sep, outcome = text.partition("=")
    if not sep or not call_id:
        raise argparse.ArgumentTypeError(
            f"expected ID=completed:JSON, ID=not_started or ID=failed:REASON, got {text!r}"
        )
    kind, _, rest = outcome.partition(":")
    if kind == "not_started" and outcome == "not_started":
        return {"tool_call_id": call_id, "outcome": "not_started"}
    if kind == "completed" and outcome.startswith("completed:"):
        try:
            result = json.loads(rest)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(
                f"the result of {call_id} is not JSON: {exc}"
            ) from None
        return {"tool_call_id": call_id, "outcome": "completed", "result": result}
    if kind == "failed" and rest:
        return {"tool_call_id": call_id, "outcome": "failed", "reason": rest}
    raise argparse.ArgumentTypeError(
        f"the outcome of {call_id} must be completed:JSON, not_started or failed:REASON"
    )


def add_runs_arguments(runs: argparse.ArgumentParser) -> None:
    """Add the subcommands of ``prism runs`` and their arguments to the ``runs`` parser."""
    actions = runs.add_subparsers(dest="runs_command", required=True)

    def common(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--store",
            required=True,
            metavar="URL",
            help="the checkpoint and session store, e.g. sqlite:///runs.db or redis://host/0",
        )
        parser.add_argument(
            "--owner",
            action="append",
            type=_owner_pair,
            default=[],
            metavar="KEY=VALUE",
            help="the ownership runs were written with (repeat for each key)",
        )

    def who(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--actor",
            metavar="NAME",
            help="who decides, kept in the run's audit (default: your OS user name)",
        )
        parser.add_argument(
            "--reason", metavar="TEXT", help="why, kept in the run's audit with the decision"
        )
        where = parser.add_mutually_exclusive_group()
        where.add_argument(
            "--wait",
            nargs="?",
            type=float,
            const=DEFAULT_WAIT_SECONDS,
            metavar="SECONDS",
            help="after recording, follow the run until a worker has taken it to its next "
            f"stop (default {DEFAULT_WAIT_SECONDS:g} s)",
        )
        where.add_argument(
            "--here",
            action="store_true",
            help="run the decided run in this process instead of leaving it to a worker",
        )
        where.add_argument(
            "--dry-run",
            action="store_true",
            help="say what the decision would dispatch, run again or refuse; write nothing",
        )

    listing = actions.add_parser("list", help="the runs in the store, as a table or JSON lines")
    common(listing)
    listing.add_argument("--status", choices=RUN_STATUSES, help="only runs of this status")
    listing.add_argument(
        "--recoverable", action="store_true", help="only running runs no worker holds"
    )
    listing.add_argument("--limit", type=int, metavar="N", help="at most N runs (default: all)")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    listing.add_argument(
        "--all", action="store_true", help="sub-agent runs too (default: top-level runs only)"
    )

    retention = actions.add_parser(
        "purge", help="delete finished runs and their transcripts (their ledger records stay)"
    )
    common(retention)
    add_purge_arguments(retention)

    show = actions.add_parser("show", help="one run: status, counters, decisions, in-doubt calls")
    show.add_argument("run_id", metavar="RUN_ID")
    common(show)
    show.add_argument("--json", action="store_true", help="one JSON object")

    for name, what in (("approve", "approve"), ("deny", "deny")):
        decide = actions.add_parser(name, help=f"{what} a suspended run's pending decisions")
        decide.add_argument("run_id", metavar="RUN_ID")
        common(decide)
        decide.add_argument("--app", required=True, metavar="MODULE:ATTR", help="resolve_agent")
        decide.add_argument(
            "--call",
            action="append",
            default=[],
            metavar="ID",
            help="only this tool call (or approval id); repeat for more",
        )
        decide.add_argument(
            "--all",
            action="store_true",
            help="every pending decision (needed when there is more than one and no --call)",
        )
        who(decide)

    proceed = actions.add_parser("continue", help="continue a running run after a crash")
    proceed.add_argument("run_id", metavar="RUN_ID")
    common(proceed)
    proceed.add_argument("--app", required=True, metavar="MODULE:ATTR", help="resolve_agent")
    who(proceed)
    proceed.add_argument(
        "--resolve",
        action="append",
        default=[],
        type=parse_resolution,
        metavar="ID=OUTCOME",
        help="settle an in-doubt call: ID=completed:JSON, ID=not_started or ID=failed:REASON",
    )


def load_app(spec: str) -> Callable[[str], Any]:
    """The host's ``resolve_agent`` named ``MODULE:ATTR`` (the working directory is importable,
    as for ``python -m``)."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise _Usage(f"--app must be MODULE:ATTR, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise _Usage(f"--app: cannot import {module_name!r}: {exc}") from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise _Usage(f"--app: {module_name!r} has no attribute {attribute!r}") from None
    if not callable(target):
        raise _Usage(f"--app: {spec} is not callable")
    return target  # type: ignore[no-any-return]


def default_actor() -> str:
    """The OS user name (``getpass.getuser()``), else ``uid <n>``, else ``"unknown"``."""
    try:
        return getpass.getuser()
    except Exception:  # no login name in the environment and no password entry
        getuid = getattr(os, "getuid", None)
        return f"uid {getuid()}" if getuid is not None else "unknown"


def _on_sessions(resolve: Callable[..., Any], sessions: Any) -> Callable[..., Any]:
    """``resolve`` with each agent moved onto ``sessions`` (a copy; the host's is untouched);
    it passes the run's ``revision`` on when the host's ``resolve_agent`` takes one."""

    async def resolve_agent(agent_id: str, *, revision: str | None = None) -> Any:
        resolved = await call_resolve_agent(resolve, agent_id, revision=revision)
        if isinstance(resolved, Mapping):
            agent, revision = resolved.get("agent"), resolved.get("definition_revision")
        elif isinstance(resolved, tuple) and len(resolved) == 2:
            agent, revision = resolved
        else:
            return resolved  # the lifecycle refuses it with its own message
        if agent is not None and getattr(agent, "store", None) is not sessions:
            agent = agent.evolve(store=sessions)
        return agent, revision

    return resolve_agent


async def _find(stores: StorePair, run_id: str, owner: dict[str, str] | None) -> AgentRunStatus:
    found = await load_agent_run_state(stores.checkpoints, {"run_id": run_id}, ownership=owner)
    if found is None:
        raise run_not_found(run_id)
    return found


async def _list(stores: StorePair, args: argparse.Namespace, owner: dict[str, str] | None) -> int:
    if args.limit is not None and args.limit < 1:
        raise _Usage("--limit must be at least 1")
    runs: list[AgentRunSummary] = []
    unreadable: list[Any] = []
    cursor = None
    while True:
        wanted = 1000 if args.limit is None else min(1000, args.limit - len(runs))
        page = await list_agent_runs(
            stores.checkpoints,
            status=args.status,
            ownership=owner,
            recoverable=True if args.recoverable else None,
            top_level=None if args.all else True,
            limit=wanted,
            cursor=cursor,
        )
        runs.extend(page.runs)
        unreadable.extend(page.unreadable)
        cursor = page.cursor
        if cursor is None or (args.limit is not None and len(runs) >= args.limit):
            break
    if args.json:
        for run in runs:
            print(json.dumps(run.to_json(), ensure_ascii=False))
    else:
        print(summary_table(runs))
    for record in unreadable:
        print(
            f"prism runs list: record {record.key} cannot be read and is not listed: "
            f"{record.reason}",
            file=sys.stderr,
        )
    return 0


async def _show(stores: StorePair, args: argparse.Namespace, owner: dict[str, str] | None) -> int:
    found = await inspect_agent_run(
        stores.checkpoints, stores.sessions, {"run_id": args.run_id}, ownership=owner
    )
    if found is None:
        raise run_not_found(args.run_id)
    detail = run_detail(found)
    print(json.dumps(detail, ensure_ascii=False) if args.json else show_text(detail))
    return 0


def _decisions(args: argparse.Namespace, found: AgentRunStatus) -> dict[str, Any]:
    """The resume input of ``approve``/``deny`` at the run's current version."""
    version = found.version
    pending = found.state.interruption.pending_decisions if found.state.interruption else ()
    if len(pending) > 1 and not args.call and not args.all:
        calls = ", ".join(p.tool_call_id or p.approval_id for p in pending)
        raise _Usage(
            f"the run waits for {len(pending)} decisions ({calls}); name them with --call ID "
            f"(see prism runs show {found.state.run_id}) or decide them all with --all"
        )
    if args.call and args.all:
        raise _Usage("give --call ID... or --all, not both")
    if not args.call:
        return {"expected_version": version, "decision": args.runs_command}
    by_call = {p.tool_call_id: p.approval_id for p in pending if p.tool_call_id is not None}
    chosen = [by_call.get(call, call) for call in args.call] or [p.approval_id for p in pending]
    outcome = "allow_once" if args.runs_command == "approve" else "reject_once"
    entries = []
    for approval_id in dict.fromkeys(chosen):
        entry: dict[str, Any] = {"approval_id": approval_id, "outcome": outcome}
        if args.reason is not None:
            entry["reason"] = args.reason
        entries.append(entry)
    if not entries:
        return {"expected_version": version, "decision": args.runs_command}
    return {"expected_version": version, "decisions": entries}


async def _resume(stores: StorePair, args: argparse.Namespace, owner: dict[str, str] | None) -> int:
    resolve = load_app(args.app)
    found = await _find(stores, args.run_id, owner)
    if args.runs_command == "continue":
        resume: dict[str, Any] = {"expected_version": found.version, "decision": "continue"}
        if args.resolve:
            resume["resolutions"] = args.resolve
    else:
        resume = _decisions(args, found)
    resume["actor"] = args.actor if args.actor is not None else default_actor()
    resume["channel"] = "cli"
    if args.reason is not None:
        resume["reason"] = args.reason
    if args.dry_run:
        return await dry_run(stores, args, owner, resume, resolve)
    if args.wait is not None and args.wait <= 0:
        raise _Usage("--wait SECONDS must be positive")
    return await settle(stores, args, owner, resume, resolve, _on_sessions)


async def _dispatch(args: argparse.Namespace) -> int:
    owner = dict(args.owner) or None
    stores = open_operator_stores(args.store)
    try:
        if args.runs_command == "list":
            return await _list(stores, args, owner)
        if args.runs_command == "show":
            return await _show(stores, args, owner)
        if args.runs_command == "purge":
            return await purge(stores, args, owner)
        return await _resume(stores, args, owner)
    finally:
        await stores.aclose()


def run_runs(args: argparse.Namespace) -> int:
    """Run one ``prism runs`` subcommand; returns the exit code."""
    try:
        return anyio.run(_dispatch, args)
    except _Usage as exc:
        print(f"prism runs {args.runs_command}: {exc}", file=sys.stderr)
        return 2
    except WaitTimeout as exc:
        print(f"prism runs {args.runs_command}: {exc}", file=sys.stderr)
        return 1
    except PrismError as exc:
        print(f"prism runs {args.runs_command}: refused ({exc.code}): {exc}", file=sys.stderr)
        return 1


class RunsCommand:
    """``prism runs list|show|approve|deny|continue|purge``."""

    help = "list, inspect, approve, deny, continue or purge durable runs"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add the ``runs`` subcommands (:func:`add_runs_arguments`)."""
        add_runs_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        """Run the chosen ``runs`` subcommand (:func:`run_runs`)."""
        return run_runs(args)


#: The ``runs`` command (entry point ``prism.commands`` → ``runs``).
command = RunsCommand()
