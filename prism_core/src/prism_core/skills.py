"""Skills: named instructions a run can activate, disclosed as a catalogue or in full."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal, TypeAlias

import attrs

from .content import ToolResult
from .errors import PrismError
from .tools import ToolDefinition, ToolExecutionContext

__all__ = (
    "MAX_LOADED_SKILLS",
    "LoadedSkillSet",
    "Skill",
    "SkillDisclosure",
    "SkillRegistry",
    "create_load_skill_tool",
    "create_skill_registry",
    "render_skill_parts",
    "render_skills",
)

SkillDisclosure: TypeAlias = Literal["progressive", "eager"]
#: A session remembers at most this many loaded skills.
MAX_LOADED_SKILLS = 64


def _check_skill_name(_: Any, __: Any, value: Any) -> None:
    if not isinstance(value, str) or not value or len(value) > 256:
        raise ValueError("a skill needs a non-empty name of at most 256 characters")


@attrs.frozen
class Skill:
    """A named body of instructions, with a one-line ``description`` for the catalogue and the
    names of the tools it relies on."""

    name: str = attrs.field(validator=_check_skill_name)
    instructions: str
    description: str | None = None
    tools: tuple[str, ...] = attrs.field(default=(), converter=tuple)


class SkillRegistry:
    """Skills by name. With a registry, a run activates skills only when it names them
    (``active_skills``) or asks for all (``activate_all_skills``)."""

    def __init__(self, skills: Iterable[Skill] = ()) -> None:
        self._skills: dict[str, Skill] = {}
        for skill in skills:
            self.register(skill)

    def register(self, skill: Skill) -> None:
        """Add ``skill``; a second skill with the same name is refused."""
        if not isinstance(skill, Skill):
            raise TypeError(f"expected a Skill, got {type(skill).__name__}")
        if skill.name in self._skills:
            raise PrismError(
                f"skill {skill.name!r} is already registered", code="ERR_PRISM_SKILL_DUPLICATE"
            )
        self._skills[skill.name] = skill

    def get(self, name: str) -> Skill | None:
        """The skill called ``name``, or ``None``."""
        return self._skills.get(name)

    def all(self) -> tuple[Skill, ...]:
        """Every skill, in registration order."""
        return tuple(self._skills.values())

    def names(self) -> tuple[str, ...]:
        """Every skill name, in registration order."""
        return tuple(self._skills)


def create_skill_registry(skills: Iterable[Skill] = ()) -> SkillRegistry:
    """A registry holding ``skills``."""
    return SkillRegistry(skills)


class LoadedSkillSet:
    """The skills a session has loaded (through ``load_skill``), in load order."""

    def __init__(self) -> None:
        self._loaded: dict[str, Skill] = {}

    def add(self, skill: Skill) -> None:
        """Record ``skill`` as loaded (at most :data:`MAX_LOADED_SKILLS`)."""
        if skill.name in self._loaded:
            return
        if len(self._loaded) >= MAX_LOADED_SKILLS:
            raise PrismError(
                f"a session may load at most {MAX_LOADED_SKILLS} skills",
                code="ERR_PRISM_SKILL_LIMIT",
            )
        self._loaded[skill.name] = skill

    def names(self) -> tuple[str, ...]:
        """Loaded skill names, in load order."""
        return tuple(self._loaded)

    def skills(self) -> tuple[Skill, ...]:
        """Loaded skills, in load order."""
        return tuple(self._loaded.values())

    def __contains__(self, name: object) -> bool:
        return name in self._loaded

    def __len__(self) -> int:
        return len(self._loaded)


def render_skills(
    active: Sequence[Skill], loaded: LoadedSkillSet, disclosure: SkillDisclosure
) -> str | None:
    """The system-prompt section for ``active`` skills.

    ``eager`` renders every body; ``progressive`` renders a catalogue plus the bodies of the
    skills the session has loaded.
    """
    stable, loaded_bodies = render_skill_parts(active, loaded, disclosure)
    parts = [part for part in (stable, loaded_bodies) if part]
    return "\n\n".join(parts) if parts else None


def render_skill_parts(
    active: Sequence[Skill], loaded: LoadedSkillSet, disclosure: SkillDisclosure
) -> tuple[str | None, str | None]:
    """The skills section in two parts: what stays the same across turns (every body under
    ``eager``, the catalogue under ``progressive``) and what grows as skills are loaded (the
    loaded bodies under ``progressive``)."""
    if not active:
        return None, None
    if disclosure == "eager":
        return "\n\n".join(f"## Skill: {s.name}\n{s.instructions}" for s in active), None
    lines = ["Available skills (load one with the load_skill tool before relying on it):"]
    lines.extend(f"- {s.name}: {s.description or 'no description'}" for s in active)
    names = {s.name for s in active}
    bodies = [f"## Skill: {s.name}\n{s.instructions}" for s in loaded.skills() if s.name in names]
    return "\n".join(lines), ("\n\n".join(bodies) if bodies else None)


def create_load_skill_tool() -> ToolDefinition:
    """The ``load_skill`` tool: returns an active skill's instructions and records it in the
    session's loaded-skill set."""

    def load_skill(args: dict[str, Any], context: ToolExecutionContext) -> ToolResult:
        access = context.skills
        if access is None:
            raise PrismError(
                "load_skill can only run inside an agent run", code="ERR_PRISM_SKILL_UNAVAILABLE"
            )
        skill = access.load_skill(str(args.get("name", "")))
        return ToolResult(
            context.tool_call_id,
            "load_skill",
            value={"name": skill.name, "instructions": skill.instructions},
        )

    return ToolDefinition(
        "load_skill",
        load_skill,
        description="Load the full instructions of one of the available skills.",
        parameters={
            "type": "object",
            "properties": {"name": {"type": "string", "minLength": 1}},
            "required": ["name"],
            "additionalProperties": False,
        },
    )
