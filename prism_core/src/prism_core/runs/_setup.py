"""Resolving a run's configuration from its agent and its options, before any provider work.

Owns the system-prompt composition, the skill selection and the validation of a durable run's
options. Pure functions of configuration: they must not touch a session, a store or a provider.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._agent_config import AgentConfig
from ..durable import (
    MAX_PERSISTED_TOOL_NAMES,
    DurableRun,
    HostRun,
    RunStateOptions,
    agent_fingerprint,
    check_store_lifetimes,
    coerce_run_state_options,
    fingerprint_parts,
    run_guardrail_identities,
)
from ..errors import AgentLoopStateError, AgentRunStateError
from ..guardrails import GuardrailConfig
from ..skills import Skill, SkillRegistry
from ._loops import loop_is_durable
from ._options import InvalidOptionsError, RunOptions

__all__ = (
    "check_durable",
    "compose_system_prompt",
    "resolve_skills",
    "start_durable",
    "system_prompt_parts",
)


def compose_system_prompt(
    instructions: str | None, agent_layers: Sequence[Any], run_layers: Any
) -> str | None:
    """Instructions, then agent layers, then run layers; ``run_layers=False`` drops layers."""
    parts = [p for p in system_prompt_parts(instructions, agent_layers, run_layers) if p]
    return "\n\n".join(parts) if parts else None


def system_prompt_parts(
    instructions: str | None, agent_layers: Sequence[Any], run_layers: Any
) -> tuple[str | None, str | None]:
    """The system prompt in two parts: the agent's (instructions and agent layers, the same
    for every run) and the run's own layers; ``run_layers=False`` drops every layer."""
    agent_parts: list[str] = [instructions] if instructions else []
    run_parts: list[str] = []
    if run_layers is not False:
        for layers, parts in ((agent_layers, agent_parts), (run_layers or (), run_parts)):
            for layer in layers:
                text = layer if isinstance(layer, str) else getattr(layer, "text", None)
                if text is None and isinstance(layer, Mapping):
                    text = layer.get("text")
                if not isinstance(text, str):
                    raise InvalidOptionsError(
                        f"system prompt layers must be strings or have a 'text', got {layer!r}"
                    )
                if text:
                    parts.append(text)
    return (
        "\n\n".join(agent_parts) if agent_parts else None,
        "\n\n".join(run_parts) if run_parts else None,
    )


def resolve_skills(agent: AgentConfig, options: RunOptions) -> tuple[Skill, ...]:
    """The skills a run activates (see ``RunOptions.active_skills``/``skills``)."""
    source = options.skills if options.skills is not None else agent.skills
    if source is None:
        if options.active_skills:
            raise InvalidOptionsError("active_skills needs skills configured on the agent")
        return ()
    registry = isinstance(source, SkillRegistry)
    available = source.all() if isinstance(source, SkillRegistry) else tuple(source)
    for skill in available:
        if not isinstance(skill, Skill):
            raise InvalidOptionsError(f"skills must be Skill values, got {type(skill).__name__}")
    if options.active_skills is not None:
        by_name = {s.name: s for s in available}
        unknown = [n for n in options.active_skills if n not in by_name]
        if unknown:
            raise InvalidOptionsError(f"unknown active_skills {unknown}; known: {list(by_name)}")
        return tuple(by_name[n] for n in options.active_skills)
    activate_all = (
        options.activate_all_skills
        if options.activate_all_skills is not None
        else agent.activate_all_skills
    )
    if registry and not activate_all:
        return ()
    return available


def check_durable(
    agent: AgentConfig,
    options: RunOptions,
    run_state: Any,
    loop: Any,
    *,
    session_store: Any = None,
) -> RunStateOptions:
    """A durable run's options, checked before any provider work.

    A per-run ``run_state`` may not replace the agent's own one (configuration drift), a run
    whose checkpoints outlive the process needs a ``session_store`` that does too, and the
    run may not override what the fingerprint describes; its ``loop`` must be durable.
    """
    state_options = coerce_run_state_options(run_state)
    assert state_options is not None
    if options.run_state is not None and agent.run_state is not None:
        configured = coerce_run_state_options(agent.run_state)
        if (
            configured != state_options
            or configured.checkpoints is not state_options.checkpoints
            or configured.checkpoint_metadata != state_options.checkpoint_metadata
        ):
            raise AgentRunStateError(
                "RunOptions cannot replace agent durable run-state configuration: pass the "
                "agent's own run_state or none"
            )
    if not (agent.id or agent.name):
        raise AgentRunStateError("a durable run needs an agent id or name")
    granted = options.tool_names
    if granted is not None and len(granted) > MAX_PERSISTED_TOOL_NAMES:
        raise AgentRunStateError(
            f"a durable run's tool_names rides its checkpoints: at most "
            f"{MAX_PERSISTED_TOOL_NAMES} names, got {len(granted)}"
        )
    check_store_lifetimes(state_options.checkpoints, session_store)
    overrides = [name for name in ("model", "loop") if getattr(options, name) is not None]
    if overrides:
        raise AgentRunStateError(
            f"a durable run cannot override {', '.join(overrides)} per run: the agent "
            "fingerprint must describe what a resume will run"
        )
    if not loop_is_durable(loop):
        raise AgentLoopStateError(
            f"loop {getattr(loop, 'name', '?')!r} has no snapshot()/restore(), so it "
            "cannot take part in a durable run",
            code="ERR_PRISM_LOOP_NOT_DURABLE",
        )
    return state_options


def start_durable(
    run: HostRun, agent: AgentConfig, options: RunStateOptions, guards: GuardrailConfig
) -> DurableRun:
    """The durable side of a new run on its checked ``options``; the run's own ``guards``
    ride the checkpoint by identity (a resume must supply them)."""
    return DurableRun(
        run,
        options,
        fingerprint=agent_fingerprint(agent, options.definition_revision),
        fingerprint_parts=fingerprint_parts(agent, options.definition_revision),
        run_guardrails=run_guardrail_identities(guards),
    )
