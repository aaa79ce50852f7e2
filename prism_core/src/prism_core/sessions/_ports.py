"""What a session uses of its agent: a narrow protocol.

``sessions/`` sits below ``agents``: it never imports it, not even for typing. ``Agent``
satisfies :class:`SessionAgent` structurally: a session reads the agent's configuration only.
This module declares shapes only; it must not hold behaviour.
"""

from __future__ import annotations

from typing import Protocol

from .._agent_config import AgentConfig

__all__ = ("SessionAgent",)


class SessionAgent(Protocol):
    """The agent of a session, as its frozen configuration."""

    @property
    def config(self) -> AgentConfig:
        """The agent's configuration."""
        ...
