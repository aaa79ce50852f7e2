"""Compacting a session's branch: one ``compaction`` entry replaces the older entries.

Owns what ``session.compact()`` and automatic compaction do once compaction is decided: the
keep-recent default and its check, the strategy's summary through ``compaction`` middleware,
its redaction, the ``compaction`` entry, reloading the history and the
``compaction_started``/``compaction_finished`` events. It reads the session through
:class:`CompactingSession`; when to compact is the caller's (``session.compact()``, or the run
boundary in ``runs/_boundary``), and the strategy contract is ``runs/_compaction``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import attrs

from ..events import AgentEvent, CompactionFinishedEvent, CompactionStartedEvent
from ..middleware import MiddlewareContext
from ..records._entries import SessionEntry
from ..redaction import redact_value
from ..runs._compaction import (
    CompactionConfig,
    CompactionContext,
    CompactionResult,
    CompactionStrategy,
    kept_window_start,
    run_strategy,
)
from ..runs._options import InvalidOptionsError
from ..signals import AbortSignal
from ._ports import SessionAgent

__all__ = ("CompactingSession", "compact_branch", "resolve_keep_recent")

#: How many entries ``session.compact()`` keeps when neither it nor the agent says.
DEFAULT_KEEP_RECENT_ENTRIES = 4


class CompactingSession(Protocol):
    """What compaction uses of the session it compacts (``AgentSession`` satisfies it)."""

    agent: SessionAgent
    id: str
    leaf_id: str | None
    metadata: dict[str, Any]

    async def _read_branch(self, leaf_id: str | None) -> list[SessionEntry]:
        """The branch ending at ``leaf_id``, root first, held entries included."""
        ...

    async def _append_entry(self, *, kind: Any, run_id: str | None, **payload: Any) -> SessionEntry:
        """Append one entry at the leaf (or hold it for the durable run's next commit)."""
        ...

    def _load_history(self, path: list[SessionEntry]) -> None:
        """Take ``path`` (the branch, root first) as the session's history."""
        ...


def resolve_keep_recent(config: CompactionConfig | None, keep: int | None) -> int:
    """The number of recent entries a compaction keeps: ``keep``, else the agent's
    configuration, else 4; anything but an integer >= 0 is refused."""
    if keep is None:
        keep = config.keep_recent_entries if config is not None else DEFAULT_KEEP_RECENT_ENTRIES
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
        raise InvalidOptionsError("keep_recent_entries must be an integer >= 0")
    return keep


async def compact_branch(
    session: CompactingSession,
    *,
    keep_recent: int,
    strategy: CompactionStrategy | None,
    run_id: str | None,
    signal: AbortSignal | None,
    emit: Callable[[AgentEvent], Any],
) -> CompactionResult | None:
    """Compact the session's current branch, keeping the last ``keep_recent`` entries.

    Returns ``None`` when there is nothing to compact (or the branch already ends with a
    compaction); otherwise the result, with its redacted summary and the new entry's id.
    """
    path = await session._read_branch(session.leaf_id)
    if not path or path[-1].kind == "compaction":
        return None
    start = kept_window_start(path, keep_recent)
    if start == 0:
        return None
    context = CompactionContext(
        session_id=session.id,
        run_id=run_id,
        entries=tuple(path),
        compacted=tuple(path[:start]),
        kept=tuple(path[start:]),
        signal=signal,
    )
    emit(CompactionStartedEvent(session_id=session.id, run_id=run_id))
    result = await run_strategy(strategy, context)
    result = await session.agent.middleware.run(
        "compaction",
        result,
        MiddlewareContext(
            point="compaction",
            session_id=session.id,
            run_id=run_id,
            metadata=session.metadata,
            signal=signal,
        ),
    )
    summary = redact_value(result.summary, session.agent.redactor)
    entry = await session._append_entry(
        kind="compaction",
        run_id=run_id,
        summary=summary,
        first_kept_entry_id=result.first_kept_entry_id,
        data=result.data,
    )
    result = attrs.evolve(result, summary=summary, entry_id=entry.id)
    session._load_history([*path, entry])
    emit(
        CompactionFinishedEvent(
            session_id=session.id, run_id=run_id, entry_id=entry.id, summary=summary
        )
    )
    return result
