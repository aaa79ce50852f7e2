"""What the run loop uses of its session and its agent: narrow protocols.

``runs/`` sits below ``sessions/`` and ``agents``: it never imports them, not even for typing.
``AgentSession`` and ``Agent`` satisfy these protocols structurally. This module declares shapes
only; it must not hold behaviour.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ..content import Message
from ..guardrails import CompiledGuardrailPacks, GuardrailConfig
from ..limits import RunLimits
from ..middleware import MiddlewareChain
from ..models import ModelConfig
from ..plugins import PluginHost
from ..providers import AIProvider
from ..redaction import Redactor
from ..retry import RetryConfig
from ..signals import AbortSignal
from ..skills import LoadedSkillSet
from ..tools import ToolPolicy, ToolRegistry, ToolValidator
from ._broadcast import EventBroadcaster
from ._compaction import CompactionConfig, CompactionResult, CompactionStrategy
from ._steering import SteerQueue

__all__ = ("ContextReading", "RunAgent", "RunIdentity", "RunSession")


class RunAgent(Protocol):
    """The agent configuration a run reads (an ``Agent`` satisfies it)."""

    id: str | None
    name: str | None
    model: ModelConfig
    provider: AIProvider | None
    provider_source: Any
    instructions: str | None
    system_prompt: tuple[Any, ...]
    registry: ToolRegistry
    guardrails: GuardrailConfig
    plugin_host: PluginHost
    middleware: MiddlewareChain
    loop_catalogue: dict[str, Any]
    loop: Any
    limits: RunLimits
    retry: RetryConfig | None
    compaction: CompactionConfig | None
    activate_all_skills: bool
    skills_disclosure: Any
    redactor: Redactor | None
    trust: ToolPolicy | None
    permission: ToolPolicy | None
    secure: bool
    validate: ToolValidator | None
    run_state: Any
    skills: Any
    metadata: dict[str, Any]
    provider_options: dict[str, Any]
    thinking_level: str | None
    provider_request_policies: tuple[Callable[..., Any], ...]
    turn_policy: Any
    stop_hooks: tuple[Any, ...]
    thread_limiter: Any


class RunIdentity(Protocol):
    """What a session needs to know of the run it hosts (for middleware contexts)."""

    @property
    def run_id(self) -> str:
        """The run's id."""
        ...

    @property
    def metadata(self) -> dict[str, Any]:
        """The run's merged metadata."""
        ...

    @property
    def signal(self) -> AbortSignal:
        """The run's abort signal."""
        ...


class ContextReading(Protocol):
    """The context meter as an automatic-compaction check reads it."""

    @property
    def input_tokens(self) -> int | None:
        """The latest provider turn's input tokens, if known."""
        ...


class RunSession(Protocol):
    """The session a run appends to (an ``AgentSession`` satisfies it).

    The underscored members are the session's run-facing internals: history, appends,
    compaction, steering and the broadcaster.
    """

    id: str
    metadata: dict[str, Any]
    current_model: ModelConfig
    _meter_input: tuple[int, str] | None

    @property
    def agent(self) -> RunAgent:
        """The session's agent."""
        ...

    @property
    def leaf_id(self) -> str | None:
        """The session's current leaf entry."""
        ...

    @property
    def compiled_packs(self) -> CompiledGuardrailPacks | None:
        """The session's guardrail packs, if any."""
        ...

    @property
    def store(self) -> Any:
        """The session store the session appends to."""
        ...

    @property
    def loaded_skills(self) -> LoadedSkillSet:
        """The skills loaded into the session."""
        ...

    @property
    def _broadcaster(self) -> EventBroadcaster:
        """Where the run's events are published."""
        ...

    @property
    def _steers(self) -> SteerQueue:
        """Messages steered into the run, waiting for the next turn boundary."""
        ...

    def context_meter(self) -> ContextReading:
        """The latest provider turn's input tokens."""
        ...

    async def _ensure_started(self, execution: RunIdentity) -> None:
        """Notify ``session_start`` middleware once per session."""
        ...

    async def _ensure_history(self) -> None:
        """Load the branch history, if not loaded yet."""
        ...

    def _history_messages(self) -> list[Message]:
        """The branch history as messages."""
        ...

    def _history_bytes(self) -> int:
        """The exact canonical-JSON size of the history."""
        ...

    def _history_bound_bytes(self) -> int:
        """A cheap upper bound of :meth:`_history_bytes`."""
        ...

    async def _append_entry(self, *, kind: Any, run_id: str | None, **payload: Any) -> object:
        """Append an entry to the store and move the leaf."""
        ...

    async def _append_message(self, message: Message, run_id: str | None) -> object:
        """Append a message entry and extend the history."""
        ...

    async def _compact(
        self,
        *,
        keep_recent: int,
        strategy: CompactionStrategy | None,
        run_id: str | None,
        signal: AbortSignal | None,
        emit: Any,
    ) -> CompactionResult | None:
        """Compact the branch, emitting through ``emit``."""
        ...

    async def _settle_run(self, execution: object) -> None:
        """Release the session after ``execution`` ended."""
        ...

    def _settle_run_now(self, execution: object) -> None:
        """Release the session without awaiting."""
        ...

    def _hold_appends(self) -> Any:
        """Hold appended entries for the durable run's shared commits; return them."""
        ...

    def _release_appends(self) -> None:
        """Stop holding appends; entries still held go back out of the session."""
        ...
