"""A small JSON-Schema subset validator for tool arguments and elicitation payloads.

It covers what tool parameter schemas use in practice (``type``, ``properties``,
``required``, ``additionalProperties``, ``enum``, ``const``, ``items``, string and number
bounds) and fails closed on anything it cannot read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ("validate_json_schema",)

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list, tuple),
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "null": (type(None),),
}


def validate_json_schema(schema: Any, value: Any, path: str = "$") -> str | None:
    """Return ``None`` when ``value`` satisfies ``schema``, else a message naming the path."""
    if schema is None:
        return None
    if not isinstance(schema, Mapping):
        return f"{path}: schema is not an object"
    expected = schema.get("type")
    if expected is not None:
        names = [expected] if isinstance(expected, str) else list(expected)
        if not any(_is_type(value, name) for name in names):
            return f"{path}: expected {' or '.join(map(str, names))}, got {_type_name(value)}"
    if "enum" in schema and value not in list(schema["enum"]):
        return f"{path}: value is not one of the allowed values"
    if "const" in schema and value != schema["const"]:
        return f"{path}: value does not equal the required constant"
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            return f"{path}: shorter than {schema['minLength']} characters"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{path}: longer than {schema['maxLength']} characters"
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{path}: below the minimum {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{path}: above the maximum {schema['maximum']}"
    if isinstance(value, dict):
        return _validate_object(schema, value, path)
    if isinstance(value, list | tuple) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            problem = validate_json_schema(schema["items"], item, f"{path}[{index}]")
            if problem:
                return problem
    return None


def _validate_object(schema: Mapping[str, Any], value: dict[str, Any], path: str) -> str | None:
    properties = schema.get("properties") or {}
    for name in schema.get("required") or ():
        if name not in value:
            return f"{path}: missing required property {name!r}"
    additional = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in properties:
            problem = validate_json_schema(properties[key], item, f"{path}.{key}")
            if problem:
                return problem
        elif additional is False:
            return f"{path}: unexpected property {key!r}"
        elif isinstance(additional, Mapping):
            problem = validate_json_schema(additional, item, f"{path}.{key}")
            if problem:
                return problem
    return None


def _is_type(value: Any, name: str) -> bool:
    if name in ("number", "integer") and isinstance(value, bool):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(name, ()))


def _type_name(value: Any) -> str:
    for name in _TYPES:
        if _is_type(value, name):
            return name
    return type(value).__name__
