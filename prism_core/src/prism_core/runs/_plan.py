"""A run's plan: what the run will do, resolved once from its agent and its options.

:func:`resolve_run_plan` merges the agent's configuration (:class:`~prism_core.AgentConfig`)
with the run's options (:class:`~._options.RunOptions`) into one frozen :class:`RunPlan`:
limits, retry, guardrails, system prompt, loop, model, skills, output type, durable options.
Every refusal of an invalid combination happens here, before the run exists. The run's
progress (counters, the last message, the result) lives in :class:`~._state.RunState`, which
holds the plan.

It must not touch a session, a store or a provider: it is a pure function of configuration
(the session's packs, metadata and store are passed in as values).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import attrs

from .._agent_config import AgentConfig
from .._output_type import OutputType
from ..durable import RunStateOptions
from ..errors import AgentRunStateError
from ..guardrails import CompiledGuardrailPacks, GuardrailConfig, coerce_guardrails
from ..limits import RunLimits
from ..models import ModelConfig
from ..providers import ProviderResolver
from ..redaction import Redactor, chain_redactors
from ..retry import RetryConfig, coerce_retry
from ..skills import Skill, SkillDisclosure
from ._attention import AttentionSettings, resolve_run_attention
from ._compaction import CompactionConfig, coerce_compaction
from ._fold import ToolResultFold
from ._loops import coerce_loop
from ._options import InvalidOptionsError, RunOptions
from ._setup import check_durable, resolve_skills, system_prompt_parts
from ._turn_policy import TurnPolicy, check_turn_policy_limits

__all__ = ("SECURE_DEFAULTS", "RunPlan", "resolve_run_plan")

#: The refusal of a per-run option that would replace a secure agent's seams.
SECURE_DEFAULTS = "Secure agent defaults cannot be replaced per run"

_NO_METADATA: Mapping[str, Any] = MappingProxyType({})


@attrs.frozen(kw_only=True)
class RunPlan:
    """What one run will do: its agent's configuration with the run's options applied.

    A resume replaces a few fields with what the checkpoint recorded (``limits``,
    ``output_type``) by evolving the plan; nothing else changes it.
    """

    limits: RunLimits
    """The run's ceilings: the agent's, narrowed by the run's ``limits``."""
    retry: RetryConfig | None
    """Provider-turn retry (the run's wins)."""
    guardrails: GuardrailConfig
    """Every guard of the run: the agent's, its session's packs', then the run's own."""
    run_guardrails: GuardrailConfig
    """The run's own guards (the ``guardrails`` run option), as a checkpoint records them."""
    system_parts: tuple[str | None, str | None]
    """The agent's part of the system prompt and the run's own layers."""
    system: str | None
    """The whole system prompt (``None``: none)."""
    loop: Any
    """The run's loop strategy (an ``AgentLoopStrategy`` whose ``run`` the run loop closes as
    an async generator, with optional ``new_run``/``snapshot``/``restore``), fresh for this run
    when the strategy makes per-run copies."""
    model: ModelConfig
    """The model the run starts on (the run's wins)."""
    redactor: Redactor | None
    """The agent's redactor chained with the run's."""
    tool_names: tuple[str, ...] | None
    """The tools the run may call (``None``: all)."""
    metadata: dict[str, Any]
    """The agent's metadata, then the session's, then the run's."""
    provider_options: dict[str, Any]
    """The agent's provider options, then the run's."""
    thinking_level: str | None
    """The thinking intent snapped onto each request (the run's wins)."""
    policies: tuple[Callable[..., Any], ...]
    """The provider request policies: the agent's, then the run's."""
    provider_source: ProviderResolver | None
    """The provider resolver consulted for the run (the run's wins)."""
    compaction: CompactionConfig | None
    """Automatic compaction (the run's wins; ``False`` on the run turns it off)."""
    turn_policy: TurnPolicy | None
    """The host's turn policy (the run's wins)."""
    attention: AttentionSettings | None
    """The attention compiler: the agent's, off, or relaxed by the run."""
    input_layout: str
    """How request assembly orders the system prompt (the run's layout wins)."""
    tool_result_fold: ToolResultFold | None
    """Folding of aged large tool results (the run's wins; ``False`` turns it off)."""
    stop_hooks: tuple[Callable[[Any], Any], ...]
    """Stop hooks consulted when the run would finish (the run's replace the agent's)."""
    active_skills: tuple[Skill, ...]
    """The skills the run activates."""
    skills_disclosure: SkillDisclosure
    """How active skills reach the model: a catalogue or their full instructions."""
    output_type: OutputType | None
    """What the final answer must be (the run's ``output_type``, else the agent's)."""
    run_state: RunStateOptions | None
    """The durable options the run starts with, checked; ``None`` when the run is not durable
    or is a resume (which attaches the checkpoint's own)."""


def _invalid(exc: TypeError | ValueError) -> InvalidOptionsError:
    """``exc`` as the typed refusal of a malformed option."""
    return exc if isinstance(exc, InvalidOptionsError) else InvalidOptionsError(str(exc))


def resolve_run_plan(
    config: AgentConfig,
    options: RunOptions,
    *,
    packs: CompiledGuardrailPacks | None = None,
    session_metadata: Mapping[str, Any] = _NO_METADATA,
    session_store: Any = None,
    resumed: bool = False,
) -> RunPlan:
    """The plan of a run of the agent ``config`` with ``options`` on a session whose guardrail
    ``packs``, ``session_metadata`` and ``session_store`` are given (a run that starts durable
    needs a store whose lifetime matches its checkpoints'). ``resumed``: the run continues a
    checkpoint, so no durable options are resolved. Raises ``InvalidOptionsError`` for a
    malformed option and ``AgentRunStateError``/``AgentLoopStateError`` for durable options
    that cannot hold, before any provider work."""
    agent = config
    try:
        limits = agent.limits.narrowed(options.limits)
        retry = agent.retry if options.retry is None else coerce_retry(options.retry)
        guardrails = agent.guardrails
        if packs is not None:
            # Pack guards run after the agent's tool-input guards and before the run's.
            # Pack observers see every result first, so a blocking guard cannot hide a
            # validation failure from pack state.
            guardrails = attrs.evolve(
                guardrails,
                tool_input=guardrails.tool_input + packs.tool_input,
                tool_output=packs.tool_output + guardrails.tool_output,
            )
        run_guardrails = coerce_guardrails(options.guardrails)
        guardrails = guardrails.merged(run_guardrails)
        system_parts = system_prompt_parts(
            agent.instructions, agent.system_prompt, options.system_prompt
        )
        loop = coerce_loop(
            options.loop if options.loop is not None else agent.loop, agent.loop_catalogue
        )
    except (TypeError, ValueError) as exc:
        raise _invalid(exc) from exc
    new_run = getattr(loop, "new_run", None)
    if callable(new_run):
        loop = new_run()
    try:
        compaction = (
            agent.compaction
            if options.compaction is None
            else coerce_compaction(options.compaction)
        )
    except (TypeError, ValueError) as exc:
        raise _invalid(exc) from exc
    try:
        check_turn_policy_limits(options.turn_policy, limits.max_turns)
        attention = resolve_run_attention(agent.attention_compiler, options.attention_compiler)
    except (TypeError, ValueError) as exc:
        raise InvalidOptionsError(str(exc)) from exc
    fold = (
        options.tool_result_fold if options.tool_result_fold is not None else agent.tool_result_fold
    )
    active_skills = resolve_skills(agent, options)
    output_type = options.output_type if options.output_type is not None else agent.output_type
    if agent.secure and (options.run_state is not None or options.redactor is not None):
        raise AgentRunStateError(SECURE_DEFAULTS)
    run_state = None
    if not resumed:
        chosen = options.run_state if options.run_state is not None else agent.run_state
        if chosen is not None:
            run_state = check_durable(agent, options, chosen, loop, session_store=session_store)
    return RunPlan(
        limits=limits,
        retry=retry,
        guardrails=guardrails,
        run_guardrails=run_guardrails,
        system_parts=system_parts,
        system="\n\n".join(p for p in system_parts if p) or None,
        loop=loop,
        model=options.model or agent.model,
        redactor=chain_redactors(agent.redactor, options.redactor),
        tool_names=options.tool_names,
        metadata={**agent.metadata, **session_metadata, **options.metadata},
        provider_options={**agent.provider_options, **options.provider_options},
        thinking_level=options.thinking_level or agent.thinking_level,
        policies=(*agent.provider_request_policies, *options.provider_request_policies),
        provider_source=options.provider_source or agent.provider_source,
        compaction=compaction,
        turn_policy=options.turn_policy if options.turn_policy is not None else agent.turn_policy,
        attention=attention,
        input_layout=options.input_layout or agent.input_layout,
        tool_result_fold=fold or None,
        stop_hooks=options.stop_hooks if options.stop_hooks is not None else agent.stop_hooks,
        active_skills=active_skills,
        skills_disclosure=options.skills_disclosure or agent.skills_disclosure,  # type: ignore[arg-type]
        output_type=output_type,
        run_state=run_state,
    )
