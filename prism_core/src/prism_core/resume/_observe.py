"""Observing a durable run from its stores: what an HTTP client watches while a worker runs it.

A run decided on one door runs in a worker, perhaps another process; the door's client
watches it from the stores, never by owning it: leaving (a closed connection) stops the
watching only. :func:`observe_agent_run` yields the run's progress as events rebuilt from what
is stored, each with an id a client can resume after (``Last-Event-ID``):

- each entry the run appended to its session, in append order: an assistant message as
  ``message_finished`` (with its tool calls), a tool result as ``tool_execution_finished``,
  or as ``tool_execution_blocked`` when its error's code says the call never ran (a guard, a
  rejection, an unknown or invalid call: :data:`BLOCK_CODES`); id ``"<n>"``, the entry's
  position among the run's entries (1-based);
- the run's stop, once its checkpoint records one: ``agent_suspended``, ``agent_finished``,
  ``agent_denied`` or ``error`` (failed, aborted); id ``"<n>.v<version>"`` (``n`` entries
  before it, at checkpoint ``version``). The observation ends there.

Resuming after an id replays what followed it from the stores, so nothing is missed and nothing
is repeated. A run a worker left as it is (it could not continue it, and noted why on the run's
work mark) ends the observation with :class:`RunLeftError`, carrying the worker's refusal code:
nothing will move the run until someone decides again. While the run is ``running`` the
observer reads the stores again after a pause that starts short and grows (to ``max_poll_ms``);
a checkpoint that moved wakes it the next time it looks. It reads; it must not write or run
anything."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
import attrs

from ..content import ErrorInfo, ToolResult, ToolResultContent
from ..durable._checkpoints import CheckpointStore
from ..durable._work import read_refusal
from ..errors import AgentRunNotFoundError, AgentRunStateError
from ..events import (
    AgentDeniedEvent,
    AgentEvent,
    AgentFinishedEvent,
    AgentSuspendedEvent,
    ErrorEvent,
    MessageFinishedEvent,
    ToolExecutionBlockedEvent,
    ToolExecutionFinishedEvent,
)
from ..records._entries import SessionEntry
from ..records._run_tail import read_branch_and_run_tail
from ._checks import AgentRunStatus, load_agent_run_state, not_found

__all__ = (
    "BLOCK_CODES",
    "ObservedEvent",
    "RunLeftError",
    "observation_point",
    "observe_agent_run",
    "parse_event_id",
)

#: The error codes of a stored tool result whose call never ran (the reasons the run loop
#: gives ``tool_execution_blocked``).
BLOCK_CODES = frozenset(
    {
        "guardrail_blocked",
        "approval_rejected",
        "unknown_tool",
        "tool_not_allowed",
        "invalid_json_arguments",
        "invalid_arguments",
        "validation_failed",
        "ERR_PRISM_TOOL_ARGUMENTS",
    }
)
_ID = re.compile(r"(\d{1,9})(?:\.v(\d{1,18}))?")
_FIRST_PAUSE = 0.02


class RunLeftError(AgentRunStateError):
    """A worker left the observed run as it is; ``code`` is the worker's refusal code (a
    call in doubt, a restore hook that failed, an agent no longer served...)."""


@attrs.frozen
class ObservedEvent:
    """One observed event and the id to resume after it."""

    id: str
    event: AgentEvent


def parse_event_id(value: str | None) -> tuple[int, int | None]:
    """``(entries seen, stop version seen or None)`` of an event id; ``(0, None)`` for
    ``None``. Raises :class:`ValueError` for an id this observer never gave."""
    if value is None or value == "":
        return 0, None
    found = _ID.fullmatch(value)
    if found is None:
        raise ValueError("not an event id of this run's stream")
    return int(found.group(1)), int(found.group(2)) if found.group(2) else None


def _entry_event(entry: SessionEntry, run_id: str) -> AgentEvent | None:
    message = entry.message
    if entry.kind != "message" or message is None:
        return None
    if message.role == "assistant":
        return MessageFinishedEvent(session_id=entry.session_id, run_id=run_id, message=message)
    if message.role == "tool":
        for block in message.content:
            if isinstance(block, ToolResultContent):
                error = block.error
                if error is not None and error.code in BLOCK_CODES:
                    return ToolExecutionBlockedEvent(
                        session_id=entry.session_id,
                        run_id=run_id,
                        tool_call_id=block.tool_call_id,
                        name=block.name,
                        reason=error.code or "",
                        error=error,
                    )
                result = ToolResult(block.tool_call_id, block.name, block.value, block.error)
                return ToolExecutionFinishedEvent(
                    session_id=entry.session_id,
                    run_id=run_id,
                    tool_call_id=block.tool_call_id,
                    name=block.name,
                    result=result,
                )
    return None


def _stop_event(status: AgentRunStatus) -> AgentEvent | None:
    state = status.state
    common: dict[str, Any] = {"session_id": state.session_id, "run_id": state.run_id}
    if state.status == "suspended":
        return AgentSuspendedEvent(
            **common, interruption=state.interruption, version=status.version
        )
    if state.status == "succeeded":
        return AgentFinishedEvent(
            **common,
            leaf_id=state.leaf_id,
            stop_reason=state.stop_reason,
            finish_reason=state.stop_reason,
            stop_detail=state.stop_detail,
        )
    if state.status == "denied":
        return AgentDeniedEvent(**common, version=status.version)
    if state.status in ("failed", "aborted"):
        error = state.error or ErrorInfo(f"run {state.status}", code=None)
        return ErrorEvent(**common, error=error, status=state.status)
    return None


async def _entries(sessions: Any, session_id: str, run_id: str) -> list[SessionEntry]:
    """The run's entries that make an event, in append order."""
    read = await read_branch_and_run_tail(sessions, session_id, None, run_id)
    return [e for e in read.tail if _entry_event(e, run_id) is not None]


async def observation_point(
    checkpoints: CheckpointStore,
    sessions: Any,
    run_id: str,
    *,
    ownership: Mapping[str, str] | None = None,
) -> str:
    """The event id of the run as its stores hold it now: observing after it yields only
    what happens from here on (take it before recording a decision, so nothing a fast worker
    does in between is missed). Raises :class:`~prism_core.AgentRunNotFoundError` for a run
    absent from ``ownership``'s scope."""
    status = await load_agent_run_state(checkpoints, {"run_id": run_id}, ownership=ownership)
    if status is None:
        raise AgentRunNotFoundError(not_found(run_id))
    entries = await _entries(sessions, status.state.session_id, run_id)
    return f"{len(entries)}.v{status.version}"


async def observe_agent_run(
    checkpoints: CheckpointStore,
    sessions: Any,
    run_id: str,
    *,
    ownership: Mapping[str, str] | None = None,
    after: str | None = None,
    max_poll_ms: int = 500,
) -> AsyncIterator[ObservedEvent]:
    """The run's events from its stores, after the event id ``after``, up to and including
    its next stop (see the module docstring). Raises :class:`~prism_core.AgentRunNotFoundError`
    for a run absent from ``ownership``'s scope and :class:`ValueError` for a malformed
    ``after``, before yielding anything."""
    seen, stop_seen = parse_event_id(after)
    pause = _FIRST_PAUSE
    last_version: int | None = None
    while True:
        status = await load_agent_run_state(checkpoints, {"run_id": run_id}, ownership=ownership)
        if status is None:
            raise AgentRunNotFoundError(not_found(run_id))
        if status.version != last_version:
            last_version, pause = status.version, _FIRST_PAUSE
            state = status.state
            entries = await _entries(sessions, state.session_id, run_id)
            for index in range(seen, len(entries)):
                event = _entry_event(entries[index], run_id)
                assert event is not None
                seen = index + 1
                yield ObservedEvent(str(seen), event)
            stop = _stop_event(status) if state.status != "running" else None
            if stop is not None:
                if stop_seen is None or status.version > stop_seen:
                    yield ObservedEvent(f"{seen}.v{status.version}", stop)
                return
        if status.state.status == "running":
            refusal = await read_refusal(checkpoints, run_id, status.version)
            if refusal is not None:
                raise RunLeftError(
                    f"a worker left run {run_id} as it is: {refusal.message}", code=refusal.code
                )
        await anyio.sleep(pause)
        pause = min(pause * 2, max_poll_ms / 1000)
