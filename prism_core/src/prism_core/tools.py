"""Host-owned tools: definitions, the registry and fail-closed dispatch."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Literal, TypeAlias

import attrs

from .codec import dumps
from .content import ErrorInfo, ToolCallContent, ToolResult
from .errors import PrismError
from .schema import validate_json_schema
from .signals import AbortSignal

__all__ = (
    "DispatchOutcome",
    "ToolDefinition",
    "ToolExecutionContext",
    "ToolPolicy",
    "ToolRegistry",
    "ToolResult",
    "ToolValidator",
    "check_tool_call",
    "create_tool_registry",
    "dispatch_tool_call",
    "execute_tool",
    "run_tool_call",
)

ToolExecute: TypeAlias = Callable[[dict[str, Any], "ToolExecutionContext"], Any]
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


def _check_execute(_: Any, __: Any, value: Any) -> None:
    if not callable(value):
        raise TypeError("a tool's execute must be callable")


def _check_schema(_: Any, attribute: Any, value: Any) -> None:
    if value is not None and not isinstance(value, Mapping):
        raise TypeError(f"a tool's {attribute.name} must be a JSON-schema mapping")


@attrs.frozen
class ToolDefinition:
    """A host tool. ``execute(args, context)`` may be sync or async and returns a
    :class:`ToolResult` or a JSON value (wrapped as ``ToolResult.value``).

    ``parameters`` is a JSON schema checked before the side effect; ``effect`` names the
    kind of side effect (``"read"``, ``"write"`` …) for approval scopes; ``elicitation`` is
    the JSON schema of the answer a human may give instead of running the tool.
    ``idempotent`` declares that calling it again with the same arguments has no further
    effect; crash recovery may re-dispatch an in-doubt call of such a tool.
    """

    name: str = attrs.field(validator=_check_name)
    execute: ToolExecute = attrs.field(eq=False, repr=False, validator=_check_execute)
    description: str | None = attrs.field(default=None, kw_only=True)
    parameters: Mapping[str, Any] | None = attrs.field(
        default=None, kw_only=True, validator=_check_schema
    )
    exclusive: bool = attrs.field(default=False, kw_only=True)
    effect: str | None = attrs.field(default=None, kw_only=True)
    elicitation: Mapping[str, Any] | None = attrs.field(
        default=None, kw_only=True, validator=_check_schema
    )
    idempotent: bool = attrs.field(default=False, kw_only=True)


@attrs.define(kw_only=True)
class ToolExecutionContext:
    """What a tool sees while it runs. ``report_progress(value)`` emits a progress event;
    ``skills`` lets the ``load_skill`` tool load one of the run's active skills."""

    session_id: str
    run_id: str
    tool_call_id: str
    tool_name: str
    signal: AbortSignal = attrs.field(factory=AbortSignal)
    metadata: Mapping[str, Any] = attrs.field(factory=dict)
    on_progress: Callable[[Any], None] | None = attrs.field(default=None, repr=False)
    skills: Any = attrs.field(default=None, repr=False)

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


def _blocked(call: ToolCallContent, reason: str, message: str) -> DispatchOutcome:
    result = ToolResult(call.id, call.name, error=ErrorInfo(message, code=reason))
    return DispatchOutcome(result, "blocked", blocked_reason=reason)


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
) -> ToolDefinition | DispatchOutcome:
    """Every check before a side effect, in order: lookup, per-run allow-list, ``trust``,
    ``permission``, argument JSON, parameter schema, host ``validate``. Returns the tool to
    run, or a blocked outcome."""
    tool = registry.get(call.name)
    if tool is None:
        return _blocked(call, "unknown_tool", f"Unknown tool: {call.name}")
    if tool_names is not None and call.name not in tool_names:
        return _blocked(call, "tool_not_allowed", f"Tool {call.name} is not allowed in this run")
    for policy, reason in ((trust, "tool_untrusted"), (permission, "permission_denied")):
        if policy is None:
            continue
        verdict = policy(call, tool, context)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict is not None:
            message = verdict.message if isinstance(verdict, ErrorInfo) else str(verdict)
            return _blocked(call, reason, message)
    if invalid_arguments:
        return _blocked(
            call, "invalid_json_arguments", f"Tool {call.name} arguments were not a JSON object"
        )
    problem = validate_json_schema(tool.parameters, call.arguments)
    if problem is not None:
        return _blocked(call, "invalid_arguments", f"Invalid arguments for {call.name}: {problem}")
    if validate is not None:
        verdict = validate(call, tool, context)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict is not None:
            message = verdict.message if isinstance(verdict, ErrorInfo) else str(verdict)
            return _blocked(call, "validation_failed", message)
    return tool


async def execute_tool(
    tool: ToolDefinition, call: ToolCallContent, context: ToolExecutionContext
) -> DispatchOutcome:
    """Run ``tool`` for ``call``. An exception becomes an error result (``status="failed"``);
    cancellation is never swallowed; a result that is not JSON is refused."""
    try:
        value = tool.execute(dict(call.arguments), context)
        if inspect.isawaitable(value):
            value = await value
    except Exception as exc:
        error = ErrorInfo(str(exc) or type(exc).__name__, code="tool_execution_error")
        return DispatchOutcome(ToolResult(call.id, call.name, error=error), "failed", exception=exc)
    result = value if isinstance(value, ToolResult) else ToolResult(call.id, call.name, value)
    if result.tool_call_id != call.id or result.name != call.name:
        result = attrs.evolve(result, tool_call_id=call.id, name=call.name)
    try:
        dumps(result.value)
    except (TypeError, ValueError) as exc:
        error = ErrorInfo(
            f"Tool {call.name} returned a value that is not JSON: {exc}",
            code="tool_result_not_json",
        )
        return DispatchOutcome(ToolResult(call.id, call.name, error=error), "failed", exception=exc)
    return DispatchOutcome(result, "executed")


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
    )
    if isinstance(checked, DispatchOutcome):
        return checked
    return await execute_tool(checked, call, context)


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
) -> ToolResult:
    """Dispatch one complete call and return its :class:`ToolResult` (errors included)."""
    outcome = await run_tool_call(
        call,
        registry=registry,
        context=context,
        tool_names=tool_names,
        validate=validate,
        invalid_arguments=invalid_arguments,
        trust=trust,
        permission=permission,
    )
    return outcome.result
