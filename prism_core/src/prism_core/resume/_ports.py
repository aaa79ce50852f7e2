"""What a resume uses of the agent and the session it rebuilds: narrow protocols.

The resume pipeline and the public resume API sit above ``runs/`` (they start the resumed
run) but below ``agents`` and ``sessions/_session``: they never import them, not even for
typing. ``Agent`` and ``AgentSession`` satisfy these protocols structurally; the public API is
generic in the session type (:class:`ResumableAgentOf`), so a host passing an ``Agent`` sees
its ``on_session`` typed with ``AgentSession``. This module declares shapes only: it must not
hold behaviour.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeAlias, TypeVar

from ..durable._fingerprint import FingerprintedAgent
from ..guardrails import CompiledGuardrailPacks, GuardrailConfig, GuardrailPack
from ..middleware import MiddlewareChain
from ..plugins import PluginHost
from ..records._store import SessionStore
from ..redaction import Redactor
from ..runs._ports import RunSession
from ..tools import ToolRegistry, ToolValidator

__all__ = ("ResumableAgent", "ResumableAgentOf", "ResumedSession", "SessionT")


class ResumedSession(RunSession, Protocol):
    """The session a resume rebuilds at the checkpoint's leaf and hands the resumed run."""

    store: SessionStore
    compiled_packs: CompiledGuardrailPacks | None


#: The session type an agent's ``create_session`` returns (``AgentSession`` for an ``Agent``).
SessionT = TypeVar("SessionT", bound=ResumedSession, covariant=True)


class ResumableAgentOf(FingerprintedAgent, Protocol[SessionT]):
    """The agent a run is resumed on, whose sessions are ``SessionT`` (an ``Agent`` is a
    ``ResumableAgentOf[AgentSession]``)."""

    @property
    def store(self) -> SessionStore | None:
        """The session store the run was written to."""
        ...

    @property
    def run_state(self) -> Any:
        """The agent's own durable configuration (``run_state=``), or ``None``."""
        ...

    @property
    def thread_limiter(self) -> Any:
        """The limiter of the worker threads host callables run in (``None``: anyio's)."""
        ...

    @property
    def pack_catalogue(self) -> dict[str, GuardrailPack]:
        """The guardrail packs this host knows."""
        ...

    @property
    def redactor(self) -> Redactor | None:
        """The agent's redactor."""
        ...

    @property
    def registry(self) -> ToolRegistry:
        """The agent's tools."""
        ...

    @property
    def guardrails(self) -> GuardrailConfig:
        """The agent's guardrails."""
        ...

    @property
    def validate(self) -> ToolValidator | None:
        """The host's tool-call validator."""
        ...

    @property
    def middleware(self) -> MiddlewareChain:
        """The agent's middleware (the claim's checkpoint write is observed through it)."""
        ...

    @property
    def plugin_host(self) -> PluginHost:
        """The agent's plugins (restore hooks come from here)."""
        ...

    def create_session(self, *, id: str | None = None, leaf_id: str | None = None) -> SessionT:
        """A new session on the agent's store."""
        ...


#: The agent as the resume pipeline sees it: whatever its sessions are, they are resumable.
ResumableAgent: TypeAlias = ResumableAgentOf[ResumedSession]
