"""Retention and erasure: forgetting finished runs, and forgetting a session on request.

- :func:`purge_agent_runs` deletes the checkpoints of runs that finished before a date, and the
  transcripts of sessions all of whose runs did; the ledger's effect and decision records
  stay. A sub-agent run goes only with its parent (a parent that is still live would start it
  again if its record were gone).
- :func:`erase_session` deletes a session's transcript and runs (its sub-agent runs and their
  sessions too) and rewrites its ledger rows with arguments and reasons replaced by their
  hashes, then asks the store to scrub its freed space (SQLite rewrites its file). It is
  refused, with nothing changed, while a run of the session is active.

Session stores keep no owner: ``ownership`` scopes the runs and ledger rows, and a session's
transcript is deleted whoever wrote it. It must not run anything.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import attrs

from .._capability import capability
from ..durable._checkpoints import CheckpointStore, InvalidCheckpointError
from ..durable._effects import EffectLedger, FreedSpaceScrubber
from ..durable._options import AGENT_RUN_NAMESPACE
from ..errors import PrismError
from ..records._deletion import SessionDeleter
from ._listing import AgentRunSummary, is_recoverable, list_agent_runs

__all__ = (
    "SessionActiveError",
    "SessionDeletionUnsupportedError",
    "SessionErasure",
    "erase_session",
    "purge_agent_runs",
)

logger = logging.getLogger(__package__ or __name__)

_TERMINAL = ("succeeded", "failed", "aborted", "denied")


class SessionActiveError(PrismError):
    """A session cannot be erased while one of its runs is active: nothing was changed."""

    code = "ERR_PRISM_SESSION_ACTIVE"


class SessionDeletionUnsupportedError(PrismError):
    """The session store cannot delete a session (it does not offer
    :class:`~prism_core.stores.SessionDeleter`): nothing was changed."""

    code = "ERR_PRISM_SESSION_DELETE_UNSUPPORTED"


@attrs.frozen(kw_only=True)
class SessionErasure:
    """What :func:`erase_session` did: the sessions it erased (the one asked for first, then
    its sub-agent runs' sessions), the run records and entries it deleted, and the ledger
    rows it rewrote."""

    session_ids: tuple[str, ...]
    runs_deleted: int
    entries_deleted: int
    ledger_rows_erased: int


def _deleter(sessions: object) -> SessionDeleter:
    deleter = capability(sessions, SessionDeleter)
    if deleter is None:
        raise SessionDeletionUnsupportedError(
            f"the session store {type(sessions).__name__} cannot delete a session: it does "
            "not implement prism_core.stores.SessionDeleter (the memory, SQL and Redis "
            "session stores do)"
        )
    return deleter


def _epoch(value: Any) -> float:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidCheckpointError(
                "finished_before must be timezone-aware (a naive datetime names no instant)"
            )
        return value.timestamp()
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidCheckpointError("finished_before must be epoch seconds or an aware datetime")
    return float(value)


async def _all_runs(
    checkpoints: CheckpointStore, ownership: Mapping[str, str] | None
) -> list[AgentRunSummary]:
    """Every readable run record of ``ownership`` (unreadable ones are logged and left)."""
    runs: list[AgentRunSummary] = []
    cursor: str | None = None
    while True:
        page = await list_agent_runs(checkpoints, ownership=ownership, limit=1000, cursor=cursor)
        runs.extend(page.runs)
        for record in page.unreadable:
            logger.warning("run record %r cannot be read; left as it is", record.key)
        if page.cursor is None:
            return runs
        cursor = page.cursor


def _active(run: AgentRunSummary, now: float) -> bool:
    """Whether a worker may be running ``run`` now: ``running`` with a live lease, or with
    no lease at all (nothing shows that no worker holds it)."""
    if run.status != "running":
        return False
    return run.lease_expires_at is None or not is_recoverable(run, now=now)


async def purge_agent_runs(
    checkpoints: CheckpointStore,
    sessions: object,
    *,
    finished_before: float | datetime,
    ownership: Mapping[str, str] | None = None,
) -> int:
    """Delete the records of ``ownership``'s runs that finished (``succeeded``, ``failed``,
    ``aborted``, ``denied``) before ``finished_before`` (epoch seconds or an aware
    ``datetime``: their last write), and the transcript of every session whose runs all
    went; return the number of run records deleted. Effect and decision records stay in the
    ledger. A sub-agent run is purged only with its parent. Raises
    :class:`SessionDeletionUnsupportedError` before deleting anything when a transcript must
    go and ``sessions`` cannot delete one."""
    cutoff = _epoch(finished_before)
    runs = await _all_runs(checkpoints, ownership)
    by_id = {run.run_id: run for run in runs}

    def purgeable(run: AgentRunSummary, seen: frozenset[str] = frozenset()) -> bool:
        if run.status not in _TERMINAL or run.updated_at >= cutoff or run.run_id in seen:
            return False
        parent = by_id.get(run.parent_run_id) if run.parent_run_id is not None else None
        return parent is None or purgeable(parent, seen | {run.run_id})

    chosen = [run for run in runs if purgeable(run)]
    kept_sessions = {run.session_id for run in runs if run not in chosen}
    gone_sessions = list(
        dict.fromkeys(r.session_id for r in chosen if r.session_id not in kept_sessions)
    )
    deleter = _deleter(sessions) if gone_sessions else None
    for session_id in gone_sessions:
        assert deleter is not None
        await deleter.delete_session(session_id)
    deleted = 0
    for run in chosen:
        if await checkpoints.delete(AGENT_RUN_NAMESPACE, run.run_id, ownership=ownership):
            deleted += 1
    return deleted


async def erase_session(
    checkpoints: CheckpointStore,
    sessions: object,
    session_id: str,
    *,
    ownership: Mapping[str, str] | None = None,
) -> SessionErasure:
    """Erase session ``session_id``: delete its transcript and the records of its runs (and,
    recursively, of the sub-agent runs they started, with those runs' sessions), and rewrite
    the ledger rows of those sessions with arguments and reasons replaced by their hashes
    (``"sha256:<hex>"``); then ask the store to scrub its freed space.

    Refused with :class:`SessionActiveError`, nothing changed, while one of those runs is
    ``running`` with a live lease or with none (continue it to its end first); with
    :class:`SessionDeletionUnsupportedError` when ``sessions`` cannot delete a session.
    """
    if type(session_id) is not str or not session_id:
        raise InvalidCheckpointError("session_id must be a non-empty string")
    deleter = _deleter(sessions)
    runs = await _all_runs(checkpoints, ownership)
    erased_sessions = [session_id]
    chosen = [run for run in runs if run.session_id == session_id]
    frontier = {run.run_id for run in chosen}
    while frontier:
        children = [run for run in runs if run.parent_run_id in frontier and run not in chosen]
        chosen.extend(children)
        erased_sessions.extend(run.session_id for run in children)
        frontier = {run.run_id for run in children}
    erased_sessions = list(dict.fromkeys(erased_sessions))
    now = time.time()
    active = [run for run in chosen if _active(run, now)]
    if active:
        names = ", ".join(f"{run.run_id} ({run.session_id})" for run in active)
        raise SessionActiveError(
            f"session {session_id} cannot be erased while a run of it is active: {names} is "
            "running; continue it to its end (or let its lease lapse after a crash), then erase"
        )
    ledger = capability(checkpoints, EffectLedger)
    rewritten = 0
    if ledger is not None:
        for erased in erased_sessions:
            rewritten += await ledger.erase_session(erased, ownership=ownership)
    entries = 0
    for erased in erased_sessions:
        entries += await deleter.delete_session(erased)
    deleted = 0
    for run in chosen:
        if await checkpoints.delete(AGENT_RUN_NAMESPACE, run.run_id, ownership=ownership):
            deleted += 1
    for store in dict.fromkeys((checkpoints, sessions)):
        scrubber = capability(store, FreedSpaceScrubber)
        if scrubber is not None:
            await scrubber.scrub_freed_space()
    return SessionErasure(
        session_ids=tuple(erased_sessions),
        runs_deleted=deleted,
        entries_deleted=entries,
        ledger_rows_erased=rewritten,
    )
