"""What a session uses of its agent: a narrow protocol.

``sessions/`` sits below ``agents``: it never imports it, not even for typing. ``Agent``
satisfies :class:`SessionAgent` structurally. This module declares shapes only.
"""

from __future__ import annotations

from typing import Protocol

from ..guardrails import GuardrailPack
from ..runs._ports import RunAgent

__all__ = ("SessionAgent",)


class SessionAgent(RunAgent, Protocol):
    """The agent of a session: what its runs read, plus the pack catalogue and context window."""

    pack_catalogue: dict[str, GuardrailPack]
    context_window: int | None
