"""JSON arguments to typed values and typed results back to JSON, for typed-function tools.

Each tool gets a converter of its own (never cattrs' global one). It is strict where JSON is
ambiguous: a string never becomes a number, a boolean never an integer, a union takes the
first member that accepts the value as it is, and an object with keys its type does not
declare is refused.
"""

from __future__ import annotations

import collections.abc
import enum
import typing
from collections.abc import Callable
from typing import Any, Literal

import cattrs
from cattrs.errors import AttributeValidationNote, ClassValidationError, ForbiddenExtraKeysError

from ._tool_schema import is_pydantic_model, is_typeddict, is_union, typeddict_fields

__all__ = ("ArgumentValueError", "create_tool_converter", "structure_argument")


class ArgumentValueError(ValueError):
    """A JSON value that does not fit the type it is converted to."""


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _structure_str(value: Any, _: Any) -> str:
    if isinstance(value, str):
        return value
    raise ArgumentValueError(f"expected a string, got {_kind(value)}")


def _structure_int(value: Any, _: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise ArgumentValueError(f"expected an integer, got {_kind(value)}")


def _structure_float(value: Any, _: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise ArgumentValueError(f"expected a number, got {_kind(value)}")


def _structure_bool(value: Any, _: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise ArgumentValueError(f"expected a boolean, got {_kind(value)}")


def _structure_none(value: Any, _: Any) -> None:
    if value is not None:
        raise ArgumentValueError(f"expected null, got {_kind(value)}")


def _same_json(value: Any, candidate: Any) -> bool:
    # 1 == True in Python; JSON keeps them apart.
    return bool(value == candidate and isinstance(value, bool) == isinstance(candidate, bool))


def _structure_literal(value: Any, hint: Any) -> Any:
    for arg in typing.get_args(hint):
        if _same_json(value, arg.value if isinstance(arg, enum.Enum) else arg):
            return arg
    raise ArgumentValueError(f"{value!r} is not one of the allowed values")


def _structure_enum(value: Any, hint: Any) -> Any:
    for member in hint:
        if _same_json(value, member.value):
            return member
    raise ArgumentValueError(f"{value!r} is not a value of {hint.__name__}")


def _is_literal(hint: Any) -> bool:
    return typing.get_origin(hint) is Literal


def _enum_aware(hook: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    # Hooks for classes dispatch on the MRO, so the ``int`` hook also receives IntEnums
    # (and the ``str`` hook ``class X(str, Enum)``): those are found by value.
    def structure(value: Any, hint: Any) -> Any:
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return _structure_enum(value, hint)
        return hook(value, hint)

    return structure


def _pydantic_errors(exc: Exception) -> str:
    read = getattr(exc, "errors", None)
    if not callable(read):
        return str(exc)
    errors = read()
    return "; ".join(
        f"{'.'.join(str(part) for part in error['loc']) or 'value'}: {error['msg']}"
        for error in errors
    )


def create_tool_converter() -> cattrs.Converter:
    """A converter for one tool's arguments and results."""
    converter = cattrs.Converter(
        forbid_extra_keys=True,
        unstruct_collection_overrides={collections.abc.Set: list},  # JSON has no sets
    )
    for hint, hook in (
        (str, _structure_str),
        (int, _structure_int),
        (float, _structure_float),
        (bool, _structure_bool),
        (type(None), _structure_none),
        (enum.Enum, _structure_enum),
    ):
        converter.register_structure_hook(hint, _enum_aware(hook))
    converter.register_structure_hook_func(_is_literal, _structure_literal)

    def structure_union(value: Any, hint: Any) -> Any:
        members = typing.get_args(hint)
        if value is None and type(None) in members:
            return None
        others = [member for member in members if member is not type(None)]
        if len(others) == 1:  # Optional[X]: X's own errors say more than "fits none"
            return converter.structure(value, others[0])
        for member in others:
            try:
                return converter.structure(value, member)
            except Exception:
                continue  # the next member may accept it
        raise ArgumentValueError(f"{_kind(value)} value fits none of {hint}")

    def structure_typeddict(value: Any, hint: Any) -> Any:
        if not isinstance(value, dict):
            raise ArgumentValueError(f"expected an object, got {_kind(value)}")
        fields = {field.name: field for field in typeddict_fields(hint)}
        extra = set(value) - set(fields)
        if extra:
            raise ForbiddenExtraKeysError("", hint, extra)
        result: dict[str, Any] = {}
        problems: list[Exception] = []
        for name, field in fields.items():
            try:
                if name in value:
                    result[name] = converter.structure(value[name], field.hint)
                elif field.required:
                    raise KeyError(name)
            except Exception as exc:
                exc.add_note(AttributeValidationNote(f"Structuring {name}", name, field.hint))
                problems.append(exc)
        if problems:
            raise ClassValidationError(f"While structuring {hint.__name__}", problems, hint)
        return result

    def structure_pydantic(value: Any, hint: Any) -> Any:
        try:
            return hint.model_validate(value)
        except ValueError as exc:
            raise ArgumentValueError(_pydantic_errors(exc)) from None

    converter.register_structure_hook_func(is_union, structure_union)
    converter.register_structure_hook_func(is_typeddict, structure_typeddict)
    converter.register_structure_hook_func(is_pydantic_model, structure_pydantic)
    converter.register_unstructure_hook_func(
        is_pydantic_model, lambda model: model.model_dump(mode="json")
    )
    return converter


def _format(exc: BaseException, hint: Any) -> str:
    if isinstance(exc, ArgumentValueError):
        return str(exc)
    return cattrs.v.format_exception(exc, hint)


def structure_argument(converter: cattrs.Converter, value: Any, hint: Any, path: str) -> Any:
    """``value`` as ``hint``, or :class:`ArgumentValueError` saying where and why not."""
    try:
        return converter.structure(value, hint)
    except Exception as exc:
        problems = cattrs.transform_error(exc, path, format_exception=_format)
        raise ArgumentValueError("; ".join(problems)) from None
