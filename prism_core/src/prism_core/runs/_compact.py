"""Compacting a session's branch: one ``compaction`` entry replaces the older entries.

Owns what ``session.compact()`` and automatic compaction do once compaction is decided: the
keep-recent default and its check, the strategy's summary through ``compaction`` middleware,
its redaction, the ``compaction`` entry, reloading the history and the
``compaction_started``/``compaction_finished`` events. It works on the session's
:class:`~prism_core.records._transcript.Transcript`; it must not decide when to compact (that
is ``session.compact()``'s, or the run boundary's in ``_boundary``), and the strategy contract
is ``_compaction``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from ..events import AgentEvent, CompactionFinishedEvent, CompactionStartedEvent
from ..middleware import MiddlewareChain, MiddlewareContext
from ..records._transcript import Transcript
from ..redaction import Redactor, redact_value
from ..signals import AbortSignal
from ._compaction import (
    DEFAULT_KEEP_RECENT_ENTRIES,
    CompactionConfig,
    CompactionContext,
    CompactionResult,
    CompactionStrategy,
    kept_window_start,
    run_strategy,
)
from ._options import InvalidOptionsError

__all__ = ("compact_branch", "resolve_keep_recent")


def resolve_keep_recent(config: CompactionConfig | None, keep: int | None) -> int:
    """The number of recent entries a compaction keeps: ``keep``, else the agent's
    configuration, else 4; anything but an integer >= 0 is refused."""
    if keep is None:
        keep = config.keep_recent_entries if config is not None else DEFAULT_KEEP_RECENT_ENTRIES
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
        raise InvalidOptionsError("keep_recent_entries must be an integer >= 0")
    return keep


async def compact_branch(
    transcript: Transcript,
    *,
    metadata: dict[str, Any],
    middleware: MiddlewareChain,
    redactor: Redactor | None,
    keep_recent: int,
    strategy: CompactionStrategy | None,
    run_id: str | None,
    signal: AbortSignal | None,
    emit: Callable[[AgentEvent], Any],
) -> CompactionResult | None:
    """Compact the session's current branch, keeping the last ``keep_recent`` entries.

    Returns ``None`` when there is nothing to compact (or the branch already ends with a
    compaction); otherwise the result, with its redacted summary and the new entry's id.
    ``metadata`` and ``middleware`` are the session's; ``redactor`` redacts the summary.
    """
    session_id = transcript.session_id
    path = await transcript.read_branch(transcript.leaf_id)
    if not path or path[-1].kind == "compaction":
        return None
    start = kept_window_start(path, keep_recent)
    if start == 0:
        return None
    context = CompactionContext(
        session_id=session_id,
        run_id=run_id,
        entries=tuple(path),
        compacted=tuple(path[:start]),
        kept=tuple(path[start:]),
        signal=signal,
    )
    emit(CompactionStartedEvent(session_id=session_id, run_id=run_id))
    result = await run_strategy(strategy, context)
    result = await middleware.run(
        "compaction",
        result,
        MiddlewareContext(
            point="compaction",
            session_id=session_id,
            run_id=run_id,
            metadata=metadata,
            signal=signal,
        ),
    )
    summary = redact_value(result.summary, redactor)
    entry = await transcript.append_entry(
        kind="compaction",
        run_id=run_id,
        summary=summary,
        first_kept_entry_id=result.first_kept_entry_id,
        data=result.data,
    )
    result = attrs.evolve(result, summary=summary, entry_id=entry.id)
    transcript.load([*path, entry])
    emit(
        CompactionFinishedEvent(
            session_id=session_id, run_id=run_id, entry_id=entry.id, summary=summary
        )
    )
    return result
