"""JSON Schema (draft 2020-12) for tool arguments, approval edits and elicitation answers.

Validation is the maintained ``jsonschema`` library with its format checker. A schema is
checked against the draft's metaschema once, when it is compiled; an invalid schema is
refused there, never at call time. A failing value is described by its JSON path and the
keyword that failed, never by the value itself (arguments may carry secrets).

Schemas may come from someone else (an MCP server), so validation is bounded: a ``$ref`` is
resolved only inside the schema (and the draft's own metaschemas), never fetched, and one
validation may take :data:`VALIDATION_BUDGET_S` seconds, else it raises
:class:`ValidationTimeoutError`. ``pattern`` and ``patternProperties`` are matched with the
``regex`` module and its ``timeout``: the standard ``re`` engine holds the interpreter (and the
event loop) for as long as a catastrophic pattern backtracks and cannot be interrupted, while
``regex`` stops at the deadline and reads the same syntax (unlike RE2, which refuses the
look-arounds and back-references JSON Schema patterns may use).
"""

from __future__ import annotations

import contextvars
import functools
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs
import regex
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError, best_match
from jsonschema.validators import extend
from referencing import Registry
from referencing.exceptions import NoSuchResource, Unresolvable

from .codec import dumps, loads
from .errors import JsonSchemaError, PrismError

__all__ = (
    "VALIDATION_BUDGET_S",
    "CompiledSchema",
    "JsonSchemaError",
    "ValidationTimeoutError",
    "compile_json_schema",
    "validate_json_schema",
)

#: Seconds one validation (one call's arguments, one answer) may take.
VALIDATION_BUDGET_S = 0.1


class ValidationTimeoutError(PrismError):
    """Checking a value against its schema took longer than :data:`VALIDATION_BUDGET_S`
    (a catastrophic ``pattern``, say): the value is refused, as arguments that fail."""

    code = "ERR_PRISM_TOOL_ARGUMENTS"


_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "prism_schema_deadline", default=None
)


def _remaining() -> float:
    deadline = _deadline.get()
    if deadline is None:
        return VALIDATION_BUDGET_S
    left = deadline - time.monotonic()
    if left <= 0:
        raise ValidationTimeoutError(
            f"checking the value against its schema took longer than "
            f"{VALIDATION_BUDGET_S * 1000:g} ms"
        )
    return left


@functools.lru_cache(maxsize=1024)
def _regex(pattern: str) -> Any:
    return regex.compile(pattern)


def _search(pattern: str, text: str) -> bool:
    try:
        return _regex(pattern).search(text, timeout=_remaining()) is not None
    except TimeoutError:
        _remaining()
        raise ValidationTimeoutError("a pattern took too long to match") from None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError("does not match the pattern")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for name, value in instance.items():
            if _search(pattern, name):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _timed(keyword: Callable[..., Any]) -> Callable[..., Any]:
    """``keyword`` checking the deadline first, so no run of cheap keywords (a huge array)
    outlasts the budget either."""

    def check(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        _remaining()
        return keyword(validator, value, instance, schema)

    return check


def _refuse_retrieval(uri: str) -> Any:
    # A schema's references resolve inside it; fetching one would let its author make this
    # process send requests anywhere (and wait on them without a timeout).
    raise NoSuchResource(uri)


_NO_RETRIEVAL: Registry[Any] = Registry(retrieve=_refuse_retrieval)  # type: ignore[call-arg]
_KEYWORDS = {
    **{name: _timed(keyword) for name, keyword in Draft202012Validator.VALIDATORS.items()},
    "pattern": _timed(_pattern),
    "patternProperties": _timed(_pattern_properties),
}
_BoundedValidator = extend(Draft202012Validator, _KEYWORDS)  # type: ignore[no-untyped-call]

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
        """``None`` when ``value`` is valid, else ``"<json path>: <keyword> …"`` (no value).
        Raises :class:`ValidationTimeoutError` past :data:`VALIDATION_BUDGET_S`."""
        token = _deadline.set(time.monotonic() + VALIDATION_BUDGET_S)
        try:
            error = best_match(self._validator.iter_errors(value))
        except Unresolvable as exc:
            return f"$: the schema reference {_short(str(exc.ref))!r} cannot be resolved"
        finally:
            _deadline.reset(token)
        if error is None:
            return None
        return describe_error(error)

    def problems(self, value: Any, *, limit: int = 8) -> list[str]:
        """Every way ``value`` fails the schema, at most ``limit`` of them (in document
        order, each as :meth:`problem` words it), and ``"… and N more"`` when there are more;
        an empty list when it is valid. Raises :class:`ValidationTimeoutError` past
        :data:`VALIDATION_BUDGET_S`."""
        token = _deadline.set(time.monotonic() + VALIDATION_BUDGET_S)
        try:
            errors = sorted(
                self._validator.iter_errors(value), key=lambda e: [str(p) for p in e.path]
            )
        except Unresolvable as exc:
            return [f"$: the schema reference {_short(str(exc.ref))!r} cannot be resolved"]
        finally:
            _deadline.reset(token)
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
    validator = _BoundedValidator(
        plain, format_checker=Draft202012Validator.FORMAT_CHECKER, registry=_NO_RETRIEVAL
    )
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
