"""Guardrail stages inside a run: evaluating a stage and acting on what it decided.

Owns the evaluation context of a stage, the ``guardrail_decision`` event, and how a decisive
record stops the run (``RunFailure``) at a run stage (input, output) or a tool stage. Which
stage runs when, and what a blocked tool call answers, belongs to the phases that call it.

It must not decide either.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

from ..content import ErrorInfo, ToolCallContent
from ..errors import GuardrailError
from ..events import GuardrailDecisionEvent
from ..guardrails import GuardrailContext, GuardrailRecord, evaluate_guardrails, first_decisive
from ..guardrails._decisions import GuardrailStage
from ._failures import RunFailure
from ._state import RunState

__all__ = (
    "act_on_run_stage",
    "act_on_tool_stage",
    "decision_event",
    "evaluate",
    "interrupt_unavailable",
    "strongest",
)


def strongest(records: Sequence[GuardrailRecord]) -> GuardrailRecord | None:
    """The record that decides: the first block or tripwire, else the first interrupt."""
    for record in records:
        if record.action in ("block", "tripwire"):
            return record
    return first_decisive(records)


async def evaluate(
    run: RunState,
    stage: GuardrailStage,
    guards: Sequence[Any],
    value: Any,
    *,
    call: ToolCallContent | None = None,
) -> list[GuardrailRecord]:
    """Evaluate ``guards`` at ``stage`` over ``value`` (about ``call`` at a tool stage)."""
    context = GuardrailContext(
        stage=stage,
        value=value,
        session_id=run.session_id,
        run_id=run.run_id,
        metadata=run.plan.metadata,
        tool_name=call.name if call is not None else None,
        tool_call_id=call.id if call is not None else None,
        signal=run.signal,
    )
    return await evaluate_guardrails(
        guards,
        context,
        max_concurrency=run.plan.guardrails.max_concurrency,
        redactor=run.plan.redactor,
        limiter=run.agent.thread_limiter,
    )


def decision_event(
    run: RunState, record: GuardrailRecord, call: ToolCallContent | None = None
) -> GuardrailDecisionEvent:
    """The ``guardrail_decision`` event for ``record`` (naming ``call`` at a tool stage)."""
    return GuardrailDecisionEvent(
        session_id=run.session_id,
        run_id=run.run_id,
        record=record,
        tool_call_id=call.id if call is not None else None,
        tool_name=call.name if call is not None else None,
    )


def act_on_run_stage(record: GuardrailRecord | None, stage: str) -> None:
    """Fail the run when ``record`` blocks or trips a run stage (input, output)."""
    if record is None:
        return
    if record.action == "interrupt":
        interrupt_unavailable(record, stage)
    code = "ERR_PRISM_GUARDRAIL_BLOCKED"
    verb = "blocked" if record.action == "block" else "tripped"
    reason = f": {record.reason}" if record.reason else ""
    raise RunFailure(
        ErrorInfo(f"Guardrail {record.guardrail} {verb} the run at {stage}{reason}", code=code),
        record=record,
        cause=GuardrailError("guardrail", record=record, code=code),
    )


def act_on_tool_stage(record: GuardrailRecord, stage: str) -> None:
    """Fail the run when ``record`` trips (or interrupts where it cannot) at a tool stage."""
    if record.action == "interrupt":
        interrupt_unavailable(record, stage)
    if record.action == "tripwire":
        reason = f": {record.reason}" if record.reason else ""
        raise RunFailure(
            ErrorInfo(
                f"Guardrail {record.guardrail} tripped the run at {stage}{reason}",
                code="ERR_PRISM_GUARDRAIL_BLOCKED",
            ),
            record=record,
        )


def interrupt_unavailable(record: GuardrailRecord, stage: str) -> NoReturn:
    """Fail the run: ``record`` asked to interrupt where the run cannot suspend."""
    raise RunFailure(
        ErrorInfo(
            f"Guardrail {record.guardrail} asked to interrupt at the {stage} stage, but only "
            "the input stage of a durable run can suspend",
            code="ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE",
        ),
        record=record,
    )
