"""``output_type``: what a run's final answer must be, as a JSON Schema and the value it builds.

A host passes a JSON Schema mapping, a pydantic ``BaseModel`` subclass (pydantic is only used
when the host passes one), an attrs class, a dataclass or a ``TypedDict``. Each becomes an
:class:`OutputType`: the schema providers are told (an object schema with its ``$defs``), and
:meth:`OutputType.parse`, which reads the model's answer as JSON and returns the validated
value (an instance for classes) or the problems that name the failing fields. Plain schemas
are checked with the kernel's JSON Schema validator; classes are checked against their schema
and then built by a strict converter (or, for pydantic, by the model itself).

It describes and checks values only: it must not run a provider or touch a run.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import Any

import attrs
import cattrs

from ._tool_schema import SchemaBuilder, is_pydantic_model, is_typeddict
from ._tool_values import ArgumentValueError, create_tool_converter, structure_argument
from .codec import dumps, loads
from .schema import CompiledSchema, compile_json_schema

__all__ = ("DEFAULT_OUTPUT_NAME", "OutputType", "coerce_output_type", "output_type_from_schema")

#: The name providers are given for a plain schema without a usable ``title``.
DEFAULT_OUTPUT_NAME = "output"
#: The most problems one answer's retry message lists.
MAX_OUTPUT_PROBLEMS = 8

_NAME = re.compile(r"[^A-Za-z0-9_-]")
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n(.*?)\n?```$", re.S)


@attrs.frozen(eq=False, kw_only=True)
class OutputType:
    """The checked form of an ``output_type``: its ``schema`` (JSON Schema, draft 2020-12),
    the ``name`` providers are given, and the class it builds (``None`` for a plain schema)."""

    schema: Mapping[str, Any]
    name: str
    target: Any = None
    _compiled: CompiledSchema = attrs.field(alias="compiled", repr=False)
    _converter: cattrs.Converter | None = attrs.field(alias="converter", default=None, repr=False)

    def parse(self, text: str) -> tuple[Any, list[str]]:
        """``(value, [])`` for an answer that is JSON matching the type, else ``(None,
        problems)``: each problem names a JSON path and what failed there, never a value."""
        body = text.strip()
        fenced = _FENCE.match(body)
        if fenced is not None:
            body = fenced.group(1).strip()
        try:
            data = json.loads(body)
        except json.JSONDecodeError as exc:
            where = f" (line {exc.lineno} column {exc.colno})"
            return None, [f"$: the answer is not JSON{where}; answer with JSON only"]
        except (ValueError, RecursionError):
            return None, ["$: the answer is not JSON; answer with JSON only"]
        return self.check(data)

    def check(self, data: Any) -> tuple[Any, list[str]]:
        """``(value, [])`` when the JSON value ``data`` matches the type, else ``(None,
        problems)``."""
        if is_pydantic_model(self.target):
            try:
                return self.target.model_validate(data), []
            except ValueError as exc:
                return None, _pydantic_problems(exc)
        problems = self._compiled.problems(data, limit=MAX_OUTPUT_PROBLEMS)
        if problems:
            return None, problems
        if self._converter is None:
            return loads(dumps(data)), []
        try:
            return structure_argument(self._converter, data, self.target, "$"), []
        except ArgumentValueError as exc:
            return None, [str(exc)]

    def to_json(self, value: Any) -> Any:
        """``value`` (what :meth:`check` built) as JSON data."""
        if is_pydantic_model(self.target):
            return value.model_dump(mode="json")
        if self._converter is None:
            return value
        return self._converter.unstructure(value)

    def same_schema(self, schema: Any) -> bool:
        """Whether ``schema`` is this type's schema (compared as canonical JSON)."""
        try:
            return dumps(dict(self.schema)) == dumps(dict(schema))
        except (TypeError, ValueError):
            return False


def _pydantic_problems(exc: Exception) -> list[str]:
    read = getattr(exc, "errors", None)
    if not callable(read):
        return [f"$: {exc}"]
    problems = []
    for error in read()[:MAX_OUTPUT_PROBLEMS]:
        path = "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.get("loc", ())
        )
        problems.append(f"${path}: {error.get('msg', 'is invalid')} ({error.get('type', '?')})")
    return problems


def _schema_name(schema: Mapping[str, Any]) -> str:
    title = schema.get("title")
    if isinstance(title, str):
        name = _NAME.sub("_", title)[:64]
        if name:
            return name
    return DEFAULT_OUTPUT_NAME


def _class_schema(cls: type, converter: cattrs.Converter) -> dict[str, Any]:
    """The object schema of a dataclass, attrs class or TypedDict, with its ``$defs``."""
    builder = SchemaBuilder(converter.unstructure)
    ref = builder.schema(cls, f"output_type {cls.__qualname__}")
    name = ref["$ref"].rsplit("/", 1)[-1]
    defs = dict(builder.defs)
    root = dict(defs[name])
    # Kept in $defs only when something (the type itself, recursively) refers to it.
    if ref["$ref"] not in dumps(defs).decode("utf-8"):
        del defs[name]
    if defs:
        root["$defs"] = defs
    return root


def coerce_output_type(value: Any, *, where: str = "output_type") -> OutputType | None:
    """``value`` as an :class:`OutputType` (``None`` stays ``None``); anything else raises
    ``TypeError``, an invalid schema :class:`~prism_core.JsonSchemaError`."""
    if value is None:
        return None
    if isinstance(value, OutputType):
        return value
    if isinstance(value, Mapping):
        schema = loads(dumps(dict(value)))
        compiled = compile_json_schema(schema, where=where)
        return OutputType(schema=schema, name=_schema_name(schema), compiled=compiled)
    if is_pydantic_model(value):
        schema = dict(value.model_json_schema())
        compiled = compile_json_schema(schema, where=where)
        return OutputType(
            schema=schema, name=_NAME.sub("_", value.__name__)[:64], target=value, compiled=compiled
        )
    if isinstance(value, type) and (
        dataclasses.is_dataclass(value) or attrs.has(value) or is_typeddict(value)
    ):
        converter = create_tool_converter()
        schema = _class_schema(value, converter)
        compiled = compile_json_schema(schema, where=where)
        return OutputType(
            schema=schema,
            name=_NAME.sub("_", value.__name__)[:64],
            target=value,
            compiled=compiled,
            converter=converter,
        )
    raise TypeError(
        f"{where} must be a JSON Schema mapping, a pydantic BaseModel subclass, an attrs "
        f"class, a dataclass or a TypedDict, got {type(value).__name__}"
    )


def output_type_from_schema(schema: Mapping[str, Any], known: OutputType | None) -> OutputType:
    """The output type a resumed run checks with: ``known`` (the agent's, building its class)
    when its schema is the recorded one, else the recorded schema itself."""
    if known is not None and known.same_schema(schema):
        return known
    output = coerce_output_type(schema, where="the checkpoint's output schema")
    assert output is not None
    return output
