"""One run: an async generator of events over provider turns and tool rounds.

The generator never holds a cancel scope across a ``yield``: the driver wraps each step in
its own scope, so an abort or the wall-time deadline cancels exactly the step in flight and
the consumer's code between steps is never cancelled by the run.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

import anyio
import attrs

from ..codec import dumps
from ..content import (
    ErrorInfo,
    Message,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolResult,
    Usage,
    message_size_bound,
)
from ..durable._options import coerce_run_state_options
from ..durable._run import DurableRun, Gate, loop_is_durable, new_approval_id, scope_for
from ..durable._state import DecisionKind, Interruption
from ..errors import AgentLoopStateError, AgentRunStateError, GuardrailError, PrismError
from ..events import (
    AgentEvent,
    AgentFinishedEvent,
    AgentStartedEvent,
    AgentSuspendedEvent,
    ErrorEvent,
    GuardrailDecisionEvent,
    MessageDelta,
    MessageDeltaEvent,
    MessageFinishedEvent,
    MessageStartedEvent,
    RetryScheduledEvent,
    RunLimitExceededEvent,
    SteerRejectedEvent,
    ToolExecutionBlockedEvent,
    ToolExecutionErrorEvent,
    ToolExecutionFinishedEvent,
    ToolExecutionProgressEvent,
    ToolExecutionStartedEvent,
    TurnFinishedEvent,
    TurnStartedEvent,
)
from ..guardrails import GuardrailContext, GuardrailRecord, evaluate_guardrails, first_decisive
from ..guardrails._decisions import GuardrailStage
from ..limits import RunLimitBreach
from ..middleware import MiddlewareContext
from ..models import ModelConfig
from ..providers import (
    AIProvider,
    ProviderDone,
    ProviderError,
    ProviderRequest,
    ProviderTextDelta,
    ProviderThinkingDelta,
    ProviderToolCall,
    ProviderToolCallDelta,
    ProviderToolSpec,
    ProviderUsage,
    ToolCallAssembler,
)
from ..redaction import chain_redactors, redact_value
from ..results import AgentRunResult
from ..retry import RetryDecision, coerce_retry
from ..signals import AbortSignal
from ..skills import Skill, SkillDisclosure, SkillRegistry, render_skills
from ..tools import (
    DispatchOutcome,
    ToolDefinition,
    ToolExecutionContext,
    check_tool_call,
    execute_tool,
)
from ._compaction import coerce_compaction
from ._counters import LimitBreached, RunCounters
from ._loops import coerce_loop
from ._options import InvalidOptionsError, RunOptions

if TYPE_CHECKING:
    from ..sessions._session import AgentSession

__all__ = ("AbortRequested", "RunExecution", "RunFailure")

TOOL_CALL_BLOCKED = "Tool call blocked by guardrail"
TOOL_RESULT_BLOCKED = "Tool result blocked by guardrail"


class AbortRequested(Exception):
    """Internal: the run's signal fired at a boundary where no cancellation was pending."""


def _strongest(records: Sequence[GuardrailRecord]) -> GuardrailRecord | None:
    """The record that decides: the first block or tripwire, else the first interrupt."""
    for record in records:
        if record.action in ("block", "tripwire"):
            return record
    return first_decisive(records)


class RunSuspended(Exception):
    """Internal: a durable run suspended with ``interruption`` (its checkpoint is written)."""

    def __init__(self, interruption: Interruption) -> None:
        super().__init__("suspended")
        self.interruption = interruption


class RunFailure(Exception):
    """Internal: the run fails with ``error`` (and maybe a crossed ``limit``)."""

    def __init__(
        self,
        error: ErrorInfo,
        *,
        limit: RunLimitBreach | None = None,
        cause: BaseException | None = None,
        record: GuardrailRecord | None = None,
    ) -> None:
        super().__init__(error.message)
        self.error = error
        self.limit = limit
        self.cause = cause
        self.record = record


def compose_system_prompt(
    instructions: str | None, agent_layers: Sequence[Any], run_layers: Any
) -> str | None:
    """Instructions, then agent layers, then run layers; ``run_layers=False`` drops layers."""
    parts: list[str] = []
    if instructions:
        parts.append(instructions)
    if run_layers is not False:
        for layer in (*agent_layers, *(run_layers or ())):
            text = layer if isinstance(layer, str) else getattr(layer, "text", None)
            if text is None and isinstance(layer, Mapping):
                text = layer.get("text")
            if not isinstance(text, str):
                raise InvalidOptionsError(
                    f"system prompt layers must be strings or have a 'text', got {layer!r}"
                )
            if text:
                parts.append(text)
    return "\n\n".join(parts) if parts else None


@attrs.define
class _TurnState:
    text: str = ""
    thinking: str = ""
    signature: str | None = None
    usage: Usage | None = None
    started: bool = False
    emitted: bool = False
    interrupted: bool = False
    response_bytes: int = 0
    buffer: list[AgentEvent] = attrs.field(factory=list)
    assembler: ToolCallAssembler = attrs.field(factory=ToolCallAssembler)

    def reset(self) -> None:
        """Forget a failed attempt (nothing of it was emitted) before the retry."""
        self.text, self.thinking, self.signature, self.usage = "", "", None, None
        self.started, self.emitted, self.response_bytes = False, False, 0
        self.interrupted = False
        self.buffer.clear()
        self.assembler = ToolCallAssembler()


def _resolve_skills(agent: Any, options: RunOptions) -> tuple[Skill, ...]:
    """The skills a run activates (see ``RunOptions.active_skills``/``skills``)."""
    source = options.skills if options.skills is not None else agent.skills
    if source is None:
        if options.active_skills:
            raise InvalidOptionsError("active_skills needs skills configured on the agent")
        return ()
    registry = isinstance(source, SkillRegistry)
    available = source.all() if registry else tuple(source)
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


class RunExecution:
    """The state and the event generator of one run on one session."""

    def __init__(
        self,
        session: AgentSession,
        messages: tuple[Message, ...],
        options: RunOptions,
        *,
        run_id: str | None = None,
        resume: Any = None,
    ) -> None:
        agent = session.agent
        self.resume = resume
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
            from ..guardrails import coerce_guardrails

            guardrails = agent.guardrails.merged(coerce_guardrails(options.guardrails))
            packs = session.compiled_packs
            if packs is not None:
                # Pack observers see every result first, so a blocking guard cannot hide a
                # validation failure from pack state.
                guardrails = attrs.evolve(
                    guardrails,
                    tool_input=guardrails.tool_input + packs.tool_input,
                    tool_output=packs.tool_output + guardrails.tool_output,
                )
            self.guardrails = guardrails
            self.system = compose_system_prompt(
                agent.instructions, agent.system_prompt, options.system_prompt
            )
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
        self.active_skills = _resolve_skills(agent, options)
        self.skills_disclosure: SkillDisclosure = (
            options.skills_disclosure or agent.skills_disclosure  # type: ignore[assignment]
        )
        self._system_key: tuple[str, ...] | None = None
        self._system_text: str | None = None
        self._provider_scope: anyio.CancelScope | None = None
        self._request_extra_bytes = 0
        self._request_messages: tuple[Message, ...] | None = None
        self.counters = RunCounters()
        self.last_message: Message | None = None
        self.result: AgentRunResult | None = None
        self.failure_cause: BaseException | None = None
        self.failure_record: GuardrailRecord | None = None
        self.deadline: float | None = None
        self.step_scope: anyio.CancelScope | None = None
        self.provider: AIProvider | None = None
        self._deferred: list[AgentEvent] = []
        self._input_gate: Gate | None = None
        self.durable: DurableRun | None = None
        if agent.secure and (options.run_state is not None or options.redactor is not None):
            raise InvalidOptionsError(
                "a secure agent's run_state and redactor cannot be replaced per run"
            )
        if resume is None:
            run_state = options.run_state if options.run_state is not None else agent.run_state
            if run_state is not None:
                self.durable = self._start_durable(run_state)
        self._secrets: list[str] = []
        self._tool_specs: tuple[ProviderToolSpec, ...] | None = None

    def _start_durable(self, run_state: Any) -> DurableRun:
        """Validate a durable run's options before any provider work."""
        from ..durable._fingerprint import agent_fingerprint

        options = coerce_run_state_options(run_state)
        assert options is not None
        agent = self.agent
        if not (agent.id or agent.name):
            raise AgentRunStateError("a durable run needs an agent id or name")
        overrides = [
            name
            for name in ("model", "guardrails", "loop")
            if getattr(self.options, name) is not None
        ]
        if overrides:
            raise AgentRunStateError(
                f"a durable run cannot override {', '.join(overrides)} per run: the agent "
                "fingerprint must describe what a resume will run"
            )
        if not loop_is_durable(self.loop):
            raise AgentLoopStateError(
                f"loop {getattr(self.loop, 'name', '?')!r} has no snapshot()/restore(), so it "
                "cannot take part in a durable run",
                code="ERR_PRISM_LOOP_NOT_DURABLE",
            )
        return DurableRun(
            self, options, fingerprint=agent_fingerprint(agent, options.definition_revision)
        )

    # -- emission ---------------------------------------------------------------------------

    def emit(self, event: AgentEvent) -> AgentEvent:
        """Redact ``event`` and publish it to the session's subscribers; return what was sent."""
        redacted = redact_value(event, self.redactor)
        self.session._broadcaster.publish(redacted)
        return redacted

    def _mw_context(self, point: str) -> MiddlewareContext:
        return MiddlewareContext(
            point=point,
            session_id=self.session_id,
            run_id=self.run_id,
            metadata=self.metadata,
            signal=self.signal,
        )

    # -- the generator ----------------------------------------------------------------------

    async def events(self) -> AsyncGenerator[AgentEvent, None]:
        """The run's events, from ``agent_started`` to ``agent_finished``, ``error``,
        ``agent_suspended`` (durable runs) or, after ``agent_resumed``, the same endings."""
        try:
            if self.resume is None and self.limits.max_wall_time_ms is not None:
                self.deadline = anyio.current_time() + self.limits.max_wall_time_ms / 1000
            yield self.emit(AgentStartedEvent(session_id=self.session_id, run_id=self.run_id))
            if self.resume is not None:
                assert self.resume.resumed_event is not None
                yield self.emit(self.resume.resumed_event)
            self.provider = await self._resolve_provider()
            await self.session._ensure_started(self)
            if self.resume is None:
                for event in await self._check_input():
                    yield event
                await self.session._ensure_history()
                if self._input_gate is not None:
                    assert self.durable is not None
                    raise RunSuspended(
                        await self.durable.suspend(
                            [self._input_gate],
                            pending_input=redact_value(self.input_messages, self.redactor),
                        )
                    )
                await self._append_input()
                for event in await self._auto_compact():
                    yield event
            else:
                await self.session._ensure_history()
                resumed = self._resume_pending()
                async with aclosing(resumed):
                    async for event in resumed:
                        yield event
            async with aclosing(self.loop.run(self)) as loop_events:
                async for event in loop_events:
                    yield event
            yield await self._succeed()
        except AbortRequested:
            raise
        except RunSuspended as suspended:
            yield self._suspended(suspended.interruption)
        except RunFailure as failure:
            for event in await self._fail(failure):
                yield event
        except LimitBreached as breach:
            limit_failure = RunFailure(
                ErrorInfo(str(breach), code="ERR_PRISM_RUN_LIMIT"), limit=breach.breach
            )
            for event in await self._fail(limit_failure):
                yield event
        except Exception as exc:
            code = getattr(exc, "code", None) or "ERR_PRISM_RUN_FAILED"
            unexpected = RunFailure(ErrorInfo(str(exc) or type(exc).__name__, code=code), cause=exc)
            for event in await self._fail(unexpected):
                yield event

    async def _resume_pending(self) -> AsyncGenerator[AgentEvent, None]:
        """Finish the decided work of a resumed suspension, in the order of the calls."""
        assert self.resume is not None
        assert self.durable is not None
        plan = self.resume
        for pending in list(self.durable.pending_calls):
            call = plan.calls[pending.tool_call_id]
            if pending.modified_arguments is not None:
                call = ToolCallContent(call.id, call.name, dict(pending.modified_arguments))
            if pending.status == "rejected":
                for event in await self._reject(call, pending.reason):
                    yield event
                self.durable.settle_pending(call.id)
            elif pending.status == "answered":
                answer = ToolResult(call.id, call.name, value=dict(pending.answer or {}))
                yield await self._deliver(call, answer)
                self.durable.settle_pending(call.id)
            else:
                tool_events = self._tool_call(call, False, approved=True)
                async with aclosing(tool_events):
                    async for event in tool_events:
                        yield event
                # A call blocked on re-check never ran; it is settled all the same.
                self.durable.settle_pending(call.id)
        for message in plan.pending_input:
            await self.session._append_message(message, self.run_id)

    def _suspended(self, interruption: Interruption) -> AgentEvent:
        assert self.durable is not None
        info = self.durable.info("suspended")
        self.result = AgentRunResult(
            **self._base_result("suspended"),
            interruption=interruption,
            run_state=info,
            stop_reason="suspended",
        )
        return self.emit(
            AgentSuspendedEvent(
                session_id=self.session_id,
                run_id=self.run_id,
                interruption=interruption,
                version=info.version,
            )
        )

    # -- run start --------------------------------------------------------------------------

    async def _resolve_provider(self) -> AIProvider:
        agent = self.agent
        provider: Any = agent.provider
        if provider is None and self.provider_source is not None:
            provider = self.provider_source(self.model)
            if inspect.isawaitable(provider):
                provider = await provider
        if provider is None:
            provider = agent.plugin_host.provider(self.model)
        if provider is None:
            raise RunFailure(
                ErrorInfo(
                    f"No provider for model {self.model.provider}/{self.model.model}: pass "
                    "create_agent(provider=...), a provider_source, or a plugin implementing "
                    "prism_provider",
                    code="ERR_PRISM_PROVIDER_NOT_FOUND",
                )
            )
        if not callable(getattr(provider, "generate", None)):
            raise RunFailure(
                ErrorInfo(
                    f"Provider for {self.model.provider!r} has no generate(request) method",
                    code="ERR_PRISM_PROVIDER_INVALID",
                )
            )
        return provider  # type: ignore[no-any-return]

    async def _check_input(self) -> list[AgentEvent]:
        guards = self.guardrails.for_stage("input")
        if not guards:
            return []
        records = await self._evaluate("input", guards, self.input_messages)
        events = [self.emit(self._decision_event(record)) for record in records]
        decisive = first_decisive(records)
        if decisive is not None and decisive.action == "interrupt" and self.durable is not None:
            self._input_gate = Gate(
                call=ToolCallContent("input", "input", {}),
                tool=None,
                kind="input_guardrail",
                reason=decisive.reason,
                guardrail=decisive.guardrail,
                scope=scope_for(self.durable.agent_id, ToolCallContent("input", "input", {}), None),
                approval_id=new_approval_id(),
            )
            return events
        self._act_on_run_stage(decisive, "input")
        return events

    async def _append_input(self) -> None:
        session = self.session
        if self.model != session.current_model:
            await session._append_entry(kind="model_change", run_id=self.run_id, model=self.model)
            session.current_model = self.model
        for message in self.input_messages:
            await session._append_message(redact_value(message, self.redactor), self.run_id)

    # -- turns ------------------------------------------------------------------------------

    async def add_user_message(self, message: Message) -> None:
        """Append a user message (used by loop strategies between turn sequences)."""
        await self.session._append_message(redact_value(message, self.redactor), self.run_id)

    async def run_turns(self) -> AsyncGenerator[AgentEvent, None]:
        """Provider turns until a turn requests no tool calls."""
        while True:
            for event in await self._boundary():
                yield event
            self.counters.turns += 1
            self.counters.charge("max_turns", self.counters.turns, self.limits)
            turn = self.counters.turns
            yield self.emit(
                TurnStartedEvent(session_id=self.session_id, run_id=self.run_id, turn=turn)
            )
            request = await self._assemble()
            state = _TurnState()
            async with aclosing(self._provider_turn(request, state)) as turn_events:
                async for event in turn_events:
                    yield event
            # A soft interrupt keeps what was streamed but drops half-formed tool calls.
            calls = () if state.interrupted else state.assembler.finish()
            message = self._assistant_message(state, calls)
            for event in await self._finish_message(message, state):
                yield event
            if calls:
                self.counters.tool_rounds += 1
                self.counters.charge("max_tool_rounds", self.counters.tool_rounds, self.limits)
                self.counters.tool_calls += len(calls)
                self.counters.charge("max_tool_calls", self.counters.tool_calls, self.limits)
                gates: list[Gate] | None = [] if self.durable is not None else None
                for call in calls:
                    tool_events = self._tool_call(
                        call, call.id in state.assembler.invalid_ids, gates
                    )
                    async with aclosing(tool_events):
                        async for event in tool_events:
                            yield event
            yield self.emit(
                TurnFinishedEvent(
                    session_id=self.session_id,
                    run_id=self.run_id,
                    turn=turn,
                    usage=state.usage,
                    tool_calls=len(calls),
                )
            )
            if calls and gates:
                assert self.durable is not None
                raise RunSuspended(await self.durable.suspend(gates))
            if not calls and not self.has_pending_steers():
                return

    async def _boundary(self) -> list[AgentEvent]:
        """A provider-turn boundary: stop on abort, apply steers, then the session's work."""
        if self.signal.aborted:
            await anyio.lowlevel.checkpoint()
            raise AbortRequested()
        events = await self.apply_pending_steers()
        if self.durable is not None:
            await self.durable.turn_boundary()
        return events

    def has_pending_steers(self) -> bool:
        """Whether steered messages wait for the next turn boundary."""
        return len(self.session._steers) > 0

    async def apply_pending_steers(self) -> list[AgentEvent]:
        """Check each pending steer with the input guardrails and append the allowed ones.

        A ``block``/``tripwire`` drops just that message (``steer_rejected``); an
        ``interrupt`` fails the run, since only run-start input can suspend.
        """
        events: list[AgentEvent] = []
        guards = self.guardrails.for_stage("input")
        for message in self.session._steers.drain():
            message = redact_value(message, self.redactor)
            if guards:
                records = await self._evaluate("input", guards, (message,))
                events.extend(self.emit(self._decision_event(r)) for r in records)
                decisive = first_decisive(records)
                if decisive is not None and decisive.action == "interrupt":
                    self._interrupt_unavailable(decisive, "input (steer)")
                if decisive is not None:
                    events.append(
                        self.emit(
                            SteerRejectedEvent(
                                session_id=self.session_id,
                                run_id=self.run_id,
                                message=message,
                                record=decisive,
                            )
                        )
                    )
                    continue
            await self.session._append_message(message, self.run_id)
        return events

    def soft_interrupt(self) -> None:
        """Cancel only the provider stream in flight; the run continues with the next turn."""
        if self._provider_scope is not None:
            self._provider_scope.cancel()

    async def _auto_compact(self) -> list[AgentEvent]:
        config = self.compaction
        if config is None or not config.automatic:
            return []
        session = self.session
        due = (
            config.threshold_entries is not None
            and len(session._history_messages()) >= config.threshold_entries
        )
        meter = session.context_meter()
        if not due and config.input_ratio is not None and meter.input_tokens is not None:
            assert config.context_window is not None
            due = meter.input_tokens / config.context_window >= config.input_ratio
        if not due and config.trigger is not None:
            verdict = config.trigger(meter)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            due = bool(verdict)
        if not due:
            return []
        events: list[AgentEvent] = []
        await session._compact(
            keep_recent=config.keep_recent_entries,
            strategy=config.strategy,
            run_id=self.run_id,
            signal=self.signal,
            emit=lambda event: events.append(self.emit(event)),
        )
        return events

    def _system_prompt(self) -> str | None:
        loaded = self.session.loaded_skills
        key = loaded.names()
        if self._system_key != key:
            section = render_skills(self.active_skills, loaded, self.skills_disclosure)
            parts = [p for p in (self.system, section) if p]
            self._system_text = "\n\n".join(parts) if parts else None
            self._system_key = key
        return self._system_text

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

    def _tool_specs_for_run(self) -> tuple[ProviderToolSpec, ...]:
        if self._tool_specs is None:
            allowed = None if self.tool_names is None else set(self.tool_names)
            self._tool_specs = tuple(
                ProviderToolSpec(tool.name, tool.description, tool.parameters)
                for tool in self.agent.registry.definitions()
                if allowed is None or tool.name in allowed
            )
        return self._tool_specs

    async def _assemble(self) -> ProviderRequest:
        options: dict[str, Any] = dict(self.provider_options)
        for policy in self.policies:
            patch = policy(
                ProviderRequest(
                    model=self.model,
                    messages=(),
                    system=self.system,
                    options=dict(options),
                    metadata=self.metadata,
                    signal=self.signal,
                )
            )
            if inspect.isawaitable(patch):
                patch = await patch
            if patch is None:
                continue
            if not isinstance(patch, Mapping):
                raise RunFailure(
                    ErrorInfo(
                        "provider request policies must return None or a mapping with "
                        "'options' and/or 'secrets'",
                        code="ERR_PRISM_PROVIDER_POLICY",
                    )
                )
            options.update(dict(patch.get("options") or {}))
            self._secrets.extend(s for s in patch.get("secrets") or () if isinstance(s, str))
        if self.thinking_level is not None:
            options["thinking_level"] = self.thinking_level
        options.setdefault("session_id", self.session_id)
        options.setdefault("cache_key", self.session_id)
        request = ProviderRequest(
            model=self.model,
            messages=tuple(self.session._history_messages()),
            tools=self._tool_specs_for_run(),
            system=self._system_prompt(),
            options=options,
            metadata=self.metadata,
            signal=self.signal,
        )
        before = request
        request = await self.agent.middleware.run(
            "provider_request", request, self._mw_context("provider_request")
        )
        if request is not before or self.redactor is not None:
            # History is redacted as it is appended; only the new parts need a pass.
            request = attrs.evolve(
                request,
                system=redact_value(request.system, self.redactor),
                options=redact_value(dict(request.options), self.redactor),
                messages=request.messages
                if request.messages is before.messages
                else redact_value(request.messages, self.redactor),
            )
        extra = len(
            dumps(
                {
                    "system": request.system,
                    "tools": [attrs.asdict(t) for t in request.tools],
                    "options": dict(request.options),
                }
            )
        )
        self._request_extra_bytes = extra
        self._request_messages = None if request.messages is before.messages else request.messages
        # The cheap bound settles almost every turn; the exact size is measured only near the
        # limit, so a long history is not re-encoded before each provider call.
        if self._request_bound() > self.limits.max_request_bytes:
            self.counters.charge("max_request_bytes", self.request_bytes(), self.limits)
        return request

    def _request_bound(self) -> int:
        messages = self._request_messages
        history = (
            self.session._history_bound_bytes()
            if messages is None
            else sum(message_size_bound(m) for m in messages)
        )
        return history + self._request_extra_bytes

    def request_bytes(self) -> int:
        """The exact canonical-JSON size of the last request (measured on demand)."""
        messages = self._request_messages
        history = self.session._history_bytes() if messages is None else len(dumps(list(messages)))
        return history + self._request_extra_bytes

    async def _provider_turn(
        self, request: ProviderRequest, state: _TurnState
    ) -> AsyncGenerator[AgentEvent, None]:
        assert self.provider is not None
        attempt = 0
        buffering = bool(self.guardrails.for_stage("output"))
        while True:
            attempt += 1
            self.counters.provider_attempts += 1
            self.counters.charge(
                "max_provider_attempts", self.counters.provider_attempts, self.limits
            )
            error: ErrorInfo | None = None
            stream = aiter(self.provider.generate(request))
            try:
                while True:
                    # A fresh scope per event, so a soft interrupt cancels the provider only
                    # and no scope is ever held across a yield.
                    with anyio.CancelScope() as provider_scope:
                        self._provider_scope = provider_scope
                        try:
                            provider_event = await anext(stream, None)
                        finally:
                            self._provider_scope = None
                    if provider_scope.cancelled_caught:
                        state.interrupted = True
                        break
                    if provider_event is None:
                        break
                    if isinstance(provider_event, ProviderError):
                        error = provider_event.error
                        break
                    if isinstance(provider_event, ProviderDone):
                        if provider_event.usage is not None:
                            state.usage = provider_event.usage
                        break
                    for event in self._on_provider_event(provider_event, state):
                        if buffering:
                            state.buffer.append(event)
                        else:
                            state.emitted = True
                            yield self.emit(event)
            except (RunFailure, LimitBreached):
                raise
            except Exception as exc:
                error = ErrorInfo(
                    str(exc) or type(exc).__name__,
                    code=getattr(exc, "code", None) or "provider_error",
                    retryable=getattr(exc, "retryable", None),
                )
            finally:
                closer = getattr(stream, "aclose", None)
                if closer is not None:
                    with anyio.CancelScope(shield=True):
                        await closer()
            if error is None:
                return
            error = self._redact_provider_error(error)
            decision = self._retry_decision(attempt, error, state)
            if decision is not None:
                decision = await self.agent.middleware.run(
                    "retry", decision, self._mw_context("retry")
                )
            if decision is None or not decision.retry:
                raise RunFailure(attrs.evolve(error, code=error.code or "provider_error"))
            yield self.emit(
                RetryScheduledEvent(
                    session_id=self.session_id,
                    run_id=self.run_id,
                    attempt=attempt,
                    delay_ms=decision.delay_ms,
                    error=error,
                )
            )
            await anyio.sleep(decision.delay_ms / 1000)
            state.reset()

    def _retry_decision(
        self, attempt: int, error: ErrorInfo, state: _TurnState
    ) -> RetryDecision | None:
        if self.retry is None or state.emitted:
            return None
        return self.retry.decide(attempt, error)

    def _redact_provider_error(self, error: ErrorInfo) -> ErrorInfo:
        message = error.message
        for secret in self._secrets:
            if secret:
                message = message.replace(secret, "[REDACTED]")
        return redact_value(attrs.evolve(error, message=message), self.redactor)

    def _on_provider_event(self, event: Any, state: _TurnState) -> list[AgentEvent]:
        out: list[AgentEvent] = []
        if isinstance(event, ProviderUsage):
            state.usage = event.usage
            return out
        if not state.started:
            state.started = True
            out.append(MessageStartedEvent(session_id=self.session_id, run_id=self.run_id))
        if isinstance(event, ProviderTextDelta):
            state.text += event.text
            state.response_bytes += len(event.text.encode("utf-8"))
            out.append(
                MessageDeltaEvent(
                    session_id=self.session_id,
                    run_id=self.run_id,
                    delta=MessageDelta(kind="text", text=event.text),
                )
            )
        elif isinstance(event, ProviderThinkingDelta):
            state.thinking += event.text
            state.signature = event.signature or state.signature
            state.response_bytes += len(event.text.encode("utf-8"))
            out.append(
                MessageDeltaEvent(
                    session_id=self.session_id,
                    run_id=self.run_id,
                    delta=MessageDelta(kind="thinking", text=event.text),
                )
            )
        elif isinstance(event, ProviderToolCallDelta):
            state.assembler.add_delta(event)
            state.response_bytes += len((event.arguments_text or "").encode("utf-8"))
            out.append(
                MessageDeltaEvent(
                    session_id=self.session_id,
                    run_id=self.run_id,
                    delta=MessageDelta(
                        kind="tool_call",
                        index=event.index,
                        id=event.id,
                        name=event.name,
                        arguments_text=event.arguments_text,
                    ),
                )
            )
        elif isinstance(event, ProviderToolCall):
            state.assembler.add_call(event.call)
            state.response_bytes += len(dumps(event.call.arguments))
        else:
            raise RunFailure(
                ErrorInfo(
                    f"Provider emitted an unknown event {event!r}", code="ERR_PRISM_PROVIDER_EVENT"
                )
            )
        self.counters.charge("max_response_bytes", state.response_bytes, self.limits)
        return out

    def _assistant_message(self, state: _TurnState, calls: tuple[ToolCallContent, ...]) -> Message:
        content: list[Any] = []
        if state.thinking or state.signature:
            # A signed block with no visible text (reasoning the provider withheld) is kept:
            # the provider needs it back on the next turn.
            content.append(ThinkingContent(state.thinking, state.signature))
        if state.text or not calls:
            content.append(TextContent(state.text))
        content.extend(calls)
        return Message("assistant", tuple(content))

    async def _finish_message(self, message: Message, state: _TurnState) -> list[AgentEvent]:
        events: list[AgentEvent] = []
        guards = self.guardrails.for_stage("output")
        if guards:
            records = await self._evaluate("output", guards, message)
            events.extend(self.emit(self._decision_event(record)) for record in records)
            self._act_on_run_stage(first_decisive(records), "output")
            # Allowed: release what was held back, so blocked content is never emitted.
            events.extend(self.emit(event) for event in state.buffer)
            state.buffer.clear()
        if not state.started:
            events.append(
                self.emit(MessageStartedEvent(session_id=self.session_id, run_id=self.run_id))
            )
        message = redact_value(message, self.redactor)
        await self.session._append_message(message, self.run_id)
        self.last_message = message
        events.append(
            self.emit(
                MessageFinishedEvent(
                    session_id=self.session_id, run_id=self.run_id, message=message
                )
            )
        )
        if state.usage is not None and state.usage.input_tokens > 0:
            self.session._meter_input = (state.usage.input_tokens, "reported")
        else:
            self.session._meter_input = (max(1, self.request_bytes() // 4), "estimate")
        if state.usage is not None:
            self.counters.add_usage(state.usage, self.limits)
        return events

    # -- tools ------------------------------------------------------------------------------

    def _tool_context(self, call: ToolCallContent) -> ToolExecutionContext:
        def progress(value: Any) -> None:
            self._deferred.append(
                self.emit(
                    ToolExecutionProgressEvent(
                        session_id=self.session_id,
                        run_id=self.run_id,
                        tool_call_id=call.id,
                        name=call.name,
                        progress=value,
                    )
                )
            )

        return ToolExecutionContext(
            session_id=self.session_id,
            run_id=self.run_id,
            tool_call_id=call.id,
            tool_name=call.name,
            signal=self.signal,
            metadata=self.metadata,
            on_progress=progress,
            skills=self,
        )

    async def _tool_call(
        self,
        call: ToolCallContent,
        invalid: bool,
        gates: list[Gate] | None = None,
        *,
        approved: bool = False,
    ) -> AsyncGenerator[AgentEvent, None]:
        """One call: middleware, tool-input guardrails, checks, the approval gate, dispatch.

        ``gates`` collects calls a durable run must hold for a decision; ``approved`` marks
        a call a human already approved (it is marked ``dispatched`` before it runs).
        """
        if self.signal.aborted:
            await anyio.lowlevel.checkpoint()
            raise AbortRequested()
        call = await self.agent.middleware.run("tool_call", call, self._mw_context("tool_call"))
        ask: GuardrailRecord | None = None
        guards = self.guardrails.for_stage("tool_input")
        if guards:
            decisive: GuardrailRecord | None = None
            remaining = guards
            while remaining:
                records = await self._evaluate("tool_input", remaining, call, call=call)
                for record in records:
                    yield self.emit(self._decision_event(record))
                decisive = _strongest(records)
                if decisive is None or decisive.action != "interrupt":
                    break
                # An ask never outranks a later deny: keep checking the guards after it.
                ask, decisive = ask or decisive, None
                if self.guardrails.max_concurrency > 1:
                    break
                remaining = remaining[len(records) :]
            can_hold = self.durable is not None and (gates is not None or approved)
            if decisive is None and ask is not None and not can_hold:
                # A pack's ask rule blocks where the run cannot suspend; any other interrupt
                # is refused as unavailable here.
                pack_ask = self._is_pack_record(ask)
                decisive = attrs.evolve(ask, action="block") if pack_ask else ask
                ask = None
            if decisive is not None:
                self._act_on_tool_stage(decisive, "tool_input")
                refusal = None
                if self.session.compiled_packs is not None:
                    refusal = self.session.compiled_packs.refusal_message(decisive)
                error = ErrorInfo(refusal or TOOL_CALL_BLOCKED, code="guardrail_blocked")
                yield await self._block(call, "guardrail_blocked", error)
                return
        context = self._tool_context(call)
        checked = await check_tool_call(
            call,
            registry=self.agent.registry,
            context=context,
            tool_names=self.tool_names,
            validate=self.agent.validate,
            trust=self.agent.trust,
            permission=self.agent.permission,
            invalid_arguments=invalid,
        )
        if isinstance(checked, DispatchOutcome):
            assert checked.result.error is not None
            assert checked.blocked_reason is not None
            yield await self._block(call, checked.blocked_reason, checked.result.error)
            return
        if self.durable is not None and gates is not None and not approved:
            gate = self._gate_for(call, checked, ask)
            if gate is not None:
                sticky = self.durable.sticky_for(gate.scope)
                if sticky is None:
                    gates.append(gate)
                    return
                if sticky.outcome == "reject_for_run":
                    for event in await self._reject(call, sticky.reason):
                        yield event
                    return
        if approved and self.durable is not None:
            await self.durable.mark_dispatched(call.id)
        yield self.emit(
            ToolExecutionStartedEvent(
                session_id=self.session_id,
                run_id=self.run_id,
                tool_call_id=call.id,
                name=call.name,
                arguments=dict(call.arguments),
            )
        )
        outcome = await execute_tool(checked, call, context)
        for event in self._deferred:
            yield event
        self._deferred.clear()
        result = outcome.result
        if outcome.status == "failed":
            assert result.error is not None
            yield self.emit(
                ToolExecutionErrorEvent(
                    session_id=self.session_id,
                    run_id=self.run_id,
                    tool_call_id=call.id,
                    name=call.name,
                    error=result.error,
                )
            )
        guards = self.guardrails.for_stage("tool_output")
        if guards:
            records = await self._evaluate("tool_output", guards, result, call=call)
            for record in records:
                yield self.emit(self._decision_event(record))
            decisive = first_decisive(records)
            if decisive is not None:
                self._act_on_tool_stage(decisive, "tool_output")
                result = ToolResult(
                    call.id,
                    call.name,
                    error=ErrorInfo(TOOL_RESULT_BLOCKED, code="guardrail_blocked"),
                )
        result = await self.agent.middleware.run(
            "tool_result", result, self._mw_context("tool_result")
        )
        yield await self._deliver(call, result)
        if approved and self.durable is not None:
            self.durable.settle_pending(call.id)

    async def _deliver(self, call: ToolCallContent, result: ToolResult) -> AgentEvent:
        """Redact ``result``, store it for the next turn, and emit ``tool_execution_finished``."""
        result = redact_value(result, self.redactor)
        await self._append_result(result)
        return self.emit(
            ToolExecutionFinishedEvent(
                session_id=self.session_id,
                run_id=self.run_id,
                tool_call_id=call.id,
                name=call.name,
                result=result,
            )
        )

    def _is_pack_record(self, record: GuardrailRecord) -> bool:
        return record.guardrail.startswith("pack:")

    def _gate_for(
        self, call: ToolCallContent, tool: ToolDefinition, ask: GuardrailRecord | None
    ) -> Gate | None:
        """The gate ``call`` must pass in a durable run, or ``None`` when it may run now."""
        assert self.durable is not None
        if ask is not None:
            kind: DecisionKind = "tool_approval"
            reason, guardrail = ask.reason, ask.guardrail
        elif tool.elicitation is not None:
            kind, reason, guardrail = "elicitation", None, None
        elif self.durable.options.interrupt_before_tool:
            kind, reason, guardrail = "tool_approval", None, None
        else:
            return None
        return Gate(
            call=call,
            tool=tool,
            kind=kind,
            reason=reason,
            guardrail=guardrail,
            scope=scope_for(self.durable.agent_id, call, tool),
            approval_id=new_approval_id(),
        )

    async def _reject(self, call: ToolCallContent, reason: str | None) -> list[AgentEvent]:
        """Answer ``call`` with an ``approval_rejected`` result (a human said no)."""
        message = "Tool call rejected by the approver" + (f": {reason}" if reason else "")
        return [
            await self._block(
                call, "approval_rejected", ErrorInfo(message, code="approval_rejected")
            )
        ]

    async def _block(self, call: ToolCallContent, reason: str, error: ErrorInfo) -> AgentEvent:
        """Answer ``call`` with an error result that it never ran, and emit
        ``tool_execution_blocked`` with ``reason``."""
        error = redact_value(error, self.redactor)
        await self._append_result(ToolResult(call.id, call.name, error=error))
        return self.emit(
            ToolExecutionBlockedEvent(
                session_id=self.session_id,
                run_id=self.run_id,
                tool_call_id=call.id,
                name=call.name,
                reason=reason,
                error=error,
            )
        )

    async def _append_result(self, result: ToolResult) -> None:
        message = Message("tool", (redact_value(result, self.redactor).to_content(),))
        await self.session._append_message(message, self.run_id)

    # -- guardrails -------------------------------------------------------------------------

    async def _evaluate(
        self,
        stage: GuardrailStage,
        guards: Sequence[Any],
        value: Any,
        *,
        call: ToolCallContent | None = None,
    ) -> list[GuardrailRecord]:
        context = GuardrailContext(
            stage=stage,
            value=value,
            session_id=self.session_id,
            run_id=self.run_id,
            metadata=self.metadata,
            tool_name=call.name if call is not None else None,
            tool_call_id=call.id if call is not None else None,
            signal=self.signal,
        )
        return await evaluate_guardrails(
            guards,
            context,
            max_concurrency=self.guardrails.max_concurrency,
            redactor=self.redactor,
        )

    def _decision_event(self, record: GuardrailRecord) -> GuardrailDecisionEvent:
        return GuardrailDecisionEvent(session_id=self.session_id, run_id=self.run_id, record=record)

    def _act_on_run_stage(self, record: GuardrailRecord | None, stage: str) -> None:
        if record is None:
            return
        if record.action == "interrupt":
            self._interrupt_unavailable(record, stage)
        code = "ERR_PRISM_GUARDRAIL_BLOCKED"
        verb = "blocked" if record.action == "block" else "tripped"
        reason = f": {record.reason}" if record.reason else ""
        raise RunFailure(
            ErrorInfo(f"Guardrail {record.guardrail} {verb} the run at {stage}{reason}", code=code),
            record=record,
            cause=GuardrailError("guardrail", record=record, code=code),
        )

    def _act_on_tool_stage(self, record: GuardrailRecord, stage: str) -> None:
        if record.action == "interrupt":
            self._interrupt_unavailable(record, stage)
        if record.action == "tripwire":
            reason = f": {record.reason}" if record.reason else ""
            raise RunFailure(
                ErrorInfo(
                    f"Guardrail {record.guardrail} tripped the run at {stage}{reason}",
                    code="ERR_PRISM_GUARDRAIL_BLOCKED",
                ),
                record=record,
            )

    def _interrupt_unavailable(self, record: GuardrailRecord, stage: str) -> None:
        raise RunFailure(
            ErrorInfo(
                f"Guardrail {record.guardrail} asked to interrupt at the {stage} stage, but only "
                "the input stage of a durable run can suspend",
                code="ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE",
            ),
            record=record,
        )

    # -- endings ----------------------------------------------------------------------------

    def _base_result(self, status: Any) -> dict[str, Any]:
        message = self.last_message
        return {
            "session_id": self.session_id,
            "run_id": self.run_id,
            "status": status,
            "text": message.text if message is not None else "",
            "content": message.content if message is not None else (),
            "message": message,
            "usage": self.counters.usage if self.counters.usage_reported else None,
            "leaf_id": self.session.leaf_id,
        }

    async def _succeed(self) -> AgentEvent:
        run_state = None
        if self.durable is not None:
            await self.durable.finish("succeeded")
            run_state = self.durable.info("succeeded") if self.durable.has_record else None
        self.result = AgentRunResult(
            **self._base_result("succeeded"), stop_reason="completed", run_state=run_state
        )
        return self.emit(
            AgentFinishedEvent(
                session_id=self.session_id,
                run_id=self.run_id,
                text=self.result.text,
                usage=self.result.usage,
                leaf_id=self.result.leaf_id,
            )
        )

    async def _save_terminal(self, status: Any, error: ErrorInfo | None) -> ErrorInfo | None:
        """Write the terminal state of a durable run; a failed write is added to ``error``."""
        if self.durable is None:
            return error
        try:
            await self.durable.finish(status, error)
        except Exception as exc:
            note = f"the terminal checkpoint could not be written: {exc}"
            if error is None:
                return ErrorInfo(note, code=getattr(exc, "code", None))
            return attrs.evolve(error, message=f"{error.message} ({note})")
        return error

    async def _fail(self, failure: RunFailure) -> list[AgentEvent]:
        failure.error = await self._save_terminal("failed", failure.error) or failure.error
        events: list[AgentEvent] = []
        if failure.limit is not None:
            events.append(
                self.emit(
                    RunLimitExceededEvent(
                        session_id=self.session_id, run_id=self.run_id, limit=failure.limit
                    )
                )
            )
        error = redact_value(failure.error, self.redactor)
        events.append(
            self.emit(ErrorEvent(session_id=self.session_id, run_id=self.run_id, error=error))
        )
        self.failure_cause = failure.cause
        self.failure_record = failure.record
        self.result = AgentRunResult(
            **self._base_result("failed"),
            error=error,
            limit=failure.limit,
            stop_reason="limit" if failure.limit is not None else "error",
            stop_detail=failure.limit.axis if failure.limit is not None else error.code,
        )
        return events

    async def abort_terminal(self, reason: Any) -> list[AgentEvent]:
        """Terminal events for an aborted run (the generator is already finished); a durable
        run with a checkpoint records ``aborted``."""
        self.signal.abort(reason)
        error = ErrorInfo(f"Run aborted: {self.signal.reason}", code="ERR_PRISM_ABORTED")
        error = await self._save_terminal("aborted", error) or error
        return self._aborted(error)

    def abort_terminal_now(self, reason: Any) -> list[AgentEvent]:
        """Terminal events for an aborted run when nothing may be awaited (the consumer is
        gone): the checkpoint stays at its last state, as after a crash."""
        self.signal.abort(reason)
        error = ErrorInfo(f"Run aborted: {self.signal.reason}", code="ERR_PRISM_ABORTED")
        return self._aborted(error)

    def _aborted(self, error: ErrorInfo) -> list[AgentEvent]:
        event = self.emit(
            ErrorEvent(
                session_id=self.session_id, run_id=self.run_id, error=error, status="aborted"
            )
        )
        self.result = AgentRunResult(
            **self._base_result("aborted"),
            error=redact_value(error, self.redactor),
            abort_reason=self.signal.reason,
            stop_reason="aborted",
        )
        return [event]

    async def wall_time_terminal(self) -> list[AgentEvent]:
        """Terminal events when the wall-time deadline cancelled the step in flight."""
        assert self.limits.max_wall_time_ms is not None
        elapsed = self.limits.max_wall_time_ms
        if self.deadline is not None:
            elapsed += max(0.0, (anyio.current_time() - self.deadline) * 1000)
        breach = RunLimitBreach("max_wall_time_ms", self.limits.max_wall_time_ms, elapsed)
        failure = RunFailure(
            ErrorInfo(str(LimitBreached(breach)), code="ERR_PRISM_RUN_LIMIT"), limit=breach
        )
        return await self._fail(failure)

    def terminal_error(self) -> PrismError | None:
        """The exception ``run()`` raises for this run's result, or ``None`` on success."""
        from ..errors import AgentRunError, GuardrailRunError

        result = self.result
        if result is None or result.status not in ("failed", "aborted"):
            return None
        assert result.error is not None
        code = result.error.code
        if (
            self.failure_record is not None
            and code is not None
            and code.startswith("ERR_PRISM_GUARDRAIL")
        ):
            error: PrismError = GuardrailRunError(
                result.error.message, result=result, record=self.failure_record, code=code
            )
        else:
            error = AgentRunError(result.error.message, result=result, code=code)
        if self.failure_cause is not None:
            error.__cause__ = self.failure_cause
        return error
