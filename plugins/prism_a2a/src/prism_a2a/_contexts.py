"""Who may continue a conversation: each A2A context is claimed in the checkpoint store.

Sessions carry no owner, so a ``contextId`` alone would let any caller add to (and read the
answers of) anyone's conversation. Each context the endpoint serves has a **context claim**:
namespace ``prism.a2a.context``, key = the session id, value ``{"agent_id", "run_id",
"claimed_at"}`` (the context's latest task), saved under the caller's ownership. A claim
another owner holds reads as absent, and a session that already has entries but no claim of
this caller's (another owner's conversation, or one started outside A2A) is refused; a new id
is claimed with ``expected_version=0``, so two first messages cannot both win.

One task runs or waits at a time per context: a new task is refused while the previous one
still runs or waits for input, and the claim moves to the new run with a compare-and-swap on
its version (a message racing it loses and starts nothing more). A claimed run that has no
checkpoint yet counts as working for ``STARTING_GRACE_S`` seconds (it has not reached its first
turn boundary); after that it died before one, so nothing of it ran and the context is free.
"""

from __future__ import annotations

import time
import uuid

from prism_core import CheckpointConflictError, CheckpointRecord

from ._errors import ContextRefused
from ._runs import PrismRuns, Scope

__all__ = ("CONTEXT_NAMESPACE", "ContextClaims")

#: Where the context claims live in the checkpoint store.
CONTEXT_NAMESPACE = "prism.a2a.context"
#: How long a claimed run without a checkpoint keeps its context busy.
STARTING_GRACE_S = 60.0


class ContextClaims:
    """Reads and moves the claims of ``runs``'s contexts."""

    def __init__(self, runs: PrismRuns) -> None:
        self._runs = runs

    @staticmethod
    def new_id() -> str:
        """A fresh session id for a task that names no context."""
        return f"session_{uuid.uuid4().hex}"

    async def check(
        self, session_id: str, scope: Scope
    ) -> tuple[CheckpointRecord | None, str | None]:
        """The caller's claim of ``session_id`` (``None`` for a context nobody has used) and
        the leaf the context's last task ended on (``None``: the session's newest entry);
        :class:`ContextRefused` when the context is not the caller's or is busy."""
        runs = self._runs
        record = await runs.checkpoints.load(CONTEXT_NAMESPACE, session_id, ownership=scope)
        if record is None:
            if await runs.sessions.list(session_id):
                raise ContextRefused(f"unknown context {session_id!r}")
            return None, None
        if record.value.get("agent_id") != runs.agent_id:
            raise ContextRefused(f"unknown context {session_id!r}")
        run_id = str(record.value.get("run_id"))
        previous = await runs.status(run_id, scope)
        if previous is None:
            claimed_at = record.value.get("claimed_at")
            busy = isinstance(claimed_at, int | float) and (
                time.time() - claimed_at < STARTING_GRACE_S
            )
            status = "running" if busy else None
        else:
            status = previous.state.status
        if status in ("running", "suspended"):
            state = "waits for input" if status == "suspended" else "is working"
            raise ContextRefused(
                f"task {run_id} of context {session_id!r} {state}; "
                "answer or cancel it before starting another"
            )
        return record, previous.state.leaf_id if previous is not None else None

    async def move(
        self, session_id: str, run_id: str, claim: CheckpointRecord | None, scope: Scope
    ) -> None:
        """Point the context's claim at ``run_id`` if nobody moved it since ``claim`` was read;
        :class:`ContextRefused` when somebody did."""
        version = claim.version if claim is not None else 0
        try:
            await self._runs.checkpoints.save(
                CONTEXT_NAMESPACE,
                session_id,
                {"agent_id": self._runs.agent_id, "run_id": run_id, "claimed_at": time.time()},
                version=version + 1,
                expected_version=version,
                ownership=scope,
            )
        except CheckpointConflictError as exc:
            raise ContextRefused(
                f"another task started on context {session_id!r} at the same time"
            ) from exc
