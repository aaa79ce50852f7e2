"""The host's agent, hosted for one caller's durable runs on the app's stores
(:meth:`prism_core.Agent.hosted`: every-turn checkpoints, the app's revision, the caller's
ownership; the agent keeps the rest of its ``run_state``, ``interrupt_before_tool`` first)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prism_core import AgentRunStateError, Principal, StorePair
from prism_web import FaceWorkers

from ._errors import AccessDenied
from ._threads import thread_claims

__all__ = ("AgentFactory",)

#: The kernel's refusal to host an agent for another owner than its ``run_state`` names.
_HOSTED_OWNER = "ERR_PRISM_HOSTED_OWNER"


class AgentFactory:
    """Copies of the host's agent, hosted for each caller on the app's stores."""

    def __init__(
        self,
        agent: Any,
        *,
        stores: StorePair,
        revision: str,
        workers: int = 1,
        lease_ms: int = 30000,
        notifiers: Sequence[Any] = (),
    ) -> None:
        if not isinstance(revision, str) or not revision.strip():
            raise ValueError("definition_revision must be a non-empty string")
        self.agent = agent
        self.lease_ms = lease_ms
        #: The app's workers (decided runs) and its background runs (new ones).
        self.workers = FaceWorkers(
            stores, self.resolve, workers=workers, lease_ms=lease_ms, notifiers=notifiers
        )
        #: Whether the runs this app starts and decides write their notifications.
        self.notify = bool(self.workers.notifiers)
        self.stores = stores
        self.checkpoints = stores.checkpoints
        self.sessions = stores.sessions
        self.revision = revision
        self.threads = thread_claims(stores.checkpoints, stores.sessions, agent.id or agent.name)
        # Hosted once now, so a run_state the kernel refuses fails at create_agui_app, not per
        # request (an agent that names its owner is checked against each caller).
        try:
            agent.hosted(stores, definition_revision=revision)
        except AgentRunStateError as exc:
            if exc.code != _HOSTED_OWNER:
                raise

    def for_caller(self, caller: Principal) -> Any:
        """A copy of the agent hosted for ``caller``; :class:`AccessDenied` when the agent's
        own ``run_state`` names another owner."""
        try:
            # A lease: a run this app started is continued by a worker if the app dies.
            return self.agent.hosted(
                self.stores,
                definition_revision=self.revision,
                ownership=caller.scope,
                lease_ms=self.lease_ms,
                notify=self.notify,
            )
        except AgentRunStateError as exc:
            if exc.code == _HOSTED_OWNER:
                raise AccessDenied("this agent runs for another owner") from None
            raise

    def resolve(self, agent_id: str) -> tuple[Any, str] | None:
        """The workers' resolver: this app's agent and revision (``None`` for another)."""
        if agent_id != (self.agent.id or self.agent.name):
            return None
        return self.agent, self.revision

    @property
    def redactor(self) -> Any:
        """The agent's redactor (``None`` without one)."""
        return getattr(self.agent, "redactor", None)
