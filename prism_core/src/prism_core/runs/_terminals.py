"""How a run ends: its result, its last events, and the terminal checkpoint of a durable run.

Owns the four endings (succeeded, suspended, failed, aborted, the wall-time limit being a
failure; only a run stopped on purpose has a stop reason), the ``AgentRunResult`` each one
sets on the run, the terminal durable write (a failed write is reported in the run's error,
never raised), and the exception ``run()`` raises for a failed or aborted result. It must not
start work or run a tool.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import attrs

from ..content import ErrorInfo
from ..durable import Interruption
from ..errors import AgentRunError, GuardrailRunError, OutputValidationError, PrismError
from ..events import (
    AgentEvent,
    AgentFinishedEvent,
    AgentSuspendedEvent,
    ErrorEvent,
    RunLimitExceededEvent,
)
from ..limits import RunLimitBreach
from ..redaction import redact_value
from ..results import AgentRunResult
from ._budget import budget_exhausted
from ._counters import LimitBreached
from ._failures import RunFailure
from ._state import RunState

logger = logging.getLogger(__package__ or __name__)

__all__ = (
    "abort_terminal",
    "abort_terminal_now",
    "fail",
    "succeed",
    "suspended",
    "terminal_error",
    "wall_time_terminal",
)


def _base_result(run: RunState, status: Any) -> dict[str, Any]:
    message = run.last_message
    return {
        "session_id": run.session_id,
        "run_id": run.run_id,
        "status": status,
        "text": message.text if message is not None else "",
        "content": message.content if message is not None else (),
        "message": message,
        "usage": run.counters.usage if run.counters.usage_reported else None,
        "leaf_id": run.session.leaf_id,
    }


def suspended(run: RunState, interruption: Interruption) -> AgentEvent:
    """End a durable run that suspended with ``interruption`` (its checkpoint is written)."""
    assert run.durable is not None
    info = run.durable.info("suspended")
    logger.debug(
        "run %s suspended at version %d for %d decision(s)",
        run.run_id,
        info.version,
        len(interruption.pending_decisions),
    )
    run.result = AgentRunResult(
        **_base_result(run, "suspended"),
        interruption=interruption,
        run_state=info,
    )
    return run.emit(
        AgentSuspendedEvent(
            session_id=run.session_id,
            run_id=run.run_id,
            interruption=interruption,
            version=info.version,
        )
    )


#: The failure of a run that would succeed while a call a person allowed has no receipt.
RECEIPT_MISSING = "ERR_PRISM_RECEIPT_MISSING"


async def succeed(
    run: RunState, stop_reason: str | None = None, stop_detail: str | None = None
) -> list[AgentEvent]:
    """End the run as succeeded (a durable run with a record writes its terminal state).

    A durable run that still owes a receipt for a call a decision allowed (see
    ``durable/_receipts``) fails instead (``ERR_PRISM_RECEIPT_MISSING``): it never ends
    ``succeeded`` without saying what became of every allowed call.

    A run that ended on its own has no stop reason: ``agent_finished.finish_reason`` is
    ``None`` (the provider's own finish reason stays on ``message_finished``). A run stopped on
    purpose (``"host_policy"``, ``"turn_limit"``, ``"hook_limit"``) carries the stop as
    ``finish_reason`` on ``agent_finished`` and as ``stop_reason``/``stop_detail`` on the
    result and the terminal checkpoint.
    """
    owed = run.durable.receipts.owed() if run.durable is not None else ()
    if owed:
        message = f"allowed tool calls have no receipt: {', '.join(owed)}"
        return await fail(run, RunFailure(ErrorInfo(message, code=RECEIPT_MISSING)))
    run_state = None
    if run.durable is not None:
        await run.durable.finish("succeeded", stop_reason=stop_reason, stop_detail=stop_detail)
        run_state = run.durable.info("succeeded") if run.durable.has_record else None
    run.result = AgentRunResult(
        **_base_result(run, "succeeded"),
        stop_reason=stop_reason,
        stop_detail=stop_detail,
        run_state=run_state,
        output=run.output,
    )
    logger.debug("run %s succeeded after %d turn(s)", run.run_id, run.counters.turns)
    return [
        run.emit(
            AgentFinishedEvent(
                session_id=run.session_id,
                run_id=run.run_id,
                text=run.result.text,
                usage=run.result.usage,
                leaf_id=run.result.leaf_id,
                finish_reason=stop_reason,
                stop_reason=stop_reason,
                stop_detail=stop_detail,
            )
        )
    ]


async def _save_terminal(run: RunState, status: Any, error: ErrorInfo | None) -> ErrorInfo | None:
    """Write the terminal state of a durable run; a failed write is added to ``error``."""
    if run.durable is None:
        return error
    try:
        await run.durable.finish(status, error)
    except Exception as exc:
        note = f"the terminal checkpoint could not be written: {exc}"
        if error is None:
            return ErrorInfo(note, code=getattr(exc, "code", None))
        return attrs.evolve(error, message=f"{error.message} ({note})")
    return error


async def fail(run: RunState, failure: RunFailure) -> list[AgentEvent]:
    """End the run as failed with ``failure`` (a failure has no stop reason: ``error`` and
    ``limit`` say what happened)."""
    failure.error = await _save_terminal(run, "failed", failure.error) or failure.error
    events: list[AgentEvent] = []
    if failure.limit is not None:
        events.append(
            run.emit(
                RunLimitExceededEvent(
                    session_id=run.session_id, run_id=run.run_id, limit=failure.limit
                )
            )
        )
        # Why the run died, before the terminal ``error``: a subscriber that stops at the
        # first terminal event still sees it.
        events.append(run.emit(budget_exhausted(run, failure.limit)))
    error = redact_value(failure.error, run.plan.redactor)
    events.append(run.emit(ErrorEvent(session_id=run.session_id, run_id=run.run_id, error=error)))
    run.failure_cause = failure.cause
    run.failure_record = failure.record
    # The code only: a failure's message may quote what the run was given.
    logger.warning("run %s (session %s) failed: %s", run.run_id, run.session_id, error.code)
    run.result = AgentRunResult(
        **_base_result(run, "failed"),
        error=error,
        limit=failure.limit,
    )
    return events


async def abort_terminal(run: RunState, reason: Any) -> list[AgentEvent]:
    """Terminal events for an aborted run (the generator is already finished); a durable
    run with a checkpoint records ``aborted``, unless a side-effecting call was under way:
    then its ``dispatched`` mark stays the run's last checkpoint, so the call is in doubt
    (settled by its tool or an operator on ``continue``), never an ``aborted`` run with an
    effect nobody recorded."""
    run.signal.abort(reason)
    error = ErrorInfo(f"Run aborted: {run.signal.reason}", code="ERR_PRISM_ABORTED")
    under_way = run.durable.dispatched_calls() if run.durable is not None else ()
    if under_way:
        assert run.durable is not None
        run.durable.release_held()
        calls = ", ".join(under_way)
        logger.warning(
            "run %s aborted while tool call(s) %s ran: left in doubt for a continue",
            run.run_id,
            calls,
        )
        error = attrs.evolve(
            error,
            message=f"{error.message} (tool call {calls} was under way: the run stays "
            "running with the call in doubt, for a continue to settle)",
        )
        return _aborted(run, error)
    error = await _save_terminal(run, "aborted", error) or error
    return _aborted(run, error)


def abort_terminal_now(run: RunState, reason: Any) -> list[AgentEvent]:
    """Terminal events for an aborted run when nothing may be awaited (the consumer is
    gone): the checkpoint stays at its last state, as after a crash, and the session at what
    its store holds."""
    if run.durable is not None:
        run.durable.release_held()
    run.signal.abort(reason)
    error = ErrorInfo(f"Run aborted: {run.signal.reason}", code="ERR_PRISM_ABORTED")
    return _aborted(run, error)


def _aborted(run: RunState, error: ErrorInfo) -> list[AgentEvent]:
    event = run.emit(
        ErrorEvent(session_id=run.session_id, run_id=run.run_id, error=error, status="aborted")
    )
    run.result = AgentRunResult(
        **_base_result(run, "aborted"),
        error=redact_value(error, run.plan.redactor),
        abort_reason=run.signal.reason,
    )
    return [event]


async def wall_time_terminal(run: RunState) -> list[AgentEvent]:
    """Terminal events when the wall-time deadline cancelled the step in flight."""
    assert run.plan.limits.max_wall_time_ms is not None
    elapsed = run.plan.limits.max_wall_time_ms
    if run.deadline is not None:
        elapsed += max(0.0, (anyio.current_time() - run.deadline) * 1000)
    breach = RunLimitBreach("max_wall_time_ms", run.plan.limits.max_wall_time_ms, elapsed)
    failure = RunFailure(
        ErrorInfo(str(LimitBreached(breach)), code="ERR_PRISM_RUN_LIMIT"), limit=breach
    )
    return await fail(run, failure)


def terminal_error(run: RunState) -> PrismError | None:
    """The exception ``run()`` raises for this run's result, or ``None`` on success."""
    result = run.result
    if result is None or result.status not in ("failed", "aborted"):
        return None
    assert result.error is not None
    code = result.error.code
    if (
        run.failure_record is not None
        and code is not None
        and code.startswith("ERR_PRISM_GUARDRAIL")
    ):
        error: PrismError = GuardrailRunError(
            result.error.message, result=result, record=run.failure_record, code=code
        )
    elif code == OutputValidationError.code:
        error = OutputValidationError(
            result.error.message, result=result, problems=run.output_problems
        )
    else:
        error = AgentRunError(result.error.message, result=result, code=code)
    if run.failure_cause is not None:
        error.__cause__ = run.failure_cause
    return error
