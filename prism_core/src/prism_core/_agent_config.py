"""``AgentConfig``: an agent's configuration as one frozen value.

``Agent`` checks and normalises what a host passes to ``create_agent`` and keeps the result
here; sessions, runs, the durable side, fingerprints and resumes all read this value instead
of each describing the agent with a protocol of its own. It holds values only: it must not
check, coerce or run anything (``agents.Agent`` does the checking).

It sits below the run loop: the value types of the run options it holds live in
``_run_values``, and the plugin host is named by the narrow :class:`AgentPlugins` it is read
through. Its durable options are ``durable/``'s own type, so this module sits in the layer of
``durable/``, which reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import attrs

from ._output_type import OutputType
from ._run_values import (
    AgentLoopStrategy,
    AttentionSettings,
    CompactionConfig,
    StopHook,
    ToolResultFold,
    TurnPolicy,
)
from .guardrails import GuardrailConfig, GuardrailPack
from .limits import RunLimits
from .middleware import MiddlewareChain
from .models import ModelConfig
from .providers import AIProvider, ProviderResolver
from .redaction import Redactor
from .retry import RetryConfig
from .skills import Skill, SkillRegistry
from .tools import ToolPolicy, ToolRegistry, ToolValidator

if TYPE_CHECKING:
    # For the annotation only: loading ``durable/`` runs its ``__init__``, which reads
    # ``AgentConfig`` from this module.
    from .durable._options import RunStateOptions

__all__ = ("AgentConfig", "AgentPlugins")


class AgentPlugins(Protocol):
    """What runs and resumes read of the plugins an agent was composed with (a
    ``PluginHost``)."""

    def provider(self, model: ModelConfig) -> AIProvider | None:
        """The first plugin provider for ``model``, or ``None``."""
        ...

    def restore_hooks(self) -> list[Any]:
        """The plugins' restore hooks, run on every claiming resume."""
        ...


@attrs.frozen(kw_only=True)
class AgentConfig:
    """Everything an agent's runs read, checked and normalised by ``Agent``."""

    id: str | None
    """The agent's id (it names the agent in checkpoints and fingerprints)."""
    name: str | None
    """The agent's display name."""
    description: str | None
    """What the agent does, for those who call it (an A2A card, ``as_tool``); never sent to
    the model and never taken from the instructions."""
    model: ModelConfig
    """The default model of its runs."""
    provider: AIProvider | None
    """The host's provider, if it gave one (it wins over ``provider_source`` and plugins)."""
    provider_source: ProviderResolver | None
    """The resolver consulted per run, if any."""
    instructions: str | None
    """The base instructions of the system prompt."""
    system_prompt: tuple[Any, ...]
    """Layered system prompt contributions."""
    registry: ToolRegistry
    """The agent's tools."""
    guardrails: GuardrailConfig
    """The agent's guardrails, by stage."""
    plugin_host: AgentPlugins
    """The plugins the agent was composed with (a ``PluginHost``, whose hooks name types of
    the layers above, so it is read through :class:`AgentPlugins`)."""
    middleware: MiddlewareChain
    """The agent's middleware, then the plugins'."""
    loop_catalogue: Mapping[str, AgentLoopStrategy]
    """Loop strategies by name."""
    loop: AgentLoopStrategy | None
    """The agent's loop strategy, or ``None`` for single-shot."""
    limits: RunLimits
    """The ceilings every run starts from (a run may only narrow them)."""
    retry: RetryConfig | None
    """Provider-turn retry, if configured."""
    compaction: CompactionConfig | None
    """Automatic compaction, or ``None``."""
    activate_all_skills: bool
    """Whether every registry skill is active when a run names none."""
    skills_disclosure: str
    """``"progressive"`` (catalogue) or ``"eager"`` (full instructions)."""
    redactor: Redactor | None
    """The agent's redactor."""
    trust: ToolPolicy | None
    """The trust policy checked before a tool call."""
    permission: ToolPolicy | None
    """The permission policy checked before a tool call."""
    validate: ToolValidator | None
    """The host's tool-argument validator."""
    run_state: RunStateOptions | Mapping[str, Any] | None
    """The agent's durable configuration (a mapping may leave fields to the host), or
    ``None``."""
    skills: SkillRegistry | tuple[Skill, ...] | None
    """The agent's skills, or ``None``."""
    metadata: Mapping[str, Any]
    """Agent metadata merged into every run's."""
    provider_options: Mapping[str, Any]
    """Generic provider request options."""
    thinking_level: str | None
    """The thinking intent snapped onto each request."""
    provider_request_policies: tuple[Callable[..., Any], ...]
    """Policies applied to each provider request before middleware."""
    turn_policy: TurnPolicy | None
    """The host's turn policy, or ``None``."""
    stop_hooks: tuple[StopHook, ...]
    """Stop hooks consulted when a run would finish."""
    thread_limiter: anyio.CapacityLimiter | None
    """Bounds the worker threads of sync host callables (``None``: anyio's default)."""
    pack_catalogue: Mapping[str, GuardrailPack]
    """The guardrail packs session ``guardrail_packs=[…]`` ids resolve against."""
    context_window: int | None
    """The model's context window, for the context meter and compaction ratios."""
    output_type: OutputType | None = None
    """What every run's final answer must be (``output_type=``), checked; ``None``: text."""
    input_layout: str = "cache_aware"
    """How request assembly orders the system prompt: ``"cache_aware"`` (what is stable across
    turns first) or ``"legacy"``."""
    tool_result_fold: ToolResultFold | None = None
    """Folding of aged large tool results in the provider input, or ``None``."""
    attention_compiler: AttentionSettings | None = None
    """The attention compiler's settings, or ``None`` (off)."""
    secure: bool = False
    """Whether ``create_secure_agent`` composed the agent (runs cannot replace its seams)."""
