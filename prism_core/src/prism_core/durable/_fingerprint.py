"""The agent fingerprint: a hash of everything that gives a durable run its meaning.

It reads the agent's :class:`~prism_core.AgentConfig` (given as is, or as an agent that carries
one); it must not import ``agents`` or touch a store.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Protocol, TypeAlias

from .._agent_config import AgentConfig
from ..codec import dumps
from ..skills import Skill, SkillRegistry

__all__ = ("ConfiguredAgent", "FingerprintedAgent", "agent_fingerprint", "fingerprint_material")


class ConfiguredAgent(Protocol):
    """An agent that carries its configuration (an ``Agent`` does)."""

    @property
    def config(self) -> AgentConfig:
        """The agent's configuration."""
        ...


#: What a fingerprint reads: an agent's configuration, or an agent that carries one.
FingerprintedAgent: TypeAlias = "AgentConfig | ConfiguredAgent"


def _config(agent: FingerprintedAgent) -> AgentConfig:
    return agent if isinstance(agent, AgentConfig) else agent.config


def _layer_text(layer: Any) -> Any:
    if isinstance(layer, str):
        return layer
    if isinstance(layer, Mapping):
        return layer.get("text")
    return getattr(layer, "text", None)


def _skills(config: AgentConfig) -> list[dict[str, Any]]:
    source = config.skills
    if source is None:
        return []
    skills: tuple[Skill, ...] = source.all() if isinstance(source, SkillRegistry) else source
    return [
        {"name": s.name, "instructions": s.instructions, "tools": list(s.tools)} for s in skills
    ]


def _tool_material(tool: Any) -> dict[str, Any]:
    material = {
        "name": tool.name,
        "parameters": dict(tool.parameters) if tool.parameters is not None else None,
        "exclusive": tool.exclusive,
        "effect": tool.effect,
    }
    # Recorded only when set, so the fingerprints of runs written before it stay the same.
    if tool.needs_approval:
        material["needs_approval"] = True
    return material


def fingerprint_material(agent: FingerprintedAgent, revision: str) -> dict[str, Any]:
    """The exact data :func:`agent_fingerprint` hashes (useful to explain a mismatch)."""
    config = _config(agent)
    loop = config.loop
    return {
        "agent": config.id or config.name,
        "revision": revision,
        "model": {"provider": config.model.provider, "model": config.model.model},
        "instructions": config.instructions,
        "system_prompt": [_layer_text(layer) for layer in config.system_prompt],
        "skills": _skills(config),
        "tools": [_tool_material(tool) for tool in config.registry.definitions()],
        "guardrails": [
            {"name": g.name, "stage": g.stage, "revision": g.revision}
            for g in config.guardrails.all()
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
