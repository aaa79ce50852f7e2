"""The edges of a run's turns: its input, and the boundary before every provider turn.

Owns the input-guardrail stage of the run's input (an ``interrupt`` becomes the input gate of a
durable run), appending the input, automatic compaction before the first turn, and the turn
boundary: stop on abort, apply steered messages (each checked by the input guardrails), the
turn policy, and the durable run's turn checkpoint. It must not stream, run tools or end the run.
"""

from __future__ import annotations

import inspect

import anyio

from ..content import Message, ToolCallContent
from ..durable import Gate, new_approval_id, scope_for
from ..events import AgentEvent, SteerRejectedEvent
from ..guardrails import first_decisive
from ..redaction import redact_value
from ._compact import compact_branch
from ._failures import AbortRequested
from ._guarding import (
    act_on_run_stage,
    decision_event,
    evaluate,
    interrupt_unavailable,
    strongest,
)
from ._state import RunState
from ._turn_policy import RunStopped, TurnPolicy, TurnPolicyContext, decide

__all__ = (
    "append_input",
    "apply_pending_steers",
    "auto_compact",
    "check_input",
    "has_pending_steers",
    "recheck_approved_input",
    "turn_boundary",
)


async def check_input(run: RunState) -> list[AgentEvent]:
    """Run the input guardrails over the run's input; a durable run's interrupt sets a gate."""
    guards = run.plan.guardrails.for_stage("input")
    if not guards:
        return []
    records = await evaluate(run, "input", guards, run.input_messages)
    events = [run.emit(decision_event(run, record)) for record in records]
    decisive = first_decisive(records)
    if decisive is not None and decisive.action == "interrupt" and run.durable is not None:
        run.input_gate = Gate(
            call=ToolCallContent("input", "input", {}),
            tool=None,
            kind="input_guardrail",
            reason=decisive.reason or "Input requires approval",
            guardrail=decisive.guardrail,
            scope=scope_for(run.durable.agent_id, ToolCallContent("input", "input", {}), None),
            approval_id=new_approval_id(),
        )
        return events
    act_on_run_stage(decisive, "input")
    return events


async def recheck_approved_input(run: RunState, messages: tuple[Message, ...]) -> list[AgentEvent]:
    """Run the input guardrails again over input a human approved, before it is stored.

    The approval answers an ``interrupt`` only: every guard is consulted (an ask never
    outranks a later block), and a guard that now blocks or trips fails the run with a
    :class:`~prism_core.errors.GuardrailError` cause before anything else of the run happens.
    """
    guards = run.plan.guardrails.for_stage("input")
    events: list[AgentEvent] = []
    remaining = guards
    while remaining:
        records = await evaluate(run, "input", remaining, messages)
        events.extend(run.emit(decision_event(run, record)) for record in records)
        decisive = strongest(records)
        if decisive is None:
            break
        if decisive.action != "interrupt":
            act_on_run_stage(decisive, "input (approved)")
        if run.plan.guardrails.max_concurrency > 1:
            break
        remaining = remaining[len(records) :]
    return events


async def append_input(run: RunState) -> None:
    """Store the run's input (after a ``model_change`` entry when the model changed)."""
    transcript = run.session.transcript
    if run.plan.model != run.session.current_model:
        # The entry moves the session's current model (``transcript.model``) to run.plan.model.
        await transcript.append_entry(kind="model_change", run_id=run.run_id, model=run.plan.model)
    for message in run.input_messages:
        await transcript.append_message(redact_value(message, run.plan.redactor), run.run_id)


async def turn_boundary(run: RunState) -> list[AgentEvent]:
    """A provider-turn boundary: stop on abort, apply steers, consult the turn policy, then
    the durable checkpoint.

    Steers come before the policy, so a message steered into a run the policy then stops is in
    the history the stop records (a continued durable run sees it once). Every turn passes a
    checkpoint of the event loop, so a run whose provider, tools and stores never really await
    still lets cancellation and other tasks through."""
    await anyio.lowlevel.checkpoint()
    if run.signal.aborted:
        await anyio.lowlevel.checkpoint()
        raise AbortRequested()
    events = await apply_pending_steers(run)
    if run.plan.turn_policy is not None:
        try:
            await consult_turn_policy(run, run.plan.turn_policy)
        except RunStopped as stopped:
            stopped.events = events
            raise
    if run.durable is not None:
        await run.durable.turn_boundary()
    return events


async def consult_turn_policy(run: RunState, policy: TurnPolicy) -> None:
    """Ask the turn policy whether the run goes on (it raises ``RunStopped`` to end it)."""
    counters = run.counters
    context = TurnPolicyContext(
        session_id=run.session_id,
        run_id=run.run_id,
        turns=counters.turns,
        provider_attempts=counters.provider_attempts,
        tool_rounds=counters.tool_rounds,
        tool_calls=counters.tool_calls,
        usage=counters.usage if counters.usage_reported else None,
        last_message=run.last_message,
        pending_steers=len(run.session.steers),
        metadata=run.plan.metadata,
    )
    await decide(policy, context, run.plan.redactor, run.agent.thread_limiter)


def has_pending_steers(run: RunState) -> bool:
    """Whether steered messages wait for the next turn boundary."""
    return len(run.session.steers) > 0


async def apply_pending_steers(run: RunState) -> list[AgentEvent]:
    """Check each pending steer with the input guardrails and append the allowed ones.

    A ``block``/``tripwire`` drops just that message (``steer_rejected``); an
    ``interrupt`` fails the run, since only run-start input can suspend.
    """
    events: list[AgentEvent] = []
    guards = run.plan.guardrails.for_stage("input")
    for message in run.session.steers.drain():
        message = redact_value(message, run.plan.redactor)
        if guards:
            records = await evaluate(run, "input", guards, (message,))
            events.extend(run.emit(decision_event(run, r)) for r in records)
            decisive = first_decisive(records)
            if decisive is not None and decisive.action == "interrupt":
                interrupt_unavailable(decisive, "input (steer)")
            if decisive is not None:
                events.append(
                    run.emit(
                        SteerRejectedEvent(
                            session_id=run.session_id,
                            run_id=run.run_id,
                            message=message,
                            record=decisive,
                        )
                    )
                )
                continue
        await run.session.transcript.append_message(message, run.run_id)
    return events


async def auto_compact(run: RunState) -> list[AgentEvent]:
    """Compact the session before the first turn when the compaction config says it is due."""
    config = run.plan.compaction
    if config is None or not config.automatic:
        return []
    session = run.session
    due = (
        config.threshold_entries is not None
        and len(session.transcript.messages) >= config.threshold_entries
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
    await compact_branch(
        session.transcript,
        metadata=session.metadata,
        middleware=session.config.middleware,
        redactor=session.config.redactor,
        keep_recent=config.keep_recent_entries,
        strategy=config.strategy,
        run_id=run.run_id,
        signal=run.signal,
        emit=lambda event: events.append(run.emit(event)),
    )
    return events
