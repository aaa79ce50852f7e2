"""Typed errors. Every refusal Prism makes is a :class:`PrismError` with a stable ``code``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._error_base import CanonicalJsonError, PrismError

if TYPE_CHECKING:
    from .results import AgentRunResult

__all__ = (
    "AgentConfigError",
    "AgentDecisionError",
    "AgentLoopStateError",
    "AgentRunError",
    "AgentRunNotFoundError",
    "AgentRunStateError",
    "CanonicalJsonError",
    "CheckpointConflictError",
    "CheckpointRestoreError",
    "GuardrailError",
    "GuardrailPackError",
    "GuardrailRunError",
    "JsonSchemaError",
    "OutputValidationError",
    "PrismError",
    "ToolDefinitionError",
)


class AgentRunError(PrismError):
    """A run ended ``failed`` or ``aborted``; ``result`` is the shape ``run()`` returns."""

    code = "ERR_PRISM_AGENT_RUN"

    def __init__(self, message: str, *, result: AgentRunResult, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.result = result


class AgentRunStateError(PrismError):
    """A durable run state is malformed, oversized, stale or cannot be resumed.

    ``in_doubt`` names the tool calls a refusal with code ``ERR_PRISM_TOOL_IN_DOUBT`` is about:
    calls whose dispatched mark is stored and whose result is not.
    """

    code = "ERR_PRISM_AGENT_RUN_STATE"

    def __init__(
        self, message: str, *, code: str | None = None, in_doubt: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message, code=code)
        self.in_doubt = tuple(in_doubt)


class AgentRunNotFoundError(AgentRunStateError):
    """No durable run by that reference exists in the caller's ownership scope.

    An absent run, another tenant's run and a run of another session or agent are refused
    alike, so a caller cannot tell them apart. The ``code`` stays the state error's
    (``ERR_PRISM_AGENT_RUN_STATE``); transports that answer "not found" (HTTP 404) tell it
    apart by its class.
    """


class AgentDecisionError(PrismError):
    """A resume decision is malformed, over a limit, duplicated, unknown or out of scope."""

    code = "ERR_PRISM_DECISION_INVALID"


class CheckpointConflictError(PrismError):
    """A checkpoint save lost a compare-and-swap, fencing or ownership check.

    The message is deliberately generic: a foreign owner's record looks like any conflict.
    """

    code = "ERR_PRISM_CHECKPOINT_CONFLICT"


class CheckpointRestoreError(PrismError):
    """A restore hook failed or timed out; nothing was claimed.

    ``compensation`` is ``{"ran": [...], "failed"?: {"hook", "reason"}}`` when compensation
    ran (hooks most recent first; it stops at the first compensation that raises), else
    ``None``.
    """

    code = "ERR_PRISM_CHECKPOINT_RESTORE"

    def __init__(
        self,
        message: str,
        *,
        hook: str,
        compensation_errors: tuple[tuple[str, BaseException], ...] = (),
        code: str | None = None,
    ) -> None:
        super().__init__(message, code=code)
        self.hook = hook
        self.compensation_errors = compensation_errors
        self.compensation: dict[str, Any] | None = None


class AgentLoopStateError(PrismError):
    """A loop strategy cannot take part in a durable run (not durable, bad snapshot, revision)."""

    code = "ERR_PRISM_LOOP_NOT_DURABLE"


class GuardrailError(PrismError):
    """A guardrail blocked or tripped a run, or asked to interrupt where it cannot."""

    code = "ERR_PRISM_GUARDRAIL_BLOCKED"

    def __init__(self, message: str, *, record: Any = None, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.record = record
        _chain_guard_exception(self, record)


def _chain_guard_exception(error: BaseException, record: Any) -> None:
    """A guard that raised fails closed; its exception stays reachable as ``__cause__``."""
    exception = getattr(record, "exception", None)
    if isinstance(exception, BaseException) and error.__cause__ is None:
        error.__cause__ = exception
        error.__suppress_context__ = True


class GuardrailPackError(PrismError):
    """A guardrail pack definition or reference failed to compile."""

    code = "ERR_PRISM_GUARDRAIL_PACK"


class GuardrailRunError(GuardrailError, AgentRunError):
    """A run rejected by a guardrail: a :class:`GuardrailError` and an :class:`AgentRunError`."""

    def __init__(self, message: str, *, result: AgentRunResult, record: Any, code: str) -> None:
        PrismError.__init__(self, message, code=code)
        self.result = result
        self.record = record
        _chain_guard_exception(self, record)


class OutputValidationError(AgentRunError):
    """A run with an ``output_type`` ended without a valid answer: the model's last answer
    (after ``limits.max_output_retries`` retries) did not validate. ``problems`` names the
    failing JSON paths and checks (never values); ``result`` is the failed run's result."""

    code = "ERR_PRISM_OUTPUT_INVALID"

    def __init__(
        self, message: str, *, result: AgentRunResult, problems: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message, result=result, code=self.code)
        self.problems = tuple(problems)


class JsonSchemaError(PrismError):
    """A JSON schema (tool ``parameters``, ``elicitation``) is not valid draft 2020-12."""

    code = "ERR_PRISM_SCHEMA_INVALID"


class ToolDefinitionError(PrismError):
    """A tool cannot be defined: its ``execute`` does not accept ``(args, context)``."""

    code = "ERR_PRISM_TOOL_DEFINITION"


class AgentConfigError(PrismError, TypeError, ValueError):
    """An agent cannot be created: a configuration value has the wrong type or is out of range
    (``create_agent(thread_limiter=3)``, an unknown keyword, a hook that is not callable).

    It is also a ``TypeError`` and a ``ValueError``, the errors these checks raised before."""

    code = "ERR_PRISM_AGENT_CONFIG"
