"""What the run loop uses of its session and its agent: narrow protocols.

``runs/`` sits below ``sessions/`` and ``agents``: it never imports them, not even for typing.
``AgentSession`` satisfies these protocols structurally; the agent is read as its frozen
:class:`~prism_core.AgentConfig`. This module declares shapes only; it must not hold
behaviour.
"""

from __future__ import annotations

from typing import Any, Protocol

from .._agent_config import AgentConfig
from ..durable import HostSession
from ..models import ModelConfig
from ..signals import AbortSignal
from ._broadcast import EventBroadcaster
from ._slot import RunSlot
from ._steering import SteerQueue

__all__ = ("ContextReading", "RunIdentity", "RunSession")


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


class RunSession(HostSession, Protocol):
    """The session a run works on (an ``AgentSession`` satisfies it): what a checkpoint
    carries of it (:class:`~prism_core.durable.HostSession`: store, transcript, leaf, packs,
    skills, attention frontier), its identity and the parts it lends its runs: the
    broadcaster, the steer queue and the run slot."""

    id: str
    metadata: dict[str, Any]

    @property
    def config(self) -> AgentConfig:
        """The configuration of the session's agent."""
        ...

    @property
    def current_model(self) -> ModelConfig:
        """The model the branch last changed to, else the agent's."""
        ...

    @property
    def broadcaster(self) -> EventBroadcaster:
        """Where the run's events are published."""
        ...

    @property
    def steers(self) -> SteerQueue:
        """Messages steered into the run, waiting for the next turn boundary."""
        ...

    @property
    def run_slot(self) -> RunSlot:
        """Which run holds the session."""
        ...

    def context_meter(self) -> ContextReading:
        """The latest provider turn's input tokens."""
        ...
