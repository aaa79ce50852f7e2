"""What a resume uses of the agent and the session it rebuilds: narrow protocols.

The resume pipeline and the public resume API sit above ``runs/`` (they start the resumed
run) but below ``agents`` and ``sessions/_session``: they never import them, not even for
typing. ``Agent`` and ``AgentSession`` satisfy these protocols structurally; the public API is
generic in the session type (:class:`ResumableAgentOf`), so a host passing an ``Agent`` sees
its ``on_session`` typed with ``AgentSession``. This module declares shapes only: it must not
hold behaviour.
"""

from __future__ import annotations

from typing import Protocol, TypeAlias, TypeVar

from .._agent_config import AgentConfig
from ..guardrails import CompiledGuardrailPacks
from ..records._store import SessionStore
from ..runs._ports import RunSession

__all__ = ("ResumableAgent", "ResumableAgentOf", "ResumedSession", "SessionT")


class ResumedSession(RunSession, Protocol):
    """The session a resume rebuilds at the checkpoint's leaf and hands the resumed run."""

    store: SessionStore
    compiled_packs: CompiledGuardrailPacks | None


#: The session type an agent's ``create_session`` returns (``AgentSession`` for an ``Agent``).
SessionT = TypeVar("SessionT", bound=ResumedSession, covariant=True)


class ResumableAgentOf(Protocol[SessionT]):
    """The agent a run is resumed on, whose sessions are ``SessionT`` (an ``Agent`` is a
    ``ResumableAgentOf[AgentSession]``): its configuration, its store and new sessions."""

    @property
    def config(self) -> AgentConfig:
        """The agent's configuration (what the fingerprint and the resumed run read)."""
        ...

    @property
    def store(self) -> SessionStore | None:
        """The session store the run was written to."""
        ...

    def create_session(self, *, id: str | None = None, leaf_id: str | None = None) -> SessionT:
        """A new session on the agent's store."""
        ...


#: The agent as the resume pipeline sees it: whatever its sessions are, they are resumable.
ResumableAgent: TypeAlias = ResumableAgentOf[ResumedSession]
