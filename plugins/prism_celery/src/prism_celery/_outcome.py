"""What a run task returns or asks of Celery: its JSON result, or a retry later."""

from __future__ import annotations

import time
from typing import Any

__all__ = ("SUPERSEDED_CODES", "RetryLater", "lease_wait_seconds", "outcome", "retry_after_lease")

#: Error codes a worker gets when another worker has claimed its run since: it stops.
SUPERSEDED_CODES = frozenset({"ERR_PRISM_CHECKPOINT_CONFLICT", "ERR_PRISM_FENCING_TOKEN"})

#: How long past a lease's expiry a reader still treats it as held: the kernel's allowance
#: for clock skew between the writer's machine and the reader's.
_LEASE_SKEW_SECONDS = 2.0


class RetryLater(Exception):
    """The task should run again in ``countdown`` seconds (a live lease, a young claim, a
    store that did not answer); ``reason`` says why, for the task's retry record."""

    def __init__(self, countdown: float, reason: str) -> None:
        super().__init__(reason)
        self.countdown = countdown
        self.reason = reason


def outcome(run_id: str, session_id: str, status: str) -> dict[str, Any]:
    """A task's JSON result: never the transcript, only where the run stands."""
    return {"run_id": run_id, "session_id": session_id, "status": status}


def lease_wait_seconds(expires_at_ms: int | None) -> float:
    """Seconds until a lease expiring at ``expires_at_ms`` (epoch ms) stops being live for a
    reader, skew allowance included; ``0`` without a lease."""
    if expires_at_ms is None:
        return 0.0
    return max(0.0, expires_at_ms / 1000 + _LEASE_SKEW_SECONDS - time.time())


def retry_after_lease(expires_at_ms: int | None, reason: str) -> RetryLater:
    """A retry for when the lease expiring at ``expires_at_ms`` stops being live, and not
    sooner than in a second (a lease about to expire, or none, is looked at again then)."""
    return RetryLater(max(1.0, lease_wait_seconds(expires_at_ms)), reason)
