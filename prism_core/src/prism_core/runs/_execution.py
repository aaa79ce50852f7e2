"""One run, top to bottom: the event generator that walks a run through its phases.

The generator never holds a cancel scope across a ``yield``: the driver wraps each step in
its own scope, so an abort or the wall-time deadline cancels exactly the step in flight and
the consumer's code between steps is never cancelled by the run.

A turn, as :meth:`RunExecution.run_turns` walks it: the turn boundary (``_boundary``) → the
request (``_request``) → the provider turn (``_provider_turn``) → the tool round
(``_tool_round``) → suspension of held calls, or the next turn. The run's state lives in
:class:`~._state.RunState`; how it ends lives in ``_terminals``. This module owns only the
order of the phases and the mapping of the phases' exceptions to terminals.

It must not hold what a phase does.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

import anyio

from ..content import ErrorInfo, Message
from ..durable import Gate
from ..errors import PrismError
from ..events import AgentEvent, AgentStartedEvent, TurnFinishedEvent, TurnStartedEvent
from ..redaction import redact_value
from . import _boundary, _terminals
from ._counters import LimitBreached
from ._failures import AbortRequested, RunFailure, RunSuspended
from ._output import check_output
from ._provider_turn import TurnState, assistant_message, finish_message, stream_turn
from ._request import assemble_request, request_bytes, resolve_provider
from ._state import RunState
from ._stop_hooks import consult_stop_hooks
from ._tool_round import check_decision_cap, resume_pending, tool_call
from ._turn_policy import RunStopped

__all__ = ("RunExecution",)

logger = logging.getLogger(__package__ or __name__)


class RunExecution(RunState):
    """The event generator of one run, over the state it inherits from :class:`RunState`."""

    async def events(self) -> AsyncGenerator[AgentEvent, None]:
        """The run's events, from ``agent_started`` to ``agent_finished``, ``error``,
        ``agent_suspended`` (durable runs) or, after ``agent_resumed``, the same endings."""
        try:
            if self.resume is None and self.plan.limits.max_wall_time_ms is not None:
                self.deadline = anyio.current_time() + self.plan.limits.max_wall_time_ms / 1000
            yield self.emit(AgentStartedEvent(session_id=self.session_id, run_id=self.run_id))
            if self.resume is not None:
                assert self.resume.resumed_event is not None
                yield self.emit(self.resume.resumed_event)
            self.provider = await resolve_provider(self)
            await self.session.run_slot.ensure_started(self.run_id, self.plan.metadata, self.signal)
            if self.resume is None:
                for event in await _boundary.check_input(self):
                    yield event
                await self.session.transcript.ensure_loaded()
                if self.input_gate is not None:
                    assert self.durable is not None
                    raise RunSuspended(
                        await self.durable.suspend(
                            [self.input_gate],
                            pending_input=redact_value(self.input_messages, self.plan.redactor),
                        )
                    )
                await _boundary.append_input(self)
                for event in await _boundary.auto_compact(self):
                    yield event
            else:
                await self.session.transcript.ensure_loaded()
                resumed = resume_pending(self)
                async with aclosing(resumed):
                    async for event in resumed:
                        yield event
            async with aclosing(self.plan.loop.run(self)) as loop_events:
                async for event in loop_events:
                    yield event
            for event in await _terminals.succeed(self):
                yield event
        except AbortRequested:
            raise
        except RunStopped as stopped:
            for event in stopped.events:
                yield event
            for event in await _terminals.succeed(self, stopped.reason, stopped.detail):
                yield event
        except RunSuspended as suspension:
            yield _terminals.suspended(self, suspension.interruption)
        except RunFailure as failure:
            for event in await _terminals.fail(self, failure):
                yield event
        except LimitBreached as breach:
            limit_failure = RunFailure(
                ErrorInfo(str(breach), code="ERR_PRISM_RUN_LIMIT"), limit=breach.breach
            )
            for event in await _terminals.fail(self, limit_failure):
                yield event
        except Exception as exc:
            code = getattr(exc, "code", None) or "ERR_PRISM_RUN_FAILED"
            unexpected = RunFailure(ErrorInfo(str(exc) or type(exc).__name__, code=code), cause=exc)
            for event in await _terminals.fail(self, unexpected):
                yield event

    async def run_turns(self) -> AsyncGenerator[AgentEvent, None]:
        """Provider turns until a turn requests no tool calls."""
        while True:
            for event in await _boundary.turn_boundary(self):
                yield event
            self.counters.turns += 1
            self.counters.charge("max_turns", self.counters.turns, self.plan.limits)
            turn = self.counters.turns
            logger.debug("run %s: turn %d", self.run_id, turn)
            yield self.emit(
                TurnStartedEvent(session_id=self.session_id, run_id=self.run_id, turn=turn)
            )
            request = await assemble_request(self)
            # What assembly emitted (``attention_compiled``) is yielded before the turn streams.
            for event in self.deferred:
                yield event
            self.deferred.clear()
            state = TurnState()
            async with aclosing(stream_turn(self, request, state)) as turn_events:
                async for event in turn_events:
                    yield event
            # A soft interrupt keeps what was streamed but drops half-formed tool calls.
            calls = () if state.interrupted else state.assembler.finish()
            message = assistant_message(state, calls)
            for event in await finish_message(self, message, state):
                yield event
            if calls:
                self.counters.tool_rounds += 1
                self.counters.charge("max_tool_rounds", self.counters.tool_rounds, self.plan.limits)
                self.counters.tool_calls += len(calls)
                self.counters.charge("max_tool_calls", self.counters.tool_calls, self.plan.limits)
                check_decision_cap(self, calls, state.assembler.invalid_ids)
                gates: list[Gate] | None = [] if self.durable is not None else None
                for call in calls:
                    tool_events = tool_call(
                        self, call, call.id in state.assembler.invalid_ids, gates
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
            if (
                not calls
                and not _boundary.has_pending_steers(self)
                and not await consult_stop_hooks(self)
                and not await check_output(self)
            ):
                return

    # -- what loop strategies, the driver and the session call ------------------------------

    async def add_user_message(self, message: Message) -> None:
        """Append a user message (used by loop strategies between turn sequences)."""
        await self.session.transcript.append_message(
            redact_value(message, self.plan.redactor), self.run_id
        )

    def has_pending_steers(self) -> bool:
        """Whether steered messages wait for the next turn boundary."""
        return _boundary.has_pending_steers(self)

    async def apply_pending_steers(self) -> list[AgentEvent]:
        """Check each pending steer with the input guardrails and append the allowed ones."""
        return await _boundary.apply_pending_steers(self)

    def interrupt(self, reason: Any) -> None:
        """Abort the run: fire its signal and cancel the step in flight (on its event loop),
        so the driver ends it ``aborted`` at its next step."""
        self.signal.abort(reason)
        if self.step_scope is not None:
            self.step_scope.cancel()

    def soft_interrupt(self) -> None:
        """Cancel only the provider stream in flight; the run continues with the next turn."""
        if self.provider_scope is not None:
            self.provider_scope.cancel()

    def request_bytes(self) -> int:
        """The exact canonical-JSON size of the last request (measured on demand)."""
        return request_bytes(self)

    async def abort_terminal(self, reason: Any) -> list[AgentEvent]:
        """Terminal events for an aborted run (see :func:`._terminals.abort_terminal`)."""
        return await _terminals.abort_terminal(self, reason)

    def abort_terminal_now(self, reason: Any) -> list[AgentEvent]:
        """Terminal events for an aborted run when nothing may be awaited."""
        return _terminals.abort_terminal_now(self, reason)

    async def wall_time_terminal(self) -> list[AgentEvent]:
        """Terminal events when the wall-time deadline cancelled the step in flight."""
        return await _terminals.wall_time_terminal(self)

    def terminal_error(self) -> PrismError | None:
        """The exception ``run()`` raises for this run's result, or ``None`` on success."""
        return _terminals.terminal_error(self)
