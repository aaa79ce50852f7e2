"""The agent fingerprint: a hash of everything that gives a durable run its meaning."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..codec import dumps
from ..skills import Skill, SkillRegistry

if TYPE_CHECKING:
    from ..agents import Agent

__all__ = ("agent_fingerprint", "fingerprint_material")


def _layer_text(layer: Any) -> Any:
    if isinstance(layer, str):
        return layer
    if isinstance(layer, Mapping):
        return layer.get("text")
    return getattr(layer, "text", None)


def _skills(agent: Agent) -> list[dict[str, Any]]:
    source = agent.skills
    if source is None:
        return []
    skills: tuple[Skill, ...] = source.all() if isinstance(source, SkillRegistry) else source
    return [
        {"name": s.name, "instructions": s.instructions, "tools": list(s.tools)} for s in skills
    ]


def fingerprint_material(agent: Agent, revision: str) -> dict[str, Any]:
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


def agent_fingerprint(agent: Agent, revision: str) -> str:
    """sha256 hex over the agent's id/name, ``revision``, model, instructions, system-prompt
    layers, skills, tools, agent guardrails and loop. Any change without a revision bump
    makes a resume refuse."""
    return hashlib.sha256(dumps(fingerprint_material(agent, revision))).hexdigest()
