"""Finding durable runs: :func:`list_agent_runs` and the summary of one run's checkpoint.

A status filter uses the store's :class:`~prism_core.CheckpointStatusIndex` when it has one
(asked with ``capability()``), so only the records of that status are read. A store without
it is paged through (``list`` over the run namespace) and each record is decoded to filter it:
correct, but it reads the whole namespace when few runs match. Summaries come from the stored
state; a record the store cannot decode, or that does not parse as a run state, is left out
of the page and named in its ``unreadable``.

It must not write: listing reads records and never claims, renews or changes one.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import time
from collections.abc import Mapping
from typing import Any, get_args

import attrs

from ..durable._capabilities import CheckpointStatusIndex, capability
from ..durable._checkpoints import (
    MAX_CHECKPOINT_PAGE_SIZE,
    CheckpointPage,
    CheckpointRecord,
    CheckpointStore,
    InvalidCheckpointError,
    UnreadableRecord,
    normalise_ownership,
    validate_list,
)
from ..durable._in_doubt import in_doubt_calls
from ..durable._lease import LEASE_CLOCK_SKEW_MS, record_lease
from ..durable._options import AGENT_RUN_NAMESPACE, HARD_MAX_AGENT_RUN_STATE_BYTES, check_store
from ..durable._state import RunStatus
from ..durable._state_parse import parse_state
from ..errors import AgentRunStateError

__all__ = (
    "AgentRunPage",
    "AgentRunSummary",
    "is_recoverable",
    "lease_expires_at",
    "list_agent_runs",
    "summarize_run",
)

logger = logging.getLogger("prism_core.durable")

RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)

# Pages read from the store while a filter drops records the store cannot drop itself.
_FILTERED_PAGE_SIZE = 200
_CURSOR_TAG = "runs1."


@attrs.frozen(kw_only=True)
class AgentRunSummary:
    """What a run's checkpoint says about it, without its transcript.

    ``pending_decisions`` counts the decisions a suspended run waits for; ``in_doubt`` names
    the tool calls whose dispatched mark is stored without a settled result (a ``continue``
    must reconcile or resolve them); ``lease_expires_at`` is ``None`` for a run without a
    lease. ``updated_at`` is the epoch time of the checkpoint's last write. ``started_by``
    names who started the run (the ``actor`` run option, a face's caller), when anyone was.
    """

    run_id: str
    session_id: str
    agent_id: str
    status: RunStatus
    version: int
    updated_at: float
    pending_decisions: int = 0
    in_doubt: tuple[str, ...] = ()
    lease_expires_at: float | None = None
    started_by: str | None = None
    #: The run whose sub-agent call started this run (``None`` for a top-level run).
    parent_run_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The summary as a JSON object (one field per attribute)."""
        return {
            "run_id": self.run_id,
            "session_id": self.session_id,
            "agent_id": self.agent_id,
            "status": self.status,
            "version": self.version,
            "updated_at": self.updated_at,
            "pending_decisions": self.pending_decisions,
            "in_doubt": list(self.in_doubt),
            "lease_expires_at": self.lease_expires_at,
            "started_by": self.started_by,
            "parent_run_id": self.parent_run_id,
        }


@attrs.frozen
class AgentRunPage:
    """One page of :func:`list_agent_runs`; ``cursor`` is ``None`` on the last page.

    ``unreadable`` names the run records in the page's range that were left out because
    they cannot be read (the store cannot decode them, or they are not a run state): one bad
    record never fails the listing, and it is not silently hidden either."""

    runs: tuple[AgentRunSummary, ...]
    cursor: str | None = None
    unreadable: tuple[UnreadableRecord, ...] = ()


def lease_expires_at(record: CheckpointRecord) -> float | None:
    """When the lease held on a run's record expires (epoch seconds), or ``None``.

    The lease lives in the run state (``lease_expires_at``, epoch milliseconds from the
    writer's clock; see :mod:`prism_core.durable._lease`) and only a ``running`` run of
    ``RunStateOptions(lease_ms=...)`` holds one. This is the one place the listing reads a
    lease from.
    """
    expires = record_lease(record)
    return None if expires is None else expires / 1000


def is_recoverable(summary: AgentRunSummary, *, now: float | None = None) -> bool:
    """Whether no worker holds the run: ``running`` with no lease, or an expired one.

    A run without a lease gives no sign of life, so it counts as recoverable; hosts whose
    workers continue runs by themselves should give runs a lease. ``now`` (epoch seconds)
    defaults to this machine's clock. A lease counts as live until its expiry plus
    ``LEASE_CLOCK_SKEW_MS``, the tolerance a ``continue`` applies before it refuses a leased
    run, so a run listed as recoverable is one a ``continue`` may claim.
    """
    if summary.status != "running":
        return False
    expires = summary.lease_expires_at
    if expires is None:
        return True
    return expires + LEASE_CLOCK_SKEW_MS / 1000 <= (time.time() if now is None else now)


def summarize_run(record: CheckpointRecord) -> AgentRunSummary:
    """The summary of one run record; :class:`~prism_core.AgentRunStateError` when its value
    is not a run state."""
    state = parse_state(record.value, max_bytes=HARD_MAX_AGENT_RUN_STATE_BYTES, run_id=record.key)
    if state.run_id != record.key:
        raise AgentRunStateError("agent run state names another run than its record")
    pending = len(state.interruption.pending_decisions) if state.interruption is not None else 0
    return AgentRunSummary(
        run_id=state.run_id,
        session_id=state.session_id,
        agent_id=state.agent_id,
        status=state.status,
        version=record.version,
        updated_at=record.updated_at,
        pending_decisions=pending,
        in_doubt=in_doubt_calls(state),
        lease_expires_at=lease_expires_at(record),
        started_by=state.started_by,
        parent_run_id=state.parent_run_id,
    )


def _encode_cursor(store_cursor: str | None, after_key: str | None, indexed: bool) -> str:
    raw = json.dumps({"c": store_cursor, "k": after_key, "i": indexed}, separators=(",", ":"))
    return _CURSOR_TAG + base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii")


def _decode_cursor(cursor: str, indexed: bool) -> tuple[str | None, str | None]:
    bad = InvalidCheckpointError("cursor is not one list_agent_runs returned for these filters")
    if not cursor.startswith(_CURSOR_TAG):
        raise bad
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor[len(_CURSOR_TAG) :].encode("ascii")))
    except (UnicodeError, binascii.Error, ValueError):
        raise bad from None
    if not isinstance(data, dict) or data.get("i") is not indexed:
        raise bad
    store_cursor, after_key = data.get("c"), data.get("k")
    if not all(part is None or isinstance(part, str) for part in (store_cursor, after_key)):
        raise bad
    return store_cursor, after_key


def _unseen(records: tuple[CheckpointRecord, ...], after_key: str | None) -> list[CheckpointRecord]:
    """The records of a page re-read from its start that come after ``after_key``."""
    if after_key is None:
        return list(records)
    keys = [record.key for record in records]
    if after_key in keys:
        return list(records[keys.index(after_key) + 1 :])
    # The last returned record was deleted meanwhile: fall back to comparing keys.
    return [record for record in records if record.key > after_key]


async def list_agent_runs(
    checkpoints: CheckpointStore,
    *,
    status: RunStatus | None = None,
    ownership: Mapping[str, str] | None = None,
    recoverable: bool | None = None,
    limit: int = 100,
    cursor: str | None = None,
    parent_run_id: str | None = None,
    top_level: bool | None = None,
) -> AgentRunPage:
    """One page of the durable runs visible to ``ownership``, in run id order.

    ``status`` keeps runs of that status; ``recoverable=True`` keeps runs no worker holds
    (see :func:`is_recoverable`), ``False`` the others. ``parent_run_id`` keeps the sub-agent
    runs that run's calls started; ``top_level=True`` keeps runs no other run started,
    ``False`` only sub-agent runs. ``ownership`` is matched exactly, as in every store call:
    other tenants' runs are never listed. Pass a page's ``cursor`` back for the next page,
    with the same filters. Malformed arguments raise
    :class:`~prism_core.InvalidCheckpointError` before any store access.
    """
    check_store(checkpoints)
    validate_list(limit, cursor)
    if status is not None and status not in RUN_STATUSES:
        raise InvalidCheckpointError(f"status must be one of {', '.join(RUN_STATUSES)}")
    if recoverable is not None and not isinstance(recoverable, bool):
        raise InvalidCheckpointError("recoverable must be True, False or None")
    if top_level is not None and not isinstance(top_level, bool):
        raise InvalidCheckpointError("top_level must be True, False or None")
    if parent_run_id is not None and (type(parent_run_id) is not str or not parent_run_id):
        raise InvalidCheckpointError("parent_run_id must be a non-empty string")
    owner = normalise_ownership(ownership)
    wanted: str | None = status
    if recoverable is True:
        if status not in (None, "running"):
            return AgentRunPage(())
        wanted = "running"
    by_status = capability(checkpoints, CheckpointStatusIndex) if wanted is not None else None
    indexed = by_status is not None
    store_cursor, after_key = (None, None) if cursor is None else _decode_cursor(cursor, indexed)
    lineage = parent_run_id is not None or top_level is not None
    filtered = recoverable is not None or lineage or (wanted is not None and not indexed)
    page_size = max(limit, _FILTERED_PAGE_SIZE) if filtered else limit
    page_size = min(page_size, MAX_CHECKPOINT_PAGE_SIZE)
    now = time.time()
    runs: list[AgentRunSummary] = []
    unreadable: list[UnreadableRecord] = []

    def done(cursor: str | None, last_key: str | None = None) -> AgentRunPage:
        shown = [u for u in unreadable if last_key is None or u.key <= last_key]
        return AgentRunPage(tuple(runs), cursor, tuple(shown))

    while True:
        page: CheckpointPage
        if by_status is not None:
            assert wanted is not None
            page = await by_status.list_by_status(
                AGENT_RUN_NAMESPACE, wanted, ownership=owner, limit=page_size, cursor=store_cursor
            )
        else:
            page = await checkpoints.list(
                AGENT_RUN_NAMESPACE, ownership=owner, limit=page_size, cursor=store_cursor
            )
        unseen = _unseen(page.records, after_key)
        unreadable.extend(u for u in page.unreadable if after_key is None or u.key > after_key)
        for index, record in enumerate(unseen):
            try:
                summary = summarize_run(record)
            except AgentRunStateError as exc:
                logger.warning("run record %r is not a run state; not listed: %s", record.key, exc)
                unreadable.append(
                    UnreadableRecord(
                        namespace=record.namespace,
                        key=record.key,
                        reason=f"not a run state: {exc}",
                    )
                )
                continue
            if wanted is not None and summary.status != wanted:
                continue
            if recoverable is not None and is_recoverable(summary, now=now) != recoverable:
                continue
            if parent_run_id is not None and summary.parent_run_id != parent_run_id:
                continue
            if top_level is not None and (summary.parent_run_id is None) != top_level:
                continue
            runs.append(summary)
            if len(runs) == limit:
                more = index + 1 < len(unseen) or page.cursor is not None
                if not more:
                    return done(None)
                if index + 1 == len(unseen):
                    return done(_encode_cursor(page.cursor, None, indexed))
                return done(_encode_cursor(store_cursor, record.key, indexed), record.key)
        if page.cursor is None:
            return done(None)
        store_cursor, after_key = page.cursor, None
