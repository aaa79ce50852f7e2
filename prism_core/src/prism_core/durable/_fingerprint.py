"""The agent fingerprint: a hash of everything that gives a durable run its meaning.

It reads the agent through :class:`FingerprintedAgent`; it must not import ``agents`` or touch a
store.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Protocol

from ..codec import dumps
from ..models import ModelConfig
from ..skills import Skill, SkillRegistry
from ..tools import ToolRegistry

__all__ = ("FingerprintedAgent", "agent_fingerprint", "fingerprint_material")


class FingerprintedAgent(Protocol):
    """What a fingerprint reads of an agent (an ``Agent`` satisfies it)."""

    @property
    def id(self) -> str | None:
        """The agent's id."""
        ...

    @property
    def name(self) -> str | None:
        """The agent's name."""
        ...

    @property
    def model(self) -> ModelConfig:
        """The agent's model."""
        ...

    @property
    def instructions(self) -> str | None:
        """The agent's instructions."""
        ...

    @property
    def system_prompt(self) -> tuple[Any, ...]:
        """The agent's system-prompt layers."""
        ...

    @property
    def skills(self) -> Any:
        """The agent's skills: a registry, a sequence, or ``None``."""
        ...

    @property
    def registry(self) -> ToolRegistry:
        """The agent's tools."""
        ...

    @property
    def guardrails(self) -> Any:
        """The agent's guardrail configuration (``all()`` lists every guardrail)."""
        ...

    @property
    def loop(self) -> Any:
        """The agent's loop strategy, or ``None`` for single-shot."""
        ...


def _layer_text(layer: Any) -> Any:
    if isinstance(layer, str):
        return layer
    if isinstance(layer, Mapping):
        return layer.get("text")
    return getattr(layer, "text", None)


def _skills(agent: FingerprintedAgent) -> list[dict[str, Any]]:
    source = agent.skills
    if source is None:
        return []
    skills: tuple[Skill, ...] = source.all() if isinstance(source, SkillRegistry) else source
    return [
        {"name": s.name, "instructions": s.instructions, "tools": list(s.tools)} for s in skills
    ]


def fingerprint_material(agent: FingerprintedAgent, revision: str) -> dict[str, Any]:
    """The exact data :func:`agent_fingerprint` hashes (useful to explain a mismatch)."""
    loop = agent.loop
    return {
        "agent": agent.id or agent.name,
        "revision": revision,
        "model": {"provider": agent.model.provider, "model": agent.model.model},
        "instructions": agent.instructions,
        "system_prompt": [_layer_text(layer) for layer in agent.system_prompt],
        "skills": _skills(agent),
        "tools": [
            {
                "name": tool.name,
                "parameters": dict(tool.parameters) if tool.parameters is not None else None,
                "exclusive": tool.exclusive,
                "effect": tool.effect,
            }
            for tool in agent.registry.definitions()
        ],
        "guardrails": [
            {"name": g.name, "stage": g.stage, "revision": g.revision}
            for g in agent.guardrails.all()
        ],
        "loop": {
            "name": getattr(loop, "name", "single-shot"),
            "revision": str(getattr(loop, "revision", "1")),
        },
    }


def agent_fingerprint(agent: FingerprintedAgent, revision: str) -> str:
    """sha256 hex over the agent's id/name, ``revision``, model, instructions, system-prompt
    layers, skills, tools, agent guardrails and loop. Any change without a revision bump
    makes a resume refuse."""
    return hashlib.sha256(dumps(fingerprint_material(agent, revision))).hexdigest()
