"""Who may continue a conversation: each A2A context is claimed in the checkpoint store.

Sessions carry no owner, so a ``contextId`` alone would let any caller add to (and read the
answers of) anyone's conversation. Each context the endpoint serves is a session claim of the
web layer (:class:`prism_web.SessionClaims`, namespace ``prism.a2a.context``, key = the session
id, value ``{"agent_id", "run_id", "claimed_at"}``: the context's latest task), saved under
the caller's ownership. A claim another owner (or another agent) holds reads as unknown, and a
session that already has entries but no claim of this caller's (another owner's conversation,
or one started outside A2A) is refused; a new id is claimed with ``expected_version=0``, so
two first messages cannot both win.

One task runs or waits at a time per context: a new task is refused while the previous one
still runs or waits for input, and the claim moves to the new run with a compare-and-swap on
its version (a message racing it loses and starts nothing more). A claimed run that has no
checkpoint yet counts as working for ``STARTING_GRACE_S`` seconds (it has not reached its first
turn boundary); after that it died before one, so nothing of it ran and the context is free.
"""

from __future__ import annotations

import time
import uuid

from prism_core import PrismError
from prism_web import SessionClaim, SessionClaims

from ._errors import ContextRefused
from ._runs import PrismRuns, Scope

__all__ = ("CONTEXT_NAMESPACE", "ContextClaims")

#: Where the context claims live in the checkpoint store.
CONTEXT_NAMESPACE = "prism.a2a.context"
#: How long a claimed run without a checkpoint keeps its context busy.
STARTING_GRACE_S = 60.0


def _refuse(session_id: str, why: str) -> PrismError:
    if why == "taken":
        return ContextRefused(f"another task started on context {session_id!r} at the same time")
    return ContextRefused(f"unknown context {session_id!r}")


class ContextClaims:
    """Reads and moves the claims of ``runs``'s contexts."""

    def __init__(self, runs: PrismRuns) -> None:
        self._runs = runs
        self._claims = SessionClaims(
            runs.checkpoints,
            runs.sessions,
            namespace=CONTEXT_NAMESPACE,
            agent_id=runs.agent_id,
            refuse=_refuse,
        )

    @staticmethod
    def new_id() -> str:
        """A fresh session id for a task that names no context."""
        return f"session_{uuid.uuid4().hex}"

    async def check(self, session_id: str, scope: Scope) -> tuple[SessionClaim, str | None]:
        """The caller's claim of ``session_id`` (version 0 for a context nobody has used) and
        the leaf the context's last task ended on (``None``: the session's newest entry);
        :class:`ContextRefused` when the context is not the caller's or is busy."""
        claim = await self._claims.read(session_id, scope)
        if claim.version == 0:
            return claim, None
        if claim.run_id is None or claim.agent_id != self._runs.agent_id:
            raise _refuse(session_id, "unknown")
        previous = await self._runs.status(claim.run_id, scope)
        if previous is None:
            busy = claim.claimed_at is not None and time.time() - claim.claimed_at < (
                STARTING_GRACE_S
            )
            status = "running" if busy else None
        else:
            status = previous.state.status
        if status in ("running", "suspended"):
            state = "waits for input" if status == "suspended" else "is working"
            raise ContextRefused(
                f"task {claim.run_id} of context {session_id!r} {state}; "
                "answer or cancel it before starting another"
            )
        return claim, previous.state.leaf_id if previous is not None else None

    async def move(self, session_id: str, run_id: str, claim: SessionClaim, scope: Scope) -> None:
        """Point the context's claim at ``run_id`` if nobody moved it since ``claim`` was read;
        :class:`ContextRefused` when somebody did."""
        await self._claims.move(claim, run_id, scope)
