"""``@tool``: JSON Schema from type hints, descriptions from docstrings, decoration errors."""

from __future__ import annotations

import collections.abc
from collections.abc import Callable
from typing import Annotated, Any, Literal, Optional

import pytest

from prism_core import ToolDefinition, tool

from .typed_support import (
    Box,
    Elsewhere,
    Filters,
    Generic,
    Holder,
    Hollow,
    Level,
    Loose,
    Point,
    Tree,
    Unit,
    UserId,
    prop,
    schema_of,
    valid,
)

# ---------------------------------------------------------------------------- schemas


def test_scalars_and_required_parameters() -> None:
    """str, int, float, bool and None map to JSON types; no default means required."""

    @tool
    def f(s: str, i: int, x: float, b: bool, n: None, d: int = 3) -> None:
        """Scalars."""

    schema = schema_of(f)
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert schema["properties"] == {
        "s": {"type": "string"},
        "i": {"type": "integer"},
        "x": {"type": "number"},
        "b": {"type": "boolean"},
        "n": {"type": "null"},
        "d": {"type": "integer", "default": 3},
    }
    assert schema["required"] == ["s", "i", "x", "b", "n"]
    assert "$defs" not in schema
    assert not valid(f, {"s": "a", "i": 1, "x": 1.5, "b": True, "n": None, "extra": 1})


def test_optional_and_unions() -> None:
    """``X | None`` and Optional widen the type; mixed unions use anyOf."""

    @tool
    def f(
        a: int | None,
        b: Optional[str] = None,  # noqa: UP045 - the spelling under test
        c: int | str = 0,
        p: Point | None = None,
        lit: Literal["x", "y"] | None = None,
    ) -> None:
        """Unions."""

    assert prop(f, "a") == {"type": ["integer", "null"]}
    assert prop(f, "b") == {"type": ["string", "null"], "default": None}
    assert prop(f, "c") == {"type": ["integer", "string"], "default": 0}
    assert prop(f, "p") == {
        "anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}],
        "default": None,
    }
    assert prop(f, "lit") == {
        "anyOf": [{"type": "string", "enum": ["x", "y"]}, {"type": "null"}],
        "default": None,
    }
    assert schema_of(f)["required"] == ["a"]
    assert valid(f, {"a": None, "p": {"x": 1}})
    assert not valid(f, {"a": None, "p": {"x": "far"}})


def test_literals_and_enums() -> None:
    """Literal and Enum values become ``enum`` with the JSON type of their values."""

    @tool
    def f(
        mode: Literal["fast", "slow"],
        n: Literal[1, 2, 3],
        mixed: Literal["a", 1],
        unit: Unit = Unit.CELSIUS,
        level: Level = Level.LOW,
    ) -> None:
        """Choices."""

    assert prop(f, "mode") == {"type": "string", "enum": ["fast", "slow"]}
    assert prop(f, "n") == {"type": "integer", "enum": [1, 2, 3]}
    assert prop(f, "mixed") == {"type": ["integer", "string"], "enum": ["a", 1]}
    assert prop(f, "unit") == {
        "type": "string",
        "enum": ["celsius", "fahrenheit"],
        "default": "celsius",
    }
    assert prop(f, "level") == {"type": "integer", "enum": [1, 2], "default": 1}


def test_containers() -> None:
    """Lists, sets, mappings and tuples (homogeneous and fixed) become arrays and objects."""

    @tool
    def f(
        nums: list[int],
        names: set[str],
        scores: dict[str, float],
        span: tuple[int, ...],
        pair: tuple[int, str],
        empty: tuple[()],
        anything: list,  # type: ignore[type-arg]
        blob: dict,  # type: ignore[type-arg]
        seq: collections.abc.Sequence[bool],
        table: collections.abc.Mapping[str, list[int]],
        raw: Any,
    ) -> None:
        """Containers."""

    assert prop(f, "nums") == {"type": "array", "items": {"type": "integer"}}
    assert prop(f, "names") == {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    assert prop(f, "scores") == {"type": "object", "additionalProperties": {"type": "number"}}
    assert prop(f, "span") == {"type": "array", "items": {"type": "integer"}}
    assert prop(f, "pair") == {
        "type": "array",
        "prefixItems": [{"type": "integer"}, {"type": "string"}],
        "items": False,
        "minItems": 2,
        "maxItems": 2,
    }
    assert prop(f, "empty") == {"type": "array", "items": False, "minItems": 0, "maxItems": 0}
    assert prop(f, "anything") == {"type": "array"}
    assert prop(f, "blob") == {"type": "object"}
    assert prop(f, "seq") == {"type": "array", "items": {"type": "boolean"}}
    assert prop(f, "table") == {
        "type": "object",
        "additionalProperties": {"type": "array", "items": {"type": "integer"}},
    }
    assert prop(f, "raw") == {}
    base = {"nums": [], "names": [], "scores": {}, "span": [], "empty": [], "anything": []}
    base |= {"blob": {}, "seq": [], "table": {}, "raw": None}
    assert valid(f, {**base, "pair": [1, "a"]})
    assert not valid(f, {**base, "pair": [1, "a", 2]})
    assert not valid(f, {**base, "pair": ["a", 1]})
    assert not valid(f, {**base, "pair": [1, "a"], "names": ["x", "x"]})


def test_annotated_and_newtype() -> None:
    """Annotated keeps its type; a string extra is the description; NewType is its base."""

    @tool
    def f(
        a: Annotated[int, "How many."],
        b: Annotated[list[Annotated[str, "one tag"]], object()],
        who: UserId,
    ) -> None:
        """Annotated.

        Args:
            a: The docstring says something else.
            b: From the docstring.
        """

    assert prop(f, "a") == {"type": "integer", "description": "How many."}
    assert prop(f, "b") == {
        "type": "array",
        "items": {"type": "string", "description": "one tag"},
        "description": "From the docstring.",
    }
    assert prop(f, "who") == {"type": "string"}


def test_typed_dicts() -> None:
    """TypedDict keys follow total, Required and NotRequired; the dict is closed."""

    @tool
    def f(filters: Filters, loose: Loose) -> None:
        """TypedDicts."""

    defs = schema_of(f)["$defs"]
    assert prop(f, "filters") == {"$ref": "#/$defs/Filters"}
    assert defs["Filters"] == {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["text"],
        "additionalProperties": False,
    }
    assert defs["Loose"]["required"] == ["id"]
    assert set(defs["Loose"]["properties"]) == {"id", "note"}


def test_dataclasses_and_attrs_go_to_defs() -> None:
    """Structured types are described once in $defs, with their docstrings and defaults."""

    @tool
    def f(box: Box, points: list[Point], origin: Point = Point(0.0, 0.0)) -> None:  # noqa: B008
        """Structures."""

    schema = schema_of(f)
    assert prop(f, "points") == {"type": "array", "items": {"$ref": "#/$defs/Point"}}
    assert prop(f, "origin") == {
        "$ref": "#/$defs/Point",
        "default": {"x": 0.0, "y": 0.0, "labels": []},
    }
    assert schema["$defs"]["Point"] == {
        "type": "object",
        "description": "A point on the plane.",
        "properties": {
            "x": {"type": "number", "description": "Across."},
            "y": {"type": "number", "description": "Up.", "default": 0.0},
            "labels": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["x"],
        "additionalProperties": False,
    }
    assert schema["$defs"]["Box"] == {
        "type": "object",
        "description": "A box.",
        "properties": {
            "width": {"type": "integer"},
            "corner": {"$ref": "#/$defs/Point"},
            "name": {"type": "string", "default": "box"},
        },
        "required": ["width", "corner"],
        "additionalProperties": False,
    }
    assert valid(f, {"box": {"width": 1, "corner": {"x": 1}}, "points": [{"x": 2, "y": 3}]})
    assert not valid(f, {"box": {"width": 1, "corner": {"x": 1, "z": 0}}, "points": []})


def test_recursive_types_and_name_clashes() -> None:
    """A recursive dataclass refers to itself; two types with one name get distinct defs."""

    @tool
    def f(tree: Tree, here: Point, there: Elsewhere.Point) -> None:
        """Recursion."""

    schema = schema_of(f)
    assert schema["$defs"]["Tree"]["properties"]["children"] == {
        "type": "array",
        "items": {"$ref": "#/$defs/Tree"},
    }
    assert prop(f, "here") == {"$ref": "#/$defs/Point"}
    assert prop(f, "there") == {"$ref": "#/$defs/Point2"}
    assert schema["$defs"]["Point2"]["properties"] == {"lat": {"type": "number"}}
    assert valid(
        f, {"tree": {"value": 1, "children": [{"value": 2}]}, "here": {"x": 1}, "there": {"lat": 2}}
    )
    assert not valid(
        f,
        {"tree": {"value": 1, "children": [{"value": "2"}]}, "here": {"x": 1}, "there": {"lat": 2}},
    )


def test_defaults_that_are_not_json_are_left_out() -> None:
    """A default JSON cannot carry makes the parameter optional without a ``default``."""
    marker = object()

    @tool
    def f(a: Any = marker, b: float = float("nan")) -> None:
        """Defaults."""

    assert prop(f, "a") == {}
    assert prop(f, "b") == {"type": "number"}
    assert "required" not in schema_of(f)


# ------------------------------------------------------------------------ descriptions


def test_names_descriptions_and_flags() -> None:
    """The docstring's free text describes the tool unless ``description=`` is given."""

    @tool
    def lookup(order_id: str) -> str:
        """Look up an order.

        Parameters
        ----------
        order_id : str
            The order's id, e.g. ``A-17``.
        """
        return order_id

    assert lookup.name == "lookup"
    assert lookup.description == "Look up an order."
    assert prop(lookup, "order_id")["description"] == "The order's id, e.g. ``A-17``."
    assert lookup.idempotent is False
    assert lookup.exclusive is False

    @tool(name="orders.find", description="Find orders.", idempotent=True, exclusive=True)
    def find(text: str) -> list[str]:
        """Ignored summary.

        Args:
            text: Words to match.
        """
        return [text]

    assert find.name == "orders.find"
    assert find.description == "Find orders."
    assert prop(find, "text")["description"] == "Words to match."
    assert find.idempotent is True
    assert find.exclusive is True

    @tool
    def bare(n: int) -> int:
        return n

    assert bare.description is None
    assert prop(bare, "n") == {"type": "integer"}


def test_tool_definition_records_idempotent() -> None:
    """``idempotent`` defaults to False on any ToolDefinition and is a keyword field."""
    assert ToolDefinition("t", lambda a, c: 1).idempotent is False
    assert ToolDefinition("t", lambda a, c: 1, idempotent=True).idempotent is True


# ---------------------------------------------------------------- decoration-time errors


def _decorate(fn: Callable[..., Any]) -> str:
    with pytest.raises(TypeError) as caught:
        tool(fn)
    return str(caught.value)


def test_unsupported_annotations_fail_at_decoration() -> None:
    """Every unsupported annotation names the function, the parameter and the type."""

    def bare_object(thing: object) -> None: ...

    def a_callable(hook: Callable[[int], int]) -> None: ...

    def int_keys(table: dict[int, str]) -> None: ...

    def nested(points: list[Point], when: list[type]) -> None: ...

    def literal_object(x: Literal[b"raw"]) -> None: ...

    def raw_bytes(data: bytes) -> None: ...

    def generic(box: Generic[int]) -> None: ...

    def hollow(kind: Hollow) -> None: ...

    message = _decorate(bare_object)
    assert "bare_object" in message
    assert "'thing'" in message
    assert "object" in message
    assert "'hook'" in _decorate(a_callable)
    assert "Callable" in _decorate(a_callable)
    assert "keys are not str" in _decorate(int_keys)
    assert "'when'" in _decorate(nested)
    assert "not JSON" in _decorate(literal_object)
    assert "'data'" in _decorate(raw_bytes)
    assert "bytes" in _decorate(raw_bytes)
    assert "'box'" in _decorate(generic)
    assert "enum without members" in _decorate(hollow)


def test_unsupported_field_types_name_the_field() -> None:
    """A structured type with an unsupported field names that field and its class."""

    def f(holder: Holder) -> None: ...

    message = _decorate(f)
    assert "'callback'" in message
    assert "Holder" in message


def test_variadic_and_unannotated_parameters_are_refused() -> None:
    """``*args``, ``**kwargs`` and a parameter without a hint fail at decoration."""

    def star(*names: str) -> None: ...

    def double_star(**options: int) -> None: ...

    def untyped(x, y: int) -> None:  # type: ignore[no-untyped-def]
        ...

    def unresolvable(x: NoSuchType) -> None:  # type: ignore[name-defined]  # noqa: F821
        ...

    assert "'names' is variadic" in _decorate(star)
    assert "'options' is variadic" in _decorate(double_star)
    assert "'x' has no type annotation" in _decorate(untyped)
    assert "NoSuchType" in _decorate(unresolvable)

    class Shelf:
        def take(self, n: int) -> int:
            return n

    assert "decorate the bound method" in _decorate(Shelf.take)
    with pytest.raises(TypeError, match="needs a function"):
        tool("not a function")  # type: ignore[call-overload]
