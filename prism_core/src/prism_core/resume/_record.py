"""Decide here, run there: recording decisions without running them.

``decide_agent_run`` validates a resume input exactly as ``resume_agent_run`` does (shape,
ownership, revision and fingerprint, version and status, batch rules, revalidated edits) and
records the decisions, audited, in one compare-and-swap write; it runs no tool, no model turn,
no restore hook and no ``reconcile``. A ``deny`` and a partial batch settle as they do on a
resume (denied; suspended again with the rest). Any other decision leaves the run
``running`` with no live lease: a worker's ``continue`` (``run_worker``, ``prism worker``,
``RunTasks.continue_run``, ``prism runs continue --here``) runs it, approved calls dispatch
once and rejected ones reach the model as rejections. The recorder then leaves a work mark
for the run (``durable/_work.py``) and wakes the workers watching the store
(``durable/_wakeups.py``).

It must not run a tool or a turn; the pipeline (``_pipeline``) does the validation.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from .._capability import capability
from ..durable._checkpoints import CheckpointStore
from ..durable._wakeups import RunWakeups
from ..durable._work import mark_work
from ..errors import AgentRunNotFoundError
from ._checks import AgentRunStatus, load_agent_run_state, not_found
from ._input import coerce_run_ref
from ._pipeline import Prepared, Recorded, Settled

__all__ = ("decided_status", "notify_workers")

logger = logging.getLogger(__package__ or __name__)


async def notify_workers(checkpoints: CheckpointStore) -> None:
    """Wake the workers watching ``checkpoints`` (a no-op for a store that cannot)."""
    wakeups = capability(checkpoints, RunWakeups)
    if wakeups is None:
        return
    try:
        await wakeups.notify_runs()
    except Exception as exc:
        # A wake-up is a hint: the mark is written, a worker's poll finds it.
        logger.warning("could not wake the workers: %s", exc)


async def decided_status(
    prepared: Prepared | Settled | Recorded,
    checkpoints: CheckpointStore,
    ownership: Mapping[str, str] | None,
    ref: Any,
) -> AgentRunStatus:
    """Finish a recorded decision: mark the run for a worker and wake the workers (when it
    was left running), then read the run back as its checkpoint now records it."""
    assert not isinstance(prepared, Prepared)
    run_id = coerce_run_ref(ref).run_id
    if isinstance(prepared, Recorded):
        await mark_work(checkpoints, prepared.run_id, prepared.version, ownership)
        await notify_workers(checkpoints)
    status = await load_agent_run_state(checkpoints, {"run_id": run_id}, ownership=ownership)
    if status is None:
        # Deleted between the write and the read: report it as the resume would have.
        raise AgentRunNotFoundError(not_found(run_id))
    return status
