"""The agent fingerprint: a hash of everything that gives a durable run its meaning.

It reads the agent's :class:`~prism_core.AgentConfig` (given as is, or as an agent that carries
one); it must not import ``agents`` or touch a store.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Protocol, TypeAlias

from .._agent_config import AgentConfig
from .._approval_gate import needs_approval_material
from ..codec import dumps
from ..skills import Skill, SkillRegistry

__all__ = (
    "ConfiguredAgent",
    "FingerprintedAgent",
    "agent_fingerprint",
    "describe_mismatch",
    "fingerprint_material",
    "fingerprint_parts",
)

#: Past this many tools the parts record one digest for all tools, not one per tool, so the
#: mapping stays within a checkpoint's per-object property bound.
MAX_TOOL_PARTS = 192
_TOOL = "tool:"
_PART_WORDS = (
    ("model", "the model differs"),
    ("instructions", "the instructions differ"),
    ("system_prompt", "the system prompt differs"),
    ("skills", "the skills differ"),
    ("guardrails", "the guardrails differ"),
    ("loop", "the loop differs"),
)


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
    # Recorded only when set, so the fingerprints of runs written before them stay the same.
    if tool.needs_approval is not False:
        material["needs_approval"] = needs_approval_material(tool.needs_approval)
    if tool.approvers != 1:
        material["approvers"] = tool.approvers
    # An idempotent tool's in-doubt call is sent again with no one asked: redeclaring a tool
    # idempotent must not quietly turn a run's in-doubt call into a second effect.
    if tool.idempotent:
        material["idempotent"] = True
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


def _digest(value: Any) -> str:
    return hashlib.sha256(dumps(value)).hexdigest()[:16]


def fingerprint_parts(agent: FingerprintedAgent, revision: str) -> dict[str, str]:
    """A short digest (16 hex) of each part the fingerprint covers: ``model``,
    ``instructions``, ``system_prompt``, ``skills``, ``guardrails``, ``loop`` and one
    ``tool:<name>`` per tool (or one ``tools`` past :data:`MAX_TOOL_PARTS` tools). The
    revision is recorded on its own in the checkpoint, so it is not a part."""
    material = fingerprint_material(agent, revision)
    parts = {
        key: _digest(material[key])
        for key in ("model", "instructions", "system_prompt", "skills", "guardrails", "loop")
    }
    tools = material["tools"]
    if len(tools) > MAX_TOOL_PARTS:
        parts["tools"] = _digest(tools)
    else:
        for tool in tools:
            parts[_TOOL + tool["name"]] = _digest(tool)
    return parts


def describe_mismatch(
    recorded_revision: str,
    recorded_parts: Mapping[str, Any] | None,
    revision: str,
    parts: Mapping[str, Any],
) -> list[str]:
    """What differs between the definition a run recorded and the one given now, in words:
    the revision (recorded vs now), each tool whose schema differs, was added or was removed,
    and each other part that differs. Without recorded parts (a checkpoint written before
    them) only a revision change can be named."""
    found: list[str] = []
    if recorded_revision != revision:
        found.append(f"revision recorded {recorded_revision!r}, now {revision!r}")
    if recorded_parts is None:
        return found
    for key, words in _PART_WORDS:
        if recorded_parts.get(key) != parts.get(key):
            found.append(words)
    if "tools" in recorded_parts or "tools" in parts:
        if recorded_parts.get("tools") != parts.get("tools"):
            found.append("the tools differ")
        return found
    before = {k[len(_TOOL) :]: v for k, v in recorded_parts.items() if k.startswith(_TOOL)}
    now = {k[len(_TOOL) :]: v for k, v in parts.items() if k.startswith(_TOOL)}
    for name in sorted(before.keys() & now.keys()):
        if before[name] != now[name]:
            found.append(f"tool {name!r} differs")
    for name in sorted(now.keys() - before.keys()):
        found.append(f"tool {name!r} added")
    for name in sorted(before.keys() - now.keys()):
        found.append(f"tool {name!r} removed")
    return found
