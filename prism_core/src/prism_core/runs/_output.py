"""Typed output: the finishing run's answer checked against its ``output_type``.

When a run with an output type would finish (no tool calls, no steered message, no stop hook
continuing it), its last answer is read as JSON and validated. A valid answer becomes
``run.output``; an invalid one goes back to the model as a user message naming what failed,
at most ``limits.max_output_retries`` times (counted in ``counters.output_retries``, which
rides the checkpoint), after which the run fails with ``ERR_PRISM_OUTPUT_INVALID``.

It must not decide when a run would finish (``_execution`` does) or end the run itself: it
raises :class:`~._failures.RunFailure` and the run generator ends it.
"""

from __future__ import annotations

import logging

from ..codec import dumps
from ..content import ErrorInfo, Message
from ..redaction import redact_value
from ._failures import RunFailure
from ._state import RunState

__all__ = ("OUTPUT_INVALID", "check_output", "retry_message")

logger = logging.getLogger(__package__ or __name__)

OUTPUT_INVALID = "ERR_PRISM_OUTPUT_INVALID"


def retry_message(problems: list[str], schema: object) -> str:
    """What the model is told after an invalid answer: the problems, then the schema."""
    listed = "\n".join(f"- {problem}" for problem in problems)
    return (
        "Your answer does not match the required output:\n"
        f"{listed}\n"
        "Answer again with only a JSON value matching this JSON Schema:\n"
        f"{dumps(schema).decode('utf-8')}"
    )


async def check_output(run: RunState) -> bool:
    """Whether the run must take another turn for its output.

    ``False`` when the run has no output type or its answer is valid (``run.output`` is then
    set); ``True`` after appending a retry message. Raises :class:`RunFailure` with
    ``ERR_PRISM_OUTPUT_INVALID`` once the retries are spent.
    """
    output_type = run.plan.output_type
    if output_type is None:
        return False
    text = run.last_message.text if run.last_message is not None else ""
    value, problems = output_type.parse(text)
    if not problems:
        run.output = value
        return False
    run.output_problems = tuple(problems)
    counters = run.counters
    if counters.output_retries >= run.plan.limits.max_output_retries:
        message = (
            f"The final answer does not match the output type {output_type.name!r} after "
            f"{counters.output_retries} retries: {'; '.join(problems)}"
        )
        logger.warning(
            "run %s: output invalid after %d retries", run.run_id, counters.output_retries
        )
        raise RunFailure(ErrorInfo(message, code=OUTPUT_INVALID))
    counters.output_retries += 1
    reply = Message.user(retry_message(problems, output_type.schema))
    await run.session.transcript.append_message(redact_value(reply, run.plan.redactor), run.run_id)
    return True
