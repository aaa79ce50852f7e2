"""The run state's JSON form without code generation: the first resume in a process is cheap.

cattrs builds (and compiles) a structure and an unstructure function per class the first
time it meets it: about two dozen classes for a run state, tens of milliseconds in a new
process. This module walks the same attrs fields with plans made of plain closures, built
once per process on first use and cached.

- :func:`structure_exact` takes only data whose every value has its field's exact JSON type
  (nothing cattrs would coerce) and returns ``None`` for anything else, so the caller falls
  back to the converter and its errors; what it returns equals the converter's result, and
  unstructured again gives back the data it was given (an integer may come back as the
  float it stood for; keys that are not fields are left out).
- :func:`unstructure_known` returns exactly what ``converter().unstructure(value)`` returns
  (lists for tuples, plain dicts for mappings, every field in field order); any value it does
  not know is handed to the converter.

It must not change what the converter would produce: any difference is a bug.
"""

from __future__ import annotations

import builtins
import collections.abc
import functools
import operator
import re
import sys
import types
import typing
from collections.abc import Callable
from typing import Any, Literal

import attrs

from .._decode import Declined, decode_message
from ..codec import converter, dumps
from ..content import (
    ErrorInfo,
    Message,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolResultContent,
    Usage,
)

__all__ = ("field_types", "structure_exact", "unstructure_known")

T = typing.TypeVar("T")

_Plan = Callable[[Any], Any]
_SCALARS = (str, int, bool)


def structure_exact(data: Any, cls: type[T]) -> T | None:
    """The ``cls`` record ``data`` holds, or ``None`` when the direct path declines it."""
    try:
        record: T = _plan(typing.cast(Any, cls))(data)
    except Declined:
        return None
    return record


def _identity(value: Any) -> Any:
    return value


def _scalar(kind: type[Any]) -> _Plan:
    def plan(value: Any) -> Any:
        if type(value) is not kind:
            raise Declined
        return value

    return plan


def _float(value: Any) -> float:
    # JSON has one number type: the converter turns an integer into a float too.
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    raise Declined


def _mapping(value: Any) -> dict[str, Any]:
    if type(value) is not dict:
        raise Declined
    return dict(value)


def _declined(value: Any) -> Any:
    raise Declined


def _message(value: Any) -> Message:
    try:
        return decode_message(value)
    except Declined:
        pass
    # A rarer shape (an error result) gets the converter's own message, when it gives back
    # exactly the stored JSON: then nothing was coerced, and the record stays exact. Anything
    # else (a refusal, a coercion, a default filled in) leaves the whole state to the
    # converter and its checks, so the result and the error are the ones they give.
    try:
        message: Message = converter().structure(value, Message)
        exact = dumps(converter().unstructure(message)) == dumps(value)
    except Exception as exc:
        raise Declined from exc
    if not exact:
        raise Declined
    return message


@functools.cache
def _plan(kind: Any) -> _Plan:
    if kind is Any:
        return _identity
    if kind in _SCALARS:
        return _scalar(kind)
    if kind is float:
        return _float
    if kind is Message:
        return _message
    origin = typing.get_origin(kind)
    args = typing.get_args(kind)
    if origin is Literal and all(type(arg) is str for arg in args):
        allowed = frozenset(args)

        def literal(value: Any) -> Any:
            if type(value) is not str or value not in allowed:
                raise Declined
            return value

        return literal
    if origin in (typing.Union, types.UnionType):
        options = [arg for arg in args if arg is not type(None)]
        if len(options) != 1:
            return _declined
        inner = _plan(options[0])
        return lambda value: None if value is None else inner(value)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = _plan(args[0])

        def sequence(value: Any) -> tuple[Any, ...]:
            if type(value) is not list:
                raise Declined
            return tuple(item(element) for element in value)

        return sequence
    if origin in (collections.abc.Mapping, dict) and args == (str, Any):
        return _mapping
    if isinstance(kind, type) and attrs.has(kind):
        return _record(kind)
    return _declined


@functools.cache
def field_types(cls: Any) -> dict[str, Any]:
    """The evaluated type of each attrs field of ``cls`` (what ``typing.get_type_hints``
    gives for them), each distinct annotation text evaluated once per module."""
    return {field.name: _field_type(cls, field.name) for field in attrs.fields(cls)}


@functools.cache
def _field_type(cls: Any, name: str) -> Any:
    annotation = getattr(attrs.fields(cls), name).type
    if not isinstance(annotation, str):
        return annotation
    return _evaluate(annotation, cls.__module__, vars(sys.modules[cls.__module__]))


_EVALUATED: dict[tuple[str, str], Any] = {}
_BUILTINS = vars(builtins)

#: Annotation texts read without compiling them: a name, or a tuple of a name, either of
#: them optional (``RunCountersState``, ``str | None``, ``tuple[PendingCall, ...]``).
_NAMED = re.compile(
    r"(?P<tuple>tuple\[)?(?P<name>[A-Za-z_]\w*)(?(tuple), \.\.\.\])(?P<none> \| None)?"
)


def _evaluate(annotation: str, module: str, namespace: dict[str, Any]) -> Any:
    # ``from __future__ import annotations`` keeps annotations as text; typing.get_type_hints
    # compiles every one of them again, which is most of a cold parse's cost. The common
    # forms are built from the names they hold, as evaluating them would build them.
    key = (module, annotation)
    if key not in _EVALUATED:
        named = _NAMED.fullmatch(annotation)
        name = named["name"] if named is not None else ""
        if (name in namespace or name in _BUILTINS) and namespace.get("tuple", tuple) is tuple:
            assert named is not None
            kind: Any = namespace[name] if name in namespace else _BUILTINS[name]
            if named["tuple"]:
                kind = types.GenericAlias(tuple, (kind, ...))
            _EVALUATED[key] = kind | None if named["none"] else kind
        else:
            _EVALUATED[key] = eval(annotation, namespace)
    return _EVALUATED[key]


def _record(cls: Any) -> _Plan:
    # Each field's plan is made the first time the field is present: a state seldom holds
    # most of its optional records, and their annotations need not be read until it does.
    fields: list[list[Any]] = [
        [field.name, field.alias, field.default is attrs.NOTHING, None]
        for field in attrs.fields(cls)
    ]

    def record(value: Any) -> Any:
        if type(value) is not dict:
            raise Declined
        kwargs: dict[str, Any] = {}
        for entry in fields:
            name = entry[0]
            if name in value:
                plan = entry[3]
                if plan is None:
                    plan = entry[3] = _plan(_field_type(cls, name))
                kwargs[entry[1]] = plan(value[name])
            elif entry[2]:
                raise Declined
        return cls(**kwargs)

    return record


# -- unstructure ----------------------------------------------------------------------------

#: The attrs classes unstructured here; any other object goes to the converter.
_CONTENT_CLASSES = (
    ErrorInfo,
    Message,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolResultContent,
    Usage,
)


def unstructure_known(value: Any, classes: frozenset[type[Any]]) -> Any:
    """``converter().unstructure(value)``, without code generation, for values made of JSON
    data and instances of ``classes`` (attrs classes without hooks of their own) and the
    content classes; anything else inside goes to the converter."""
    kind: Any = type(value)
    if kind in _PLAIN:
        return value
    # Plain members are taken as they are, without a call each: a run state is mostly
    # strings and numbers, and every checkpoint of a run is unstructured.
    plain = _PLAIN
    if kind is list or kind is tuple:
        return [item if type(item) in plain else unstructure_known(item, classes) for item in value]
    if kind is dict:
        return {
            key: item if type(item) in plain else unstructure_known(item, classes)
            for key, item in value.items()
        }
    if kind in classes or kind in _CONTENT_CLASSES:
        names, read = _fields_of(kind)
        return {
            name: item if type(item) in plain else unstructure_known(item, classes)
            for name, item in zip(names, read(value), strict=True)
        }
    return converter().unstructure(value)


#: The types that unstructure to themselves (``None`` included).
_PLAIN = frozenset((str, int, float, bool, type(None)))


@functools.cache
def _fields_of(cls: Any) -> tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]:
    """The field names of ``cls`` and a function reading their values, as a tuple, in one
    call."""
    names = tuple(field.name for field in attrs.fields(cls))
    if len(names) == 1:
        name = names[0]
        return names, lambda value: (getattr(value, name),)
    return names, operator.attrgetter(*names)
