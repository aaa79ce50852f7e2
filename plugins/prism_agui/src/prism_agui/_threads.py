"""Threads: which caller a thread belongs to and which run it ran last.

A thread is a Prism session (``threadId`` is the session id). Its record in the checkpoint
store, under ``THREAD_NAMESPACE`` and the caller's ownership, binds it to the caller who
started it (another caller's load reads as absent, and its save conflicts) and names the
thread's latest run, the one a ``resume`` answers. Every write is a compare-and-swap, so two
requests racing on one thread cannot both start a run.
"""

from __future__ import annotations

from typing import Any

import attrs

from prism_core import CheckpointConflictError, CheckpointStore

from ._errors import ThreadUnavailable

__all__ = ("THREAD_NAMESPACE", "Thread", "claim_thread", "load_thread")

THREAD_NAMESPACE = "prism.agui-thread"


@attrs.frozen
class Thread:
    """A thread's record: its checkpoint ``version`` (0: not written yet) and latest run."""

    thread_id: str
    version: int = 0
    run_id: str | None = None


async def load_thread(
    checkpoints: CheckpointStore, thread_id: str, scope: dict[str, str] | None
) -> Thread | None:
    """The caller's record of ``thread_id``, or ``None`` (absent, or another caller's)."""
    record = await checkpoints.load(THREAD_NAMESPACE, thread_id, ownership=scope)
    if record is None:
        return None
    value: Any = record.value
    run_id = value.get("run_id") if isinstance(value, dict) else None
    return Thread(thread_id, record.version, run_id if isinstance(run_id, str) else None)


async def claim_thread(
    checkpoints: CheckpointStore, thread: Thread, run_id: str, scope: dict[str, str] | None
) -> Thread:
    """Record ``run_id`` as the thread's latest run, if nobody wrote the record since it was
    read (:class:`ThreadUnavailable` otherwise: another request, or another caller)."""
    try:
        record = await checkpoints.save(
            THREAD_NAMESPACE,
            thread.thread_id,
            {"run_id": run_id},
            version=thread.version + 1,
            expected_version=thread.version,
            ownership=scope,
        )
    except CheckpointConflictError:
        raise ThreadUnavailable(
            "the thread is not available to this caller (another caller's thread, or another "
            "run started on it just now)"
        ) from None
    return Thread(thread.thread_id, record.version, run_id)
