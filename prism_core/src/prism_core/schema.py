"""JSON Schema (draft 2020-12) for tool arguments, approval edits and elicitation answers.

Validation is the maintained ``jsonschema`` library with its format checker. A schema is
checked against the draft's metaschema once, when it is compiled; an invalid schema is
refused there, never at call time. A failing value is described by its JSON path and the
keyword that failed, never by the value itself (arguments may carry secrets).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import attrs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError, best_match
from referencing.exceptions import Unresolvable

from .codec import dumps, loads
from .errors import JsonSchemaError

__all__ = ("CompiledSchema", "JsonSchemaError", "compile_json_schema", "validate_json_schema")

# Paths name keys the model chose; keep a message short whatever it sent.
_MAX_PATH_CHARS = 200
_MAX_NAME_CHARS = 64
# Keywords whose schema value is a number the message may name.
_BOUNDS = frozenset(
    {
        "minimum",
        "exclusiveMinimum",
        "maximum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
    }
)


@attrs.frozen
class CompiledSchema:
    """A schema checked against the metaschema, with its validator built once."""

    _validator: Draft202012Validator = attrs.field(repr=False)

    def problem(self, value: Any) -> str | None:
        """``None`` when ``value`` is valid, else ``"<json path>: <keyword> …"`` (no value)."""
        try:
            error = best_match(self._validator.iter_errors(value))
        except Unresolvable as exc:
            return f"$: the schema reference {_short(str(exc.ref))!r} cannot be resolved"
        if error is None:
            return None
        return describe_error(error)

    def problems(self, value: Any, *, limit: int = 8) -> list[str]:
        """Every way ``value`` fails the schema, at most ``limit`` of them (in document
        order, each as :meth:`problem` words it), and ``"… and N more"`` when there are more;
        an empty list when it is valid."""
        try:
            errors = sorted(
                self._validator.iter_errors(value), key=lambda e: [str(p) for p in e.path]
            )
        except Unresolvable as exc:
            return [f"$: the schema reference {_short(str(exc.ref))!r} cannot be resolved"]
        found = [describe_error(error) for error in errors[:limit]]
        if len(errors) > limit:
            found.append(f"… and {len(errors) - limit} more")
        return found


def compile_json_schema(schema: Any, *, where: str = "schema") -> CompiledSchema:
    """Check ``schema`` against draft 2020-12 and build its validator.

    Raises :class:`JsonSchemaError` (naming ``where`` and the offending keyword) for a schema
    that is not a mapping or not a valid draft 2020-12 schema. Identical schemas (by canonical
    JSON) share one compiled validator.
    """
    if not isinstance(schema, Mapping):
        raise JsonSchemaError(f"{where} must be a JSON schema object, got {type(schema).__name__}")
    try:
        text = dumps(schema).decode("utf-8")
    except (TypeError, ValueError) as exc:
        raise JsonSchemaError(f"{where} is not JSON: {_short(str(exc), 300)}") from exc
    try:
        return _compile(text)
    except SchemaError as exc:
        location = "/".join(str(part) for part in exc.absolute_path) or "(root)"
        raise JsonSchemaError(
            f"{where} is not a valid JSON schema (draft 2020-12): at {location}, "
            f"{_short(exc.message, 300)}"
        ) from exc


# Checking a schema against the metaschema costs milliseconds; agents are often rebuilt with
# the same tools, so compiled schemas are memoised by their canonical JSON (immutable values).
@functools.lru_cache(maxsize=512)
def _compile(text: str) -> CompiledSchema:
    plain = loads(text)
    Draft202012Validator.check_schema(plain)
    validator = Draft202012Validator(plain, format_checker=Draft202012Validator.FORMAT_CHECKER)
    return CompiledSchema(validator)


def validate_json_schema(schema: Any, value: Any) -> str | None:
    """Return ``None`` when ``value`` satisfies ``schema`` (``None`` means no schema), else a
    message naming the path and the failing keyword. An invalid schema is itself a problem:
    nothing validates against it."""
    if schema is None:
        return None
    if isinstance(schema, CompiledSchema):
        return schema.problem(value)
    try:
        compiled = compile_json_schema(schema)
    except JsonSchemaError as exc:
        return f"$: {exc.message}"
    return compiled.problem(value)


def describe_error(error: ValidationError) -> str:
    """``"<json path>: <what failed> (<keyword>)"`` from schema-side facts only."""
    path = _short(error.json_path, _MAX_PATH_CHARS)
    # A ``false`` subschema fails with no keyword of its own.
    keyword = "false" if error.validator is None else str(error.validator)
    expected: Any = error.validator_value
    detail: str
    if keyword == "type":
        names = [expected] if isinstance(expected, str) else list(expected)
        detail = f"expected {' or '.join(map(str, names))}"
    elif keyword == "required":
        instance = error.instance if isinstance(error.instance, Mapping) else {}
        missing = [str(name) for name in expected if name not in instance]
        detail = f"missing required property {_short(missing[0] if missing else '?')!r}"
    elif keyword in ("additionalProperties", "unevaluatedProperties"):
        detail = "has a property the schema does not allow"
        extra = _unexpected_names(error)
        if extra:
            detail += f": {', '.join(repr(name) for name in extra)}"
    elif keyword in ("enum", "const"):
        detail = "is not one of the allowed values"
    elif keyword == "format":
        detail = f"is not a valid {_short(str(expected))!r}"
    elif keyword == "pattern":
        detail = "does not match the required pattern"
    elif keyword in _BOUNDS:
        detail = f"violates {keyword} {expected!r}"
    elif keyword in ("minProperties", "maxProperties", "uniqueItems"):
        detail = f"violates {keyword}"
    elif keyword in ("anyOf", "oneOf"):
        detail = f"matches {'none' if keyword == 'anyOf' else 'not exactly one'} of the options"
    elif keyword == "not":
        detail = "matches a schema it must not match"
    else:
        detail = "does not satisfy the schema"
    return f"{path}: {detail} ({keyword})"


def _unexpected_names(error: ValidationError) -> list[str]:
    """Up to three property names the schema does not declare (names, never values)."""
    instance, schema = error.instance, error.schema
    if not isinstance(instance, Mapping) or not isinstance(schema, Mapping):
        return []
    declared = schema.get("properties")
    declared = declared if isinstance(declared, Mapping) else {}
    if schema.get("patternProperties"):
        return []
    return [_short(str(name)) for name in instance if name not in declared][:3]


def _short(text: str, limit: int = _MAX_NAME_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
