"""The state of one run and the two services every phase uses: emitting and middleware context.

``RunState`` holds the run's identity, its plan (:class:`~._plan.RunPlan`: the agent's
configuration with the run's options applied, resolved once by ``_plan``) and its progress:
counters, the last message, the provider in use, the result, and the per-turn caches of
request assembly. The phases are functions over it (``_request``, ``_provider_turn``,
``_tool_round``, ``_boundary``, ``_terminals``); the flow that calls them lives in
``_execution``. This module must not resolve configuration, hold phase logic or do I/O.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Mapping
from typing import Any

import anyio

from .._threads import LoopHandle
from ..content import Message
from ..durable import DurableRun, Gate
from ..errors import PrismError
from ..events import AgentEvent
from ..guardrails import GuardrailRecord
from ..middleware import MiddlewareContext
from ..providers import AIProvider, ProviderToolSpec
from ..redaction import redact_value
from ..results import AgentRunResult
from ..signals import AbortSignal
from ..skills import Skill
from ._counters import RunCounters
from ._options import RunOptions
from ._plan import RunPlan, resolve_run_plan
from ._ports import RunSession
from ._setup import start_durable

__all__ = ("TERMINAL_RESERVE_S", "RunState")

#: The most a durable run's wall time keeps back for its terminal checkpoint (see
#: :attr:`RunState.step_deadline`).
TERMINAL_RESERVE_S = 1.0


class RunState:
    """One run on one session: its identity, its :class:`~._plan.RunPlan` and its progress."""

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
        #: What the run will do (a resume narrows it to what the checkpoint recorded).
        self.plan: RunPlan = resolve_run_plan(
            agent,
            options,
            packs=session.compiled_packs,
            session_metadata=session.metadata,
            session_store=session.store,
            resumed=resume is not None,
        )
        self.resume = resume
        #: The run whose sub-agent call started this one (``None``: a top-level run).
        self.parent_run_id = parent_run_id
        self.session = session
        self.agent = agent
        self.session_id = session.id
        self.run_id = run_id or f"run_{uuid.uuid4().hex}"
        self.signal = AbortSignal()
        self.input_messages = messages
        #: Who started the run (the ``actor`` run option; a resume restores the recorded one).
        self.started_by = options.actor
        #: Summaries of folded results by call id (made once per run).
        self.fold_summaries: dict[str, str] = {}
        #: The last dispatched calls, for ``budget_exhausted``.
        self.recent_tool_calls: deque[dict[str, str]] = deque(maxlen=10)
        #: The ``finish_reason`` of the last provider turn (``None`` when it gave none).
        self.finish_reason: str | None = None
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
        #: The validated final answer (set when the run finishes with a valid one).
        self.output: Any = None
        #: What the last invalid answer got wrong (for ``OutputValidationError``).
        self.output_problems: tuple[str, ...] = ()
        self.durable: DurableRun | None = None
        if self.plan.run_state is not None:
            self.durable = start_durable(self, agent, self.plan.run_state, self.plan.run_guardrails)
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
        output_type = self.plan.output_type
        return output_type.schema if output_type is not None else None

    @property
    def output_json(self) -> Any:
        """The validated final answer as JSON (``None`` until there is one)."""
        output_type = self.plan.output_type
        if self.output is None or output_type is None:
            return None
        return output_type.to_json(self.output)

    def emit(self, event: AgentEvent) -> AgentEvent:
        """Redact ``event`` and publish it to the session's subscribers; return what was sent."""
        redacted = redact_value(event, self.plan.redactor)
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
        wall_time_ms = self.plan.limits.max_wall_time_ms
        if self.durable is None or wall_time_ms is None:
            return self.deadline
        reserve = min(TERMINAL_RESERVE_S, wall_time_ms / 10000)
        return float(self.deadline - reserve)

    def mw_context(self, point: str) -> MiddlewareContext:
        """The middleware context for ``point`` in this run."""
        return MiddlewareContext(
            point=point,
            session_id=self.session_id,
            run_id=self.run_id,
            metadata=self.plan.metadata,
            signal=self.signal,
            agent_id=self.agent.id,
            agent_name=self.agent.name,
            agent_version=(
                self.durable.options.definition_revision if self.durable is not None else None
            ),
            agent_description=self.agent.description,
            model=self.plan.model,
        )

    def load_skill(self, name: str) -> Skill:
        """Load an active skill into the session's loaded-skill set (``load_skill`` tool)."""
        for skill in self.plan.active_skills:
            if skill.name == name:
                self.session.loaded_skills.add(skill)
                return skill
        raise PrismError(
            f"Skill {name!r} is not active in this run; active: "
            f"{[s.name for s in self.plan.active_skills]}",
            code="ERR_PRISM_SKILL_UNKNOWN",
        )
