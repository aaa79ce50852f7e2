"""Tools from typed functions: ``@tool`` turns a sync or async function into a
:class:`~prism_core.tools.ToolDefinition`.

The parameters' type hints become the tool's JSON Schema (draft 2020-12), the docstring
becomes its descriptions, and each call's JSON arguments are converted to the declared types
before the function runs. A parameter annotated :class:`ToolExecutionContext` receives the
run's tool context and is not part of the schema.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, overload

import attrs
import cattrs

from ._approval_gate import NeedsApproval
from ._docstrings import parse_docstring
from ._tool_schema import MISSING, FieldSpec, SchemaBuilder, is_union, strip_annotated
from ._tool_values import ArgumentValueError, create_tool_converter, structure_argument
from .content import ToolResult
from .errors import PrismError
from .tools import ToolDefinition, ToolExecutionContext

__all__ = ("ToolArgumentsError", "tool")

_POSITIONAL_ONLY = inspect.Parameter.POSITIONAL_ONLY
_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


class ToolArgumentsError(PrismError):
    """A call's arguments could not become the typed values a ``@tool`` function declares:
    a required argument is missing, an unknown one is present, or a value has the wrong
    shape. The run reports it as the call's error result, so the model can correct itself."""

    code = "ERR_PRISM_TOOL_ARGUMENTS"


@attrs.frozen
class _Parameter:
    name: str
    hint: Any
    positional_only: bool
    default: Any
    is_context: bool


@attrs.frozen
class _Binder:
    """Turns a call's JSON arguments into the function's positional and keyword arguments."""

    tool_name: str
    parameters: tuple[_Parameter, ...]
    converter: cattrs.Converter = attrs.field(eq=False)

    def bind(
        self, args: Mapping[str, Any], context: ToolExecutionContext
    ) -> tuple[list[Any], dict[str, Any]]:
        known = {p.name for p in self.parameters if not p.is_context}
        problems = [f"unexpected argument @ $.{name}" for name in sorted(set(args) - known)]
        positional: list[Any] = []
        keywords: dict[str, Any] = {}
        for parameter in self.parameters:
            if parameter.is_context:
                value: Any = context
            elif parameter.name in args:
                try:
                    value = structure_argument(
                        self.converter, args[parameter.name], parameter.hint, f"$.{parameter.name}"
                    )
                except ArgumentValueError as exc:
                    problems.append(str(exc))
                    continue
            elif parameter.default is MISSING:
                problems.append(f"missing required argument @ $.{parameter.name}")
                continue
            elif parameter.positional_only:
                value = parameter.default
            else:
                continue
            if parameter.positional_only:
                positional.append(value)
            else:
                keywords[parameter.name] = value
        if problems:
            raise ToolArgumentsError(
                f"Invalid arguments for {self.tool_name}: {'; '.join(problems)}"
            )
        return positional, keywords

    def result(self, value: Any) -> Any:
        if isinstance(value, ToolResult):
            return value
        return self.converter.unstructure(value)


@overload
def tool(fn: Callable[..., Any], /) -> ToolDefinition: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    idempotent: bool = False,
    exclusive: bool = False,
    reconcile: Callable[[Any, Any], Any] | None = None,
    needs_approval: NeedsApproval = False,
    approvers: int = 1,
    approval_timeout_ms: int | None = None,
) -> Callable[[Callable[..., Any]], ToolDefinition]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    idempotent: bool = False,
    exclusive: bool = False,
    reconcile: Callable[[Any, Any], Any] | None = None,
    needs_approval: NeedsApproval = False,
    approvers: int = 1,
    approval_timeout_ms: int | None = None,
) -> ToolDefinition | Callable[[Callable[..., Any]], ToolDefinition]:
    """Build a :class:`ToolDefinition` from a typed function, as ``@tool`` or ``@tool(...)``.

    ``name`` defaults to the function's name and ``description`` to its docstring's text
    before the first section; ``Args:``/``Parameters`` sections describe the parameters.
    ``idempotent``, ``exclusive``, ``reconcile``, ``needs_approval`` (``True`` or a check
    ``(args, context) -> bool``: a durable run suspends before a gated call for a person's
    approval), ``approvers`` and ``approval_timeout_ms`` are recorded on the definition. A
    parameter or hint that cannot be described as JSON, ``*args`` or ``**kwargs`` raise
    ``TypeError`` here, at decoration time. The original function stays reachable as
    ``definition.execute.__wrapped__``.
    """

    def decorate(function: Callable[..., Any]) -> ToolDefinition:
        return _build(
            function,
            name,
            description,
            idempotent=idempotent,
            exclusive=exclusive,
            reconcile=reconcile,
            needs_approval=needs_approval,
            approvers=approvers,
            approval_timeout_ms=approval_timeout_ms,
        )

    if fn is None:
        return decorate
    return decorate(fn)


def _build(
    fn: Callable[..., Any],
    name: str | None,
    description: str | None,
    *,
    needs_approval: NeedsApproval = False,
    approvers: int = 1,
    approval_timeout_ms: int | None = None,
    idempotent: bool,
    exclusive: bool,
    reconcile: Callable[[Any, Any], Any] | None = None,
) -> ToolDefinition:
    if not callable(fn):
        raise TypeError(f"@tool needs a function, got {type(fn).__name__}")
    label = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    tool_name = name if name is not None else getattr(fn, "__name__", None)
    if tool_name is None:
        raise TypeError(f"@tool {label}: this callable has no __name__; pass name=")
    converter = create_tool_converter()
    builder = SchemaBuilder(converter.unstructure)
    doc = inspect.getdoc(fn)
    try:
        parameters = _parameters(fn)
        fields = [
            FieldSpec(p.name, p.hint, p.default is MISSING, p.default)
            for p in parameters
            if not p.is_context
        ]
        schema = builder.object_schema(fields, doc, "parameter {}")
    except TypeError as exc:
        raise TypeError(f"@tool {label}: {exc}") from None
    schema.pop("description", None)
    if builder.defs:
        schema["$defs"] = builder.defs
    binder = _Binder(tool_name, tuple(parameters), converter)
    return ToolDefinition(
        tool_name,
        _execute(fn, binder),
        description=description if description is not None else parse_docstring(doc).description,
        parameters=schema,
        exclusive=exclusive,
        idempotent=idempotent,
        reconcile=reconcile,
        needs_approval=needs_approval,
        approvers=approvers,
        approval_timeout_ms=approval_timeout_ms,
    )


def _parameters(fn: Callable[..., Any]) -> list[_Parameter]:
    signature = inspect.signature(fn)
    if isinstance(fn, functools.partial):
        target: Any = fn.func
    elif inspect.isfunction(fn) or inspect.ismethod(fn):
        target = fn
    else:
        target = type(fn).__call__
    try:
        hints = typing.get_type_hints(target, include_extras=True)
    except Exception as exc:
        raise TypeError(f"cannot resolve the type hints: {exc}") from exc
    parameters = []
    for parameter in signature.parameters.values():
        if parameter.kind in _VARIADIC:
            raise TypeError(
                f"parameter {parameter.name!r} is variadic; a tool's parameters must be named"
            )
        if parameter.name not in hints:
            advice = ""
            if parameter.name in ("self", "cls"):
                advice = "; decorate the bound method (tool(instance.method)) instead"
            raise TypeError(f"parameter {parameter.name!r} has no type annotation{advice}")
        hint = hints[parameter.name]
        default = MISSING if parameter.default is inspect.Parameter.empty else parameter.default
        parameters.append(
            _Parameter(
                parameter.name,
                hint,
                parameter.kind is _POSITIONAL_ONLY,
                default,
                _is_context(hint),
            )
        )
    return parameters


def _is_context(hint: Any) -> bool:
    hint = strip_annotated(hint)[0]
    if is_union(hint):
        members = set(typing.get_args(hint)) - {type(None)}
        return members == {ToolExecutionContext}
    return hint is ToolExecutionContext


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or (
        not inspect.isroutine(fn) and inspect.iscoroutinefunction(type(fn).__call__)
    )


def _execute(fn: Callable[..., Any], binder: _Binder) -> Callable[..., Any]:
    async def finish(pending: Awaitable[Any]) -> Any:
        return binder.result(await pending)

    if _is_async(fn):

        async def execute_async(args: dict[str, Any], context: ToolExecutionContext) -> Any:
            positional, keywords = binder.bind(args, context)
            return binder.result(await fn(*positional, **keywords))

        execute: Callable[..., Any] = execute_async
    else:

        def execute_sync(args: dict[str, Any], context: ToolExecutionContext) -> Any:
            positional, keywords = binder.bind(args, context)
            value = fn(*positional, **keywords)
            if inspect.isawaitable(value):
                return finish(value)
            return binder.result(value)

        execute = execute_sync
    # The definition's execute takes (args, context); pin that signature so introspection
    # (the definition-time check included) does not follow __wrapped__ to the typed function.
    execute.__signature__ = inspect.signature(execute)  # type: ignore[attr-defined]
    execute.__wrapped__ = fn  # type: ignore[attr-defined]
    return execute
