"""``prism runs purge``, ``prism runs approve|deny|continue --dry-run`` and ``prism sessions
erase``: retention, previews and erasure from a terminal.

``--dry-run`` asks :func:`prism_core.preview_resume` what the decision would do (the calls it
would dispatch, those it would run again, those in doubt, or its refusal) and writes nothing.
``runs purge`` deletes the runs that finished before a date and their transcripts (the ledger
keeps their effect and decision records); ``sessions erase`` erases one session. Exit codes:
0 done, 1 refused (a dry run that would be refused too), 2 usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from typing import Any

import anyio

from prism_core import (
    AgentRunNotFoundError,
    PrismError,
    StorePair,
    call_resolve_agent,
    entered_resolver,
    erase_session,
    load_agent_run_state,
    preview_resume,
    purge_agent_runs,
)

from ._escape import shown
from ._ledger_cli import epoch_of, owner_pair
from ._stores import open_operator_stores

__all__ = (
    "SessionsCommand",
    "add_purge_arguments",
    "dry_run",
    "purge",
    "run_not_found",
    "sessions_command",
)


def add_purge_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``runs purge`` (besides ``--store`` and ``--owner``)."""
    parser.add_argument(
        "--finished-before",
        required=True,
        type=epoch_of,
        metavar="ISO",
        help="delete the runs that finished before this time, and their transcripts",
    )


async def purge(stores: StorePair, args: argparse.Namespace, owner: dict[str, str] | None) -> int:
    """``runs purge``: print how many run records went."""
    deleted = await purge_agent_runs(
        stores.checkpoints, stores.sessions, finished_before=args.finished_before, ownership=owner
    )
    print(f"purged {deleted} finished run(s); their effect and decision records stay")
    return 0


def _ids(ids: tuple[str, ...]) -> str:
    return ", ".join(shown(i) for i in ids) or "none"


def run_not_found(run_id: str) -> AgentRunNotFoundError:
    """The refusal of a run that is absent or another owner's, in the kernel's words
    (``No durable agent run <run id>``), the id escaped for the terminal."""
    return AgentRunNotFoundError(f"No durable agent run {shown(run_id)}")


async def dry_run(
    stores: StorePair,
    args: argparse.Namespace,
    owner: Mapping[str, str] | None,
    resume: dict[str, Any],
    resolve: Callable[..., Any],
) -> int:
    """Preview ``resume`` on run ``args.run_id`` and print what it would do."""
    found = await load_agent_run_state(stores.checkpoints, {"run_id": args.run_id}, ownership=owner)
    if found is None:
        raise run_not_found(args.run_id)
    state = found.state
    async with entered_resolver(resolve) as resolver:
        resolved = await call_resolve_agent(
            resolver, state.agent_id, revision=state.definition_revision
        )
    agent, revision = resolved if isinstance(resolved, tuple) else (None, None)
    if isinstance(resolved, Mapping):
        agent, revision = resolved.get("agent"), resolved.get("definition_revision")
    what = args.runs_command
    if agent is None or not isinstance(revision, str):
        if resume.get("decision") == "deny":
            print(
                f"run {shown(state.run_id)}: deny would end it denied without its definition "
                "(the agent is no longer served); it would dispatch nothing"
            )
            return 0
        print(f"run {shown(state.run_id)}: {what} would be refused: the agent is not served")
        return 1
    if getattr(agent, "store", None) is not stores.sessions:
        agent = agent.evolve(store=stores.sessions)
    preview = await preview_resume(
        agent,
        {"run_id": state.run_id},
        resume,
        checkpoints=stores.checkpoints,
        definition_revision=revision,
        ownership=owner,
    )
    run = shown(state.run_id)
    print(f"run {run}: dry run of {what} at version {found.version}; nothing was written")
    print(f"  would dispatch: {_ids(preview.would_dispatch)}")
    print(f"  would run again: {_ids(preview.would_repeat)}")
    print(f"  in doubt: {_ids(preview.in_doubt)}")
    if preview.refusal is not None:
        refusal = preview.refusal
        print(f"  would be refused ({refusal.code}): {shown(str(refusal))}")
        return 1
    print("  would be refused: no")
    return 0


async def _erase(args: argparse.Namespace) -> int:
    stores = open_operator_stores(args.store)
    try:
        report = await erase_session(
            stores.checkpoints,
            stores.sessions,
            args.session_id,
            ownership=dict(args.owner) or None,
        )
    finally:
        await stores.aclose()
    print(
        f"erased session {shown(args.session_id)}: {report.runs_deleted} run(s) and "
        f"{report.entries_deleted} entries deleted, {report.ledger_rows_erased} ledger row(s) "
        "kept as hashes"
    )
    for other in report.session_ids[1:]:
        print(f"  with sub-agent session {shown(other)}")
    return 0


class SessionsCommand:
    """``prism sessions erase``."""

    help = "erase a session: its transcript and runs, its ledger rows kept as hashes"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add ``sessions erase``."""
        actions = parser.add_subparsers(dest="sessions_command", required=True)
        erase = actions.add_parser(
            "erase", help="delete a session's transcript and runs; hash its ledger rows"
        )
        erase.add_argument("session_id", metavar="ID")
        erase.add_argument(
            "--store", required=True, metavar="URL", help="the store, e.g. sqlite:///runs.db"
        )
        erase.add_argument(
            "--owner",
            action="append",
            type=owner_pair,
            default=[],
            metavar="KEY=VALUE",
            help="the ownership the session's runs were written with (repeat for each key)",
        )

    def run(self, args: argparse.Namespace) -> int:
        """Run ``sessions erase``; the exit code."""
        try:
            return int(anyio.run(_erase, args))
        except PrismError as exc:
            print(f"prism sessions erase: refused ({exc.code}): {exc}", file=sys.stderr)
            return 1


#: The ``sessions`` command (entry point ``prism.commands`` → ``sessions``).
sessions_command = SessionsCommand()
