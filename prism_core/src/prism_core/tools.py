"""Host-owned tools: definitions, the registry and fail-closed dispatch."""

from __future__ import annotations

import hashlib
import inspect
import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Literal, TypeAlias

import anyio
import anyio.from_thread
import attrs

from ._approval_gate import (
    NeedsApproval,
    check_approval_timeout,
    check_approvers,
    check_needs_approval,
)
from ._decision_record import DecisionRecord
from ._threads import call_host, call_sync, runs_inline
from .codec import dumps
from .content import ErrorInfo, ToolCallContent, ToolResult
from .errors import PrismError, ToolDefinitionError
from .redaction import Redactor
from .schema import CompiledSchema, ValidationTimeoutError, compile_json_schema
from .signals import AbortSignal

__all__ = (
    "MAX_TOOL_ERROR_CHARS",
    "RECONCILE_NOT_STARTED",
    "DispatchOutcome",
    "ToolDefinition",
    "ToolExecutionContext",
    "ToolPolicy",
    "ToolRegistry",
    "ToolResult",
    "ToolValidator",
    "check_tool_call",
    "describe_tool_exception",
    "create_tool_registry",
    "dispatch_tool_call",
    "execute_tool",
    "idempotency_key",
    "run_tool_call",
)

logger = logging.getLogger(__name__)

#: Longest message of a tool's own exception that reaches the model.
MAX_TOOL_ERROR_CHARS = 500

ToolExecute: TypeAlias = Callable[[dict[str, Any], "ToolExecutionContext"], Any]
#: ``reconcile(call, context)`` (sync or async): for a call in doubt after a crash, a
#: ``ToolResult`` or JSON value (the effect happened), ``RECONCILE_NOT_STARTED`` or ``None``.
ToolReconcile: TypeAlias = Callable[[ToolCallContent, "ToolExecutionContext"], Any]


class _NotStarted:
    """The type of :data:`RECONCILE_NOT_STARTED`."""

    _instance: _NotStarted | None = None

    def __new__(cls) -> _NotStarted:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "RECONCILE_NOT_STARTED"

    def __reduce__(self) -> str:
        return "RECONCILE_NOT_STARTED"


#: What ``reconcile`` returns when the call's side effect certainly never started: the call
#: is dispatched again.
RECONCILE_NOT_STARTED: Any = _NotStarted()


def idempotency_key(run_id: str, tool_call_id: str) -> str:
    """The key of one call of one run: equal across every attempt of that call, different
    between runs even when providers repeat tool call ids."""
    digest = hashlib.sha256(f"{run_id}\x00{tool_call_id}".encode()).hexdigest()
    return f"idem_{digest[:40]}"


#: ``policy(call, tool, context) -> None | str | ErrorInfo`` (trust, permission); non-``None``
#: blocks dispatch with that reason.
ToolPolicy: TypeAlias = Callable[[ToolCallContent, "ToolDefinition", "ToolExecutionContext"], Any]
#: ``validate(call, tool, context) -> None | str | ErrorInfo``; non-``None`` blocks dispatch.
ToolValidator: TypeAlias = Callable[
    [ToolCallContent, "ToolDefinition", "ToolExecutionContext"], Any
]


def _check_name(_: Any, __: Any, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError("a tool needs a non-empty string name")


def _check_execute(instance: Any, __: Any, value: Any) -> None:
    if not callable(value):
        raise TypeError("a tool's execute must be callable")
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):
        # Some builtins and extension callables expose no signature; they are called as is.
        return
    try:
        signature.bind(None, None)
    except TypeError:
        raise ToolDefinitionError(
            f"tool {instance.name!r}: execute must accept (args, context) positionally, "
            f"its signature is {_short_signature(signature)}"
        ) from None


def _short_signature(signature: inspect.Signature) -> str:
    text = str(signature)
    return text if len(text) <= 120 else text[:119] + "…"


def _check_reconcile(_: Any, __: Any, value: Any) -> None:
    if value is not None and not callable(value):
        raise TypeError("a tool's reconcile must be callable (call, context) or None")


def _check_schema(_: Any, attribute: Any, value: Any) -> None:
    if value is not None and not isinstance(value, Mapping):
        raise TypeError(f"a tool's {attribute.name} must be a JSON-schema mapping")


def _check_elicitation(_: Any, __: Any, value: Any) -> None:
    if value is not None and not isinstance(value, Mapping) and not callable(value):
        raise TypeError(
            "a tool's elicitation must be a JSON-schema mapping or a function of the call's "
            "arguments returning {'schema', 'reason'?, 'validate'?}"
        )


@attrs.frozen
class ToolDefinition:
    """A host tool. ``execute(args, context)`` may be sync or async and returns a
    :class:`ToolResult` or a JSON value (wrapped as ``ToolResult.value``).

    ``parameters`` is a JSON schema checked before the side effect; ``effect`` names the
    kind of side effect (``"read"``, ``"write"`` …) for approval scopes; ``elicitation`` is
    the JSON schema of the answer a human may give instead of running the tool, or a function
    of the call's arguments returning ``{"schema", "reason"?, "validate"?}`` (``None`` or a
    raise: the call is approved like any tool instead).
    ``idempotent`` declares that calling it again with the same arguments (and the same
    ``context.idempotency_key``) has no further effect: a durable run writes no dispatched
    mark for it, and a ``continue`` after a crash simply runs it again. ``reconcile(call,
    context)`` answers, for a call left in doubt by a crash, whether its effect happened
    (see ``docs/durable-runs.md``). ``needs_approval`` gates calls of the tool: ``True``
    every call, or a check ``(args, context) -> bool`` (sync or async; ``context`` is the
    call's :class:`ToolExecutionContext`) asked before each call is dispatched; a check that
    raises holds the call (fail closed). A durable run suspends before a gated call for a
    person's decision (kind ``tool_approval``), as ``interrupt_before_tool`` does for every
    tool, and a run that cannot suspend (no ``run_state``) fails closed at the call with
    ``ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE``. ``approvers`` is how many distinct actors
    must allow a held call before it runs (each allow is audited; one reject ends it);
    ``approval_timeout_ms`` how long a decision about a call of this tool may wait before
    :func:`~prism_core.expire_agent_runs` expires it (it wins over the run's own).
    """

    name: str = attrs.field(validator=_check_name)
    execute: ToolExecute = attrs.field(eq=False, repr=False, validator=_check_execute)
    description: str | None = attrs.field(default=None, kw_only=True)
    parameters: Mapping[str, Any] | None = attrs.field(
        default=None, kw_only=True, validator=_check_schema
    )
    exclusive: bool = attrs.field(default=False, kw_only=True)
    effect: str | None = attrs.field(default=None, kw_only=True)
    elicitation: Mapping[str, Any] | Callable[[dict[str, Any]], Any] | None = attrs.field(
        default=None, kw_only=True, validator=_check_elicitation
    )
    idempotent: bool = attrs.field(default=False, kw_only=True)
    reconcile: ToolReconcile | None = attrs.field(
        default=None, kw_only=True, eq=False, repr=False, validator=_check_reconcile
    )
    needs_approval: NeedsApproval = attrs.field(
        default=False, kw_only=True, validator=check_needs_approval
    )
    approvers: int = attrs.field(default=1, kw_only=True, validator=check_approvers)
    approval_timeout_ms: int | None = attrs.field(
        default=None, kw_only=True, validator=check_approval_timeout
    )
    _parameters_schema: CompiledSchema | None = attrs.field(
        init=False, default=None, eq=False, repr=False
    )
    _elicitation_schema: CompiledSchema | None = attrs.field(
        init=False, default=None, eq=False, repr=False
    )

    def __attrs_post_init__(self) -> None:
        # Compiled once, here: an invalid schema is refused when the tool is defined
        # (JsonSchemaError), and every call reuses the validator.
        for field, label, value in (
            ("_parameters_schema", "parameters", self.parameters),
            ("_elicitation_schema", "elicitation", self.elicitation),
        ):
            if isinstance(value, Mapping):
                compiled = compile_json_schema(value, where=f"tool {self.name!r} {label}")
                object.__setattr__(self, field, compiled)

    @property
    def needs_dispatch_mark(self) -> bool:
        """Whether a durable run records this tool's calls as ``dispatched`` before they
        start: every tool but read-only (``effect == "read"``) and idempotent ones."""
        return not (self.idempotent or self.effect == "read")

    def check_arguments(self, arguments: Any) -> str | None:
        """``None`` when ``arguments`` satisfy ``parameters`` (or there is no schema), else
        what failed: the JSON path and the keyword, never the value."""
        if self._parameters_schema is None:
            return None
        return self._parameters_schema.problem(arguments)

    def check_elicitation(self, answer: Any) -> str | None:
        """``None`` when ``answer`` satisfies a schema ``elicitation`` (or there is none: a
        function's schema is checked where it was recorded), else what failed: the JSON path
        and the keyword, never the value."""
        if self._elicitation_schema is None:
            return None
        return self._elicitation_schema.problem(answer)


@attrs.define(kw_only=True)
class ToolExecutionContext:
    """What a tool sees while it runs. ``report_progress(value)`` emits a progress event;
    ``skills`` lets the ``load_skill`` tool load one of the run's active skills;
    ``idempotency_key`` is equal across every attempt of this call of this run (key host-side
    effects on it: payments, tickets, emails); ``fencing_token`` is the run's current fencing
    token (``0`` until a claim sets one; every claim raises it), so an effect system can refuse
    a write that carries a lower token than it has seen for the run: the late effect of a
    worker that was superseded while it ran. ``started_by`` names who started the run (the
    ``actor`` run option, a face's caller; ``None`` when nobody was named); ``approvals`` are
    the :class:`~prism_core.DecisionRecord` entries that allowed this call (every approver's,
    or the sticky ``allow_for_run`` that let it through; empty when none was needed), so a
    tool can refuse to move money that the wrong person approved."""

    session_id: str
    run_id: str
    tool_call_id: str
    tool_name: str
    idempotency_key: str = attrs.field(
        default=attrs.Factory(
            lambda self: idempotency_key(self.run_id, self.tool_call_id), takes_self=True
        )
    )
    signal: AbortSignal = attrs.field(factory=AbortSignal)
    metadata: Mapping[str, Any] = attrs.field(factory=dict)
    fencing_token: int = 0
    on_progress: Callable[[Any], None] | None = attrs.field(default=None, repr=False)
    skills: Any = attrs.field(default=None, repr=False)
    started_by: str | None = None
    approvals: tuple[DecisionRecord, ...] = ()

    def report_progress(self, progress: Any) -> None:
        """Report progress (any JSON value) to the run's event stream."""
        if self.on_progress is not None:
            self.on_progress(progress)


class ToolRegistry:
    """Tools by name. ``duplicate`` decides what a second tool with the same name does:
    ``"replace"`` (default), ``"error"`` or ``"ignore"``."""

    def __init__(self, duplicate: Literal["replace", "error", "ignore"] = "replace") -> None:
        if duplicate not in ("replace", "error", "ignore"):
            raise ValueError(f"duplicate must be 'replace', 'error' or 'ignore', got {duplicate!r}")
        self._duplicate = duplicate
        self._tools: dict[str, ToolDefinition] = {}

    def register(self, tool: ToolDefinition) -> None:
        """Add ``tool`` following the duplicate policy."""
        if not isinstance(tool, ToolDefinition):
            raise TypeError(f"expected a ToolDefinition, got {type(tool).__name__}")
        if tool.name in self._tools:
            if self._duplicate == "error":
                raise PrismError(
                    f"tool {tool.name!r} is already registered", code="ERR_PRISM_TOOL_DUPLICATE"
                )
            if self._duplicate == "ignore":
                return
        self._tools[tool.name] = tool

    def get(self, name: str) -> ToolDefinition | None:
        """The tool called ``name``, or ``None``."""
        return self._tools.get(name)

    def names(self) -> tuple[str, ...]:
        """Registered names, in registration order."""
        return tuple(self._tools)

    def definitions(self) -> tuple[ToolDefinition, ...]:
        """Registered tools, in registration order."""
        return tuple(self._tools.values())

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)


def create_tool_registry(
    tools: Iterable[ToolDefinition] = (),
    *,
    duplicate: Literal["replace", "error", "ignore"] = "replace",
) -> ToolRegistry:
    """A registry holding ``tools``."""
    registry = ToolRegistry(duplicate)
    for tool in tools:
        registry.register(tool)
    return registry


@attrs.frozen
class DispatchOutcome:
    """How a dispatch ended: ``status`` is ``"executed"``, ``"blocked"`` or ``"failed"``.

    ``blocked_reason`` names why a call never ran (``unknown_tool``, ``tool_not_allowed``,
    ``invalid_json_arguments``, ``invalid_arguments``, ``validation_failed``);
    ``exception`` is what the tool raised when it failed.
    """

    result: ToolResult
    status: Literal["executed", "blocked", "failed"]
    blocked_reason: str | None = None
    exception: BaseException | None = None


def _blocked(
    call: ToolCallContent, reason: str, message: str, code: str | None = None
) -> DispatchOutcome:
    logger.warning("tool call %s (%s) blocked: %s", call.id, call.name, reason)
    result = ToolResult(call.id, call.name, error=ErrorInfo(message, code=code or reason))
    return DispatchOutcome(result, "blocked", blocked_reason=reason)


def _verdict_message(verdict: Any) -> str:
    return verdict.message if isinstance(verdict, ErrorInfo) else str(verdict)


async def check_tool_call(
    call: ToolCallContent,
    *,
    registry: ToolRegistry,
    context: ToolExecutionContext,
    tool_names: Collection[str] | None = None,
    validate: ToolValidator | None = None,
    invalid_arguments: bool = False,
    trust: ToolPolicy | None = None,
    permission: ToolPolicy | None = None,
    limiter: anyio.CapacityLimiter | None = None,
) -> ToolDefinition | DispatchOutcome:
    """Every check before a side effect, in order: lookup, per-run allow-list, ``trust``,
    ``permission``, argument JSON, parameter schema, host ``validate``. Returns the tool to
    run, or a blocked outcome. Sync policies and validators run in a worker thread under
    ``limiter`` (``None``: anyio's default limiter)."""
    tool = registry.get(call.name)
    if tool is None:
        return _blocked(call, "unknown_tool", f"Unknown tool: {call.name}")
    if tool_names is not None and call.name not in tool_names:
        return _blocked(call, "tool_not_allowed", f"Tool {call.name} is not allowed in this run")
    for policy, reason in ((trust, "tool_untrusted"), (permission, "permission_denied")):
        if policy is None:
            continue
        verdict = await call_host(policy, call, tool, context, limiter=limiter)
        if verdict is not None:
            return _blocked(call, reason, _verdict_message(verdict))
    if invalid_arguments:
        return _blocked(
            call, "invalid_json_arguments", f"Tool {call.name} arguments were not a JSON object"
        )
    try:
        problem = tool.check_arguments(call.arguments)
    except ValidationTimeoutError as exc:
        message = f"Invalid arguments for {call.name}: {exc.message}"
        return _blocked(call, "invalid_arguments", message, code=exc.code)
    if problem is not None:
        return _blocked(call, "invalid_arguments", f"Invalid arguments for {call.name}: {problem}")
    if validate is not None:
        verdict = await call_host(validate, call, tool, context, limiter=limiter)
        if verdict is not None:
            return _blocked(call, "validation_failed", _verdict_message(verdict))
    return tool


def describe_tool_exception(exc: BaseException, redactor: Redactor | None = None) -> str:
    """What the model learns about a tool's own exception: its message (its type name when
    the message is empty), redacted and bounded to :data:`MAX_TOOL_ERROR_CHARS`; never a
    traceback."""
    text = str(exc) or type(exc).__name__
    if redactor is not None:
        text = redactor.redact_text(text)
    if len(text) > MAX_TOOL_ERROR_CHARS:
        text = text[: MAX_TOOL_ERROR_CHARS - 1] + "…"
    return text


async def execute_tool(
    tool: ToolDefinition,
    call: ToolCallContent,
    context: ToolExecutionContext,
    *,
    limiter: anyio.CapacityLimiter | None = None,
    redactor: Redactor | None = None,
) -> DispatchOutcome:
    """Run ``tool`` for ``call``. An exception becomes an error result (``status="failed"``)
    whose message is :func:`describe_tool_exception`; cancellation is never swallowed; a
    result that is not JSON is refused.

    A sync ``execute`` runs in a worker thread under ``limiter`` (``None``: anyio's default
    limiter) so the event loop and other sessions keep running. A thread cannot be
    interrupted: on an abort the wait ends at once and the thread's eventual result is
    discarded; ``context.signal`` tells a cooperative tool to stop early.
    """
    try:
        if runs_inline(tool.execute):
            value = tool.execute(dict(call.arguments), context)
        else:
            value = await call_sync(
                tool.execute, dict(call.arguments), _threaded_context(context), limiter=limiter
            )
        if inspect.isawaitable(value):
            value = await value
    except Exception as exc:
        message = describe_tool_exception(exc, redactor)
        logger.warning("tool %s (call %s) raised %s", call.name, call.id, type(exc).__name__)
        error = ErrorInfo(message, code="tool_execution_error")
        return DispatchOutcome(ToolResult(call.id, call.name, error=error), "failed", exception=exc)
    result = value if isinstance(value, ToolResult) else ToolResult(call.id, call.name, value)
    if result.tool_call_id != call.id or result.name != call.name:
        result = attrs.evolve(result, tool_call_id=call.id, name=call.name)
    try:
        dumps(result.value)
    except (TypeError, ValueError) as exc:
        logger.warning("tool %s (call %s) returned a value that is not JSON", call.name, call.id)
        error = ErrorInfo(
            f"Tool {call.name} returned a value that is not JSON: {exc}",
            code="tool_result_not_json",
        )
        return DispatchOutcome(ToolResult(call.id, call.name, error=error), "failed", exception=exc)
    logger.debug("tool %s (call %s) executed", call.name, call.id)
    return DispatchOutcome(result, "executed")


def _threaded_context(context: ToolExecutionContext) -> ToolExecutionContext:
    """A copy of ``context`` whose progress reports hop back to the event loop.

    The run's progress callback publishes events, which only the event-loop thread may do.
    Progress from a thread the run has already abandoned is dropped.
    """
    report = context.on_progress
    if report is None:
        return context

    def on_progress(value: Any) -> None:
        if context.signal.aborted:
            return
        try:
            anyio.from_thread.run_sync(report, value)
        except RuntimeError:
            # The event loop is gone (the run ended while the thread still ran).
            return

    return attrs.evolve(context, on_progress=on_progress)


async def run_tool_call(
    call: ToolCallContent,
    *,
    registry: ToolRegistry,
    context: ToolExecutionContext,
    tool_names: Collection[str] | None = None,
    validate: ToolValidator | None = None,
    invalid_arguments: bool = False,
    trust: ToolPolicy | None = None,
    permission: ToolPolicy | None = None,
    limiter: anyio.CapacityLimiter | None = None,
    redactor: Redactor | None = None,
) -> DispatchOutcome:
    """:func:`check_tool_call` then :func:`execute_tool`, returning the full outcome."""
    checked = await check_tool_call(
        call,
        registry=registry,
        context=context,
        tool_names=tool_names,
        validate=validate,
        invalid_arguments=invalid_arguments,
        trust=trust,
        permission=permission,
        limiter=limiter,
    )
    if isinstance(checked, DispatchOutcome):
        return checked
    return await execute_tool(checked, call, context, limiter=limiter, redactor=redactor)


async def dispatch_tool_call(
    call: ToolCallContent,
    *,
    registry: ToolRegistry,
    context: ToolExecutionContext,
    tool_names: Collection[str] | None = None,
    validate: ToolValidator | None = None,
    invalid_arguments: bool = False,
    trust: ToolPolicy | None = None,
    permission: ToolPolicy | None = None,
    limiter: anyio.CapacityLimiter | None = None,
    redactor: Redactor | None = None,
) -> ToolResult:
    """Dispatch one complete call and return its :class:`ToolResult` (errors included).

    ``limiter`` bounds the worker threads sync tools and validators run in (``None``:
    anyio's default limiter); ``redactor`` redacts a tool's exception message."""
    outcome = await run_tool_call(
        call,
        registry=registry,
        context=context,
        tool_names=tool_names,
        validate=validate,
        invalid_arguments=invalid_arguments,
        trust=trust,
        permission=permission,
        limiter=limiter,
        redactor=redactor,
    )
    return outcome.result
