"""``RunSlot``: a session's one seat for an active run.

A session runs one run at a time. The slot says which run holds the session, refuses a second
one (Prism does not queue runs), notifies ``session_start`` middleware once per session, and
releases the session when the run ends: steered messages that were not applied are dropped,
appends held for a commit that never came go back out of the transcript, and run-scoped
subscribers are closed. It must not hold run logic.
"""

from __future__ import annotations

from typing import Any, NoReturn

from ..content import ErrorInfo
from ..errors import AgentRunError
from ..events import ErrorEvent
from ..middleware import MiddlewareChain, MiddlewareContext
from ..records._entries import new_entry_id
from ..records._transcript import Transcript
from ..results import AgentRunResult
from ._broadcast import EventBroadcaster
from ._steering import SteerQueue

__all__ = ("RunSlot",)


class RunSlot:
    """Which run holds a session, and what ending it releases."""

    def __init__(
        self,
        *,
        session_id: str,
        transcript: Transcript,
        broadcaster: EventBroadcaster,
        steers: SteerQueue,
        middleware: MiddlewareChain,
    ) -> None:
        self.session_id = session_id
        self.transcript = transcript
        self.broadcaster = broadcaster
        self.steers = steers
        self.middleware = middleware
        #: The run that holds the session (a ``RunExecution``), or ``None`` when idle.
        self.active: Any = None
        self._started = False

    @property
    def running(self) -> bool:
        """Whether a run holds the session."""
        return self.active is not None

    def claim(self, execution: Any) -> None:
        """Make ``execution`` the session's active run; while another holds the session it is
        refused (:meth:`refuse`)."""
        if self.active is not None:
            self.refuse()
        self.active = execution

    def refuse(self) -> NoReturn:
        """Refuse a second run: an ``error`` event to the subscribers, then
        :class:`~prism_core.AgentRunError` (``ERR_PRISM_RUN_ACTIVE``) with a failed result."""
        run_id = f"run_{new_entry_id()[6:]}"
        error = ErrorInfo(
            f"A run is already active on session {self.session_id!r}; Prism does not queue runs",
            code="ERR_PRISM_RUN_ACTIVE",
        )
        self.broadcaster.publish(ErrorEvent(session_id=self.session_id, run_id=run_id, error=error))
        result = AgentRunResult(
            session_id=self.session_id,
            run_id=run_id,
            status="failed",
            error=error,
            leaf_id=self.transcript.leaf_id,
        )
        raise AgentRunError(error.message, result=result, code=error.code)

    async def ensure_started(self, run_id: str, metadata: dict[str, Any], signal: Any) -> None:
        """Notify ``session_start`` middleware, once per session (at its first run)."""
        if self._started:
            return
        self._started = True
        await self.middleware.notify(
            "session_start",
            MiddlewareContext(
                point="session_start",
                session_id=self.session_id,
                run_id=run_id,
                metadata=metadata,
                signal=signal,
            ),
        )

    def settle(self, execution: Any) -> None:
        """Release the session after ``execution`` ended, and close run-scoped subscribers."""
        if self.active is execution:
            self.active = None
            # Steers belong to the run they were sent to; a later run starts clean.
            self.steers.drain()
            # A run that ended without committing what it held (abandoned, cancelled) leaves
            # the session where its store is.
            self.transcript.release()
        self.broadcaster.close_run_subscribers()
