"""The state of one run and the two services every phase uses: emitting and middleware context.

``RunState`` resolves the run's configuration (limits, retry, guardrails, system prompt, loop,
skills, durable options) from the agent and the options, and holds everything the phases read
and update: counters, the last message, the provider in use, the result. The phases are
functions over it (``_request``, ``_provider_turn``, ``_tool_round``, ``_boundary``,
``_terminals``); the flow that calls them lives in ``_execution``. This module must not hold phase
logic or do I/O.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Mapping
from typing import Any

import anyio
import attrs

from .._output_type import OutputType
from .._threads import LoopHandle
from ..content import Message
from ..durable import DurableRun, Gate
from ..errors import AgentRunStateError, PrismError
from ..events import AgentEvent
from ..guardrails import GuardrailRecord, coerce_guardrails
from ..middleware import MiddlewareContext
from ..models import ModelConfig
from ..providers import AIProvider, ProviderToolSpec
from ..redaction import chain_redactors, redact_value
from ..results import AgentRunResult
from ..retry import coerce_retry
from ..signals import AbortSignal
from ..skills import Skill, SkillDisclosure
from ._attention import resolve_run_attention
from ._compaction import coerce_compaction
from ._counters import RunCounters
from ._fold import ToolResultFold
from ._loops import coerce_loop
from ._options import InvalidOptionsError, RunOptions
from ._ports import RunSession
from ._setup import resolve_skills, start_durable, system_prompt_parts
from ._turn_policy import TurnPolicy, check_turn_policy_limits

__all__ = ("SECURE_DEFAULTS", "TERMINAL_RESERVE_S", "RunState")

#: The most a durable run's wall time keeps back for its terminal checkpoint (see
#: :attr:`RunState.step_deadline`).
TERMINAL_RESERVE_S = 1.0

#: The refusal of a per-run option that would replace a secure agent's seams.
SECURE_DEFAULTS = "Secure agent defaults cannot be replaced per run"


class RunState:
    """The configuration and the live state of one run on one session."""

    def __init__(
        self,
        session: RunSession,
        messages: tuple[Message, ...],
        options: RunOptions,
        *,
        run_id: str | None = None,
        resume: Any = None,
        parent_run_id: str | None = None,
    ) -> None:
        agent = session.config
        self.resume = resume
        #: The run whose sub-agent call started this one (``None``: a top-level run).
        self.parent_run_id = parent_run_id
        self.session = session
        self.agent = agent
        self.session_id = session.id
        self.run_id = run_id or f"run_{uuid.uuid4().hex}"
        self.signal = AbortSignal()
        self.options = options
        self.input_messages = messages
        try:
            self.limits = agent.limits.narrowed(options.limits)
            self.retry = agent.retry if options.retry is None else coerce_retry(options.retry)
            guardrails = agent.guardrails
            packs = session.compiled_packs
            if packs is not None:
                # Pack guards run after the agent's tool-input guards and before the run's.
                # Pack observers see every result first, so a blocking guard cannot hide a
                # validation failure from pack state.
                guardrails = attrs.evolve(
                    guardrails,
                    tool_input=guardrails.tool_input + packs.tool_input,
                    tool_output=packs.tool_output + guardrails.tool_output,
                )
            self.guardrails = guardrails.merged(coerce_guardrails(options.guardrails))
            #: The agent's part of the system prompt and the run's own layers.
            self.system_parts = system_prompt_parts(
                agent.instructions, agent.system_prompt, options.system_prompt
            )
            self.system = "\n\n".join(p for p in self.system_parts if p) or None
            loop = coerce_loop(
                options.loop if options.loop is not None else agent.loop, agent.loop_catalogue
            )
        except (TypeError, ValueError) as exc:
            if isinstance(exc, InvalidOptionsError):
                raise
            raise InvalidOptionsError(str(exc)) from exc
        new_run = getattr(loop, "new_run", None)
        self.loop = new_run() if callable(new_run) else loop
        self.model: ModelConfig = options.model or agent.model
        self.redactor = chain_redactors(agent.redactor, options.redactor)
        self.tool_names = options.tool_names
        #: Who started the run (the ``actor`` run option; a resume restores the recorded one).
        self.started_by = options.actor
        self.metadata: dict[str, Any] = {
            **agent.metadata,
            **session.metadata,
            **options.metadata,
        }
        self.provider_options: dict[str, Any] = {
            **agent.provider_options,
            **options.provider_options,
        }
        self.thinking_level = options.thinking_level or agent.thinking_level
        self.policies = (*agent.provider_request_policies, *options.provider_request_policies)
        self.provider_source = options.provider_source or agent.provider_source
        try:
            self.compaction = (
                agent.compaction
                if options.compaction is None
                else coerce_compaction(options.compaction)
            )
        except (TypeError, ValueError) as exc:
            if isinstance(exc, InvalidOptionsError):
                raise
            raise InvalidOptionsError(str(exc)) from exc
        self.turn_policy: TurnPolicy | None = (
            options.turn_policy if options.turn_policy is not None else agent.turn_policy
        )
        try:
            check_turn_policy_limits(options.turn_policy, self.limits.max_turns)
            self.attention = resolve_run_attention(
                agent.attention_compiler, options.attention_compiler
            )
        except (TypeError, ValueError) as exc:
            raise InvalidOptionsError(str(exc)) from exc
        #: How request assembly orders the system prompt (the run's layout wins).
        self.input_layout = options.input_layout or agent.input_layout
        fold = (
            options.tool_result_fold
            if options.tool_result_fold is not None
            else agent.tool_result_fold
        )
        self.tool_result_fold: ToolResultFold | None = fold or None
        #: Summaries of folded results by call id (made once per run).
        self.fold_summaries: dict[str, str] = {}
        #: The last dispatched calls, for ``budget_exhausted``.
        self.recent_tool_calls: deque[dict[str, str]] = deque(maxlen=10)
        self.stop_hooks: tuple[Any, ...] = (
            options.stop_hooks if options.stop_hooks is not None else agent.stop_hooks
        )
        #: The ``finish_reason`` of the last provider turn (``None`` when it gave none).
        self.finish_reason: str | None = None
        self.active_skills = resolve_skills(agent, options)
        self.skills_disclosure: SkillDisclosure = (
            options.skills_disclosure or agent.skills_disclosure  # type: ignore[assignment]
        )
        # Request assembly's caches and measurements (see ``_request``).
        self.system_key: tuple[str, ...] | None = None
        self.system_text: str | None = None
        self.request_extra_bytes = 0
        self.request_messages: tuple[Message, ...] | None = None
        self.tool_specs: tuple[ProviderToolSpec, ...] | None = None
        self.secrets: list[str] = []
        # The provider stream in flight, cancelled by a soft interrupt (see ``_provider_turn``).
        self.provider_scope: anyio.CancelScope | None = None
        self.counters = RunCounters()
        self.last_message: Message | None = None
        self.result: AgentRunResult | None = None
        self.failure_cause: BaseException | None = None
        self.failure_record: GuardrailRecord | None = None
        self.deadline: float | None = None
        self.step_scope: anyio.CancelScope | None = None
        # The loop the run steps on, so that an abort from another thread reaches its scopes.
        self.event_loop: LoopHandle | None = None
        self.provider: AIProvider | None = None
        # Progress events a tool emitted while it ran, yielded after it (see ``_tool_round``).
        self.deferred: list[AgentEvent] = []
        # An input-guardrail interrupt waiting for the history to load (see ``_boundary``).
        self.input_gate: Gate | None = None
        #: What the final answer must be (the run's ``output_type``, else the agent's).
        self.output_type: OutputType | None = (
            options.output_type if options.output_type is not None else agent.output_type
        )
        #: The validated final answer (set when the run finishes with a valid one).
        self.output: Any = None
        #: What the last invalid answer got wrong (for ``OutputValidationError``).
        self.output_problems: tuple[str, ...] = ()
        self.durable: DurableRun | None = None
        if agent.secure and (options.run_state is not None or options.redactor is not None):
            raise AgentRunStateError(SECURE_DEFAULTS)
        if resume is None:
            run_state = options.run_state if options.run_state is not None else agent.run_state
            if run_state is not None:
                self.durable = start_durable(
                    self, agent, options, run_state, session_store=session.store
                )
        if options.signal is not None:
            # Last, once the run is sure to exist: a signal that already fired aborts it here.
            options.signal.on_abort(self._host_aborted)

    def _host_aborted(self, reason: Any) -> None:
        """The host's ``signal`` fired: abort the run and cancel the step in flight (called on
        the run's event loop)."""
        self.signal.abort(reason)
        if self.step_scope is not None:
            self.step_scope.cancel()

    @property
    def output_schema(self) -> Mapping[str, Any] | None:
        """The JSON Schema of the run's output type, if it has one."""
        return self.output_type.schema if self.output_type is not None else None

    @property
    def output_json(self) -> Any:
        """The validated final answer as JSON (``None`` until there is one)."""
        if self.output is None or self.output_type is None:
            return None
        return self.output_type.to_json(self.output)

    def emit(self, event: AgentEvent) -> AgentEvent:
        """Redact ``event`` and publish it to the session's subscribers; return what was sent."""
        redacted = redact_value(event, self.redactor)
        self.session.broadcaster.publish(redacted)
        middleware = self.agent.middleware
        if middleware.handles("event"):
            middleware.observe("event", redacted, self.mw_context("event"))
        return redacted

    @property
    def step_deadline(self) -> float | None:
        """When the run's work stops for its wall time (on the event loop's clock): the
        deadline itself, or for a durable run a little before it (a tenth of the wall time, at
        most :data:`TERMINAL_RESERVE_S`), so the terminal checkpoint is written within the wall
        time, bounded by what is left of it, even when the store stalls."""
        if self.deadline is None:
            return None
        if self.durable is None or self.limits.max_wall_time_ms is None:
            return self.deadline
        reserve = min(TERMINAL_RESERVE_S, self.limits.max_wall_time_ms / 10000)
        return float(self.deadline - reserve)

    def mw_context(self, point: str) -> MiddlewareContext:
        """The middleware context for ``point`` in this run."""
        return MiddlewareContext(
            point=point,
            session_id=self.session_id,
            run_id=self.run_id,
            metadata=self.metadata,
            signal=self.signal,
            agent_id=self.agent.id,
            agent_name=self.agent.name,
            agent_version=(
                self.durable.options.definition_revision if self.durable is not None else None
            ),
            agent_description=self.agent.description,
            model=self.model,
        )

    def load_skill(self, name: str) -> Skill:
        """Load an active skill into the session's loaded-skill set (``load_skill`` tool)."""
        for skill in self.active_skills:
            if skill.name == name:
                self.session.loaded_skills.add(skill)
                return skill
        raise PrismError(
            f"Skill {name!r} is not active in this run; active: "
            f"{[s.name for s in self.active_skills]}",
            code="ERR_PRISM_SKILL_UNKNOWN",
        )
