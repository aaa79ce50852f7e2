"""What the durable side reads of a run, a session and an agent: narrow protocols.

``durable/`` sits below ``runs/``, ``sessions/`` and ``agents``; it never imports them, not even
for typing. The run loop, the session and the agent satisfy these protocols structurally.
This module declares shapes only; it must not hold behaviour.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from .._agent_config import AgentConfig
from .._attention_frontier import AttentionFrontier
from .._run_values import AgentLoopStrategy
from ..content import Usage
from ..guardrails import CompiledGuardrailPacks
from ..limits import RunLimits
from ..middleware import MiddlewareContext
from ..records._transcript import Transcript
from ..redaction import Redactor
from ..skills import LoadedSkillSet

__all__ = ("HostCounters", "HostPlan", "HostRun", "HostSession")


class HostSession(Protocol):
    """The session state a checkpoint carries: the leaf, loaded skills and guardrail packs;
    the session's store, and its transcript, whose appends a shared commit holds."""

    @property
    def store(self) -> Any:
        """The session store the session appends to."""
        ...

    @property
    def transcript(self) -> Transcript:
        """The session's branch; a shared commit holds its appends (``transcript.hold()``)."""
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
    def loaded_skills(self) -> LoadedSkillSet:
        """The skills loaded into the session."""
        ...

    @property
    def attention_frontier(self) -> AttentionFrontier:
        """The attention compiler's sticky changes (they ride a checkpoint that persists
        session state)."""
        ...


class HostCounters(Protocol):
    """The run's counters, as a checkpoint records them."""

    @property
    def turns(self) -> int:
        """Provider turns started."""
        ...

    @property
    def provider_attempts(self) -> int:
        """Provider attempts made, retries included."""
        ...

    @property
    def tool_rounds(self) -> int:
        """Tool rounds started."""
        ...

    @property
    def tool_calls(self) -> int:
        """Tool calls requested."""
        ...

    @property
    def usage(self) -> Usage:
        """Usage summed over the run."""
        ...

    @property
    def usage_reported(self) -> bool:
        """Whether any provider reported usage."""
        ...

    @property
    def stop_continuations(self) -> int:
        """How often stop hooks continued the run."""
        ...

    @property
    def output_retries(self) -> int:
        """How often an invalid typed answer went back to the model."""
        ...


class HostPlan(Protocol):
    """What a checkpoint reads of the run's plan (``runs/_plan.RunPlan``)."""

    @property
    def redactor(self) -> Redactor | None:
        """The run's redactor (applied to every checkpoint)."""
        ...

    @property
    def loop(self) -> AgentLoopStrategy:
        """The run's loop strategy (``snapshot()`` gives its loop-local state, if it has one)."""
        ...

    @property
    def limits(self) -> RunLimits:
        """The run's limits."""
        ...

    @property
    def tool_names(self) -> tuple[str, ...] | None:
        """The tools the run may call (``None``: all)."""
        ...


class HostRun(Protocol):
    """The run whose frontier a :class:`~prism_core.durable._run.DurableRun` checkpoints."""

    @property
    def run_id(self) -> str:
        """The run's id."""
        ...

    @property
    def session_id(self) -> str:
        """The session's id."""
        ...

    @property
    def agent(self) -> AgentConfig:
        """The configuration of the agent the run belongs to."""
        ...

    @property
    def session(self) -> HostSession:
        """The session the run appends to."""
        ...

    @property
    def plan(self) -> HostPlan:
        """What the run does: its limits, redactor, loop and tools."""
        ...

    @property
    def counters(self) -> HostCounters:
        """The run's counters."""
        ...

    @property
    def deadline(self) -> float | None:
        """The wall-time deadline on the event loop's clock, if any."""
        ...

    @property
    def output_schema(self) -> Mapping[str, Any] | None:
        """The JSON Schema of the run's ``output_type``, if it has one."""
        ...

    @property
    def output_json(self) -> Any:
        """The run's validated final answer as JSON (``None`` until it has one)."""
        ...

    @property
    def started_by(self) -> str | None:
        """Who started the run (the ``actor`` run option), if anyone was named."""
        ...

    @property
    def parent_run_id(self) -> str | None:
        """The run whose sub-agent call started this run (``None`` for a top-level run)."""
        ...

    def mw_context(self, point: str) -> MiddlewareContext:
        """The middleware context for ``point`` in this run."""
        ...
