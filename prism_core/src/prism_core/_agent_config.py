"""``AgentConfig``: an agent's configuration as one frozen value.

``Agent`` checks and normalises what a host passes to ``create_agent`` and keeps the result
here; sessions, runs, the durable side, fingerprints and resumes all read this value instead
of each describing the agent with a protocol of its own. It holds values only: it must not
check, coerce or run anything (``agents.Agent`` does the checking).

It sits at the bottom of the kernel, below the run loop, so a few fields whose types belong to
``runs/`` or to the plugin host are typed ``Any`` here and documented with the type they
hold.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio
import attrs

from ._output_type import OutputType
from .guardrails import GuardrailConfig, GuardrailPack
from .limits import RunLimits
from .middleware import MiddlewareChain
from .models import ModelConfig
from .providers import AIProvider
from .redaction import Redactor
from .retry import RetryConfig
from .tools import ToolPolicy, ToolRegistry, ToolValidator

__all__ = ("AgentConfig",)


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
    provider_source: Any
    """A ``ProviderResolver`` consulted per run, if any."""
    instructions: str | None
    """The base instructions of the system prompt."""
    system_prompt: tuple[Any, ...]
    """Layered system prompt contributions."""
    registry: ToolRegistry
    """The agent's tools."""
    guardrails: GuardrailConfig
    """The agent's guardrails, by stage."""
    plugin_host: Any
    """The plugins the agent was composed with (a ``PluginHost``, whose hooks name types of
    the layers above, so it is not named here)."""
    middleware: MiddlewareChain
    """The agent's middleware, then the plugins'."""
    loop_catalogue: Mapping[str, Any]
    """Loop strategies by name (``AgentLoopStrategy`` values)."""
    loop: Any
    """The agent's loop strategy (an ``AgentLoopStrategy``), or ``None`` for single-shot."""
    limits: RunLimits
    """The ceilings every run starts from (a run may only narrow them)."""
    retry: RetryConfig | None
    """Provider-turn retry, if configured."""
    compaction: Any
    """Automatic compaction (a ``CompactionConfig``), or ``None``."""
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
    run_state: Any
    """The agent's durable configuration (``RunStateOptions`` or a mapping), or ``None``."""
    skills: Any
    """A ``SkillRegistry``, a tuple of ``Skill`` values, or ``None``."""
    metadata: Mapping[str, Any]
    """Agent metadata merged into every run's."""
    provider_options: Mapping[str, Any]
    """Generic provider request options."""
    thinking_level: str | None
    """The thinking intent snapped onto each request."""
    provider_request_policies: tuple[Callable[..., Any], ...]
    """Policies applied to each provider request before middleware."""
    turn_policy: Any
    """The host's turn policy (a ``TurnPolicy``), or ``None``."""
    stop_hooks: tuple[Any, ...]
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
    tool_result_fold: Any = None
    """Folding of aged large tool results in the provider input (a ``ToolResultFold``), or
    ``None``."""
    attention_compiler: Any = None
    """The attention compiler's settings (an ``AttentionSettings``), or ``None`` (off)."""
    secure: bool = False
    """Whether ``create_secure_agent`` composed the agent (runs cannot replace its seams)."""
