"""What a resume uses of the agent and the session it rebuilds: narrow protocols.

The resume pipeline sits above ``runs/`` (it starts the resumed run) but below ``agents`` and
``sessions/_session``: it never imports them, not even for typing. ``Agent`` and
``AgentSession`` satisfy these protocols structurally. This module declares shapes only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ..guardrails import CompiledGuardrailPacks, GuardrailConfig, GuardrailPack
from ..middleware import MiddlewareChain
from ..plugins import PluginHost
from ..redaction import Redactor
from ..runs._ports import RunSession
from ..tools import ToolRegistry, ToolValidator
from ._fingerprint import FingerprintedAgent

if TYPE_CHECKING:
    # Only a type here: loading ``sessions/`` at import time would run its ``__init__``,
    # which loads ``AgentSession`` and with it the run loop that imports this package.
    from ..sessions._store import SessionStore

__all__ = ("ResumableAgent", "ResumedSession")


class ResumedSession(RunSession, Protocol):
    """The session a resume rebuilds at the checkpoint's leaf and hands the resumed run."""

    store: SessionStore
    leaf_id: str | None
    compiled_packs: CompiledGuardrailPacks | None

    def _load_history(self, path: list[Any]) -> None:
        """Take ``path`` (the branch, root first) as the session's history."""
        ...

    def _begin(self, execution: Any) -> None:
        """Make a resumed ``execution`` the session's active run."""
        ...


class ResumableAgent(FingerprintedAgent, Protocol):
    """The agent a run is resumed on (an ``Agent`` satisfies it)."""

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

    def create_session(
        self, *, id: str | None = None, leaf_id: str | None = None
    ) -> ResumedSession:
        """A new session on the agent's store."""
        ...
