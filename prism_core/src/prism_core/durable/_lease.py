"""Leases: which worker is working on a running durable run, and until when.

Where the lease lives: in the run state itself, as two optional fields of the stored JSON,
``lease_ms`` (the lease's length, set by ``RunStateOptions(lease_ms=...)`` and carried over by
every resume) and ``lease_expires_at`` (wall-clock **milliseconds since the epoch**, from the
writer's clock). Both are absent for runs without a lease. Every checkpoint write of a leased
run stamps ``lease_expires_at = now + lease_ms`` while the run is ``running``, so taking and
extending the lease costs no extra round trip; a suspended or ended run holds no lease (the
field is absent). Readers use :func:`lease_expires_at` on a state or :func:`record_lease` on a
raw record.

A reader treats a lease as live until ``lease_expires_at + LEASE_CLOCK_SKEW_MS``: the writer's
and the reader's clocks may disagree by up to that much. A ``running`` run whose lease has
expired (or that never had one) is recoverable.

Renewal: while a step of a leased run is in flight (a provider call, a tool), a task in a task
group owned by that step writes the last state again with a fresh expiry every third of the
lease. On a store that offers ``renew_lease`` (:class:`~prism_core.stores.LeaseRenewalStore`)
the renewal keeps the version: the value is rewritten in place, conditional on the writer's
version and fencing token, so the version an operator last read stays valid. A third-party
store without it gets an ordinary checkpoint save, which bumps the version; either way a
superseded worker cannot extend a lease it no longer holds.

It must not write: it reads and computes leases, and the writer stamps them.
"""

from __future__ import annotations

import time

from ..errors import AgentRunStateError
from ._checkpoints import CheckpointRecord
from ._options import MAX_LEASE_MS, MIN_LEASE_MS, validate_lease_ms
from ._state import AgentRunState

__all__ = (
    "LEASED",
    "LEASE_CLOCK_SKEW_MS",
    "MAX_LEASE_MS",
    "MIN_LEASE_MS",
    "check_lease",
    "lease_expires_at",
    "lease_is_live",
    "now_ms",
    "record_lease",
    "recoverable",
    "validate_lease_ms",
)

#: How far a reader trusts a writer's clock: a lease is live until expiry plus this.
LEASE_CLOCK_SKEW_MS = 2000

LEASED = (
    "The run is leased by a live worker; wait until its lease expires or resume with force=True"
)


def now_ms() -> int:
    """The wall clock in milliseconds since the epoch (the unit of ``lease_expires_at``)."""
    return int(time.time() * 1000)


def lease_expires_at(state: AgentRunState) -> int | None:
    """When ``state``'s lease expires (epoch ms), or ``None`` when the run holds no lease."""
    if state.status != "running":
        return None
    return state.lease_expires_at


def record_lease(record: CheckpointRecord) -> int | None:
    """:func:`lease_expires_at` of a raw ``prism.agent-run`` record without structuring it
    (``None`` for malformed values)."""
    value = record.value
    if not isinstance(value, dict) or value.get("status") != "running":
        return None
    expires = value.get("lease_expires_at")
    if isinstance(expires, bool) or not isinstance(expires, int):
        return None
    return expires


def lease_is_live(
    expires_at: int | None, *, now: int | None = None, skew_ms: int = LEASE_CLOCK_SKEW_MS
) -> bool:
    """Whether a lease expiring at ``expires_at`` may still be held, given clock skew."""
    if expires_at is None:
        return False
    current = now_ms() if now is None else now
    return current < expires_at + skew_ms


def check_lease(state: AgentRunState, *, force: bool) -> None:
    """Refuse to claim a run another worker holds a live lease on, unless ``force``."""
    if not force and lease_is_live(lease_expires_at(state)):
        raise AgentRunStateError(LEASED, code="ERR_PRISM_RUN_LEASED")


def recoverable(state: AgentRunState, *, now: int | None = None) -> bool:
    """Whether a ``continue`` may pick the run up without ``force``: it is ``running`` and no
    worker holds a live lease on it (expired, or never leased)."""
    return state.status == "running" and not lease_is_live(lease_expires_at(state), now=now)
