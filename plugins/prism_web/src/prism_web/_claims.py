"""Session claims: which caller owns a session a face serves, and the session's latest run.

Sessions carry no owner, so a session id alone would let any caller add to (and read the
answers of) anyone's conversation. A face that lets callers name sessions (AG-UI's
``threadId``, A2A's ``contextId``) keeps a **claim** per session in the checkpoint store: under
the face's namespace, key = the session id, value ``{"run_id", "agent_id", "claimed_at"}``,
saved under the caller's ownership. A claim another owner holds reads as absent; a session
that has entries but no claim of this caller's (another owner's conversation, or one started
elsewhere) is refused; every write is a compare-and-swap on the claim's version, so two
requests racing on one session cannot both start a run. What a face does with the latest run
(refuse a new one while it waits, resume it) is the face's own rule.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from prism_core import CheckpointConflictError, CheckpointStore, PrismError

__all__ = ("SessionClaim", "SessionClaims")

#: Why a claim is refused, for the face's own refusal: ``"unknown"`` (not the caller's, or
#: another agent's), ``"taken"`` (somebody moved it since it was read).
Refuse = Callable[[str, str], PrismError]


@attrs.frozen
class SessionClaim:
    """A session's claim as read: its checkpoint ``version`` (0: not written yet), the latest
    run, the agent that ran it and when the claim last moved (epoch seconds)."""

    session_id: str
    version: int = 0
    run_id: str | None = None
    agent_id: str | None = None
    claimed_at: float | None = None


def _text(value: Mapping[str, Any], key: str) -> str | None:
    item = value.get(key)
    return item if isinstance(item, str) else None


class SessionClaims:
    """The claims of one face's sessions (``namespace``) for ``agent_id`` on the face's stores.

    ``refuse(session_id, why)`` builds the face's refusal (see :data:`Refuse`).
    """

    def __init__(
        self,
        checkpoints: CheckpointStore,
        sessions: Any,
        *,
        namespace: str,
        agent_id: str | None,
        refuse: Refuse,
    ) -> None:
        self.checkpoints = checkpoints
        self.sessions = sessions
        self.namespace = namespace
        self.agent_id = agent_id
        self._refuse = refuse

    async def read(self, session_id: str, scope: Mapping[str, str] | None) -> SessionClaim:
        """The caller's claim of ``session_id`` (version 0 for a session nobody has used);
        refused when the session is not the caller's, or is claimed by another agent."""
        record = await self.checkpoints.load(self.namespace, session_id, ownership=scope)
        if record is None:
            if await self.sessions.list(session_id):
                raise self._refuse(session_id, "unknown")
            return SessionClaim(session_id)
        value: Any = record.value
        if not isinstance(value, Mapping):
            raise self._refuse(session_id, "unknown")
        agent_id = _text(value, "agent_id")
        if agent_id is not None and self.agent_id is not None and agent_id != self.agent_id:
            raise self._refuse(session_id, "unknown")
        claimed_at = value.get("claimed_at")
        return SessionClaim(
            session_id,
            record.version,
            _text(value, "run_id"),
            agent_id,
            float(claimed_at) if isinstance(claimed_at, int | float) else None,
        )

    async def move(
        self, claim: SessionClaim, run_id: str, scope: Mapping[str, str] | None
    ) -> SessionClaim:
        """Point the claim at ``run_id`` if nobody moved it since ``claim`` was read (refused
        as ``"taken"`` otherwise: another request, or another caller)."""
        now = time.time()
        try:
            record = await self.checkpoints.save(
                self.namespace,
                claim.session_id,
                {"run_id": run_id, "agent_id": self.agent_id, "claimed_at": now},
                version=claim.version + 1,
                expected_version=claim.version,
                ownership=scope,
            )
        except CheckpointConflictError:
            raise self._refuse(claim.session_id, "taken") from None
        return SessionClaim(claim.session_id, record.version, run_id, self.agent_id, now)
