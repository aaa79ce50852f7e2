"""``@tool`` calls: typed arguments, argument errors, context injection and results."""

from __future__ import annotations

import functools
from typing import Annotated, Any, Literal

import pytest

from prism_core import PrismError, ToolArgumentsError, ToolExecutionContext, ToolResult, tool

from .typed_support import Box, Filters, Level, Point, Shade, Unit, UserId, ctx, schema_of

NOBODY = UserId("nobody")


def test_arguments_become_typed_values() -> None:
    """Enums, dataclasses, attrs, TypedDicts, tuples and sets arrive typed."""
    seen: dict[str, Any] = {}

    @tool
    def f(
        unit: Unit,
        level: Level,
        box: Box,
        points: list[Point],
        filters: Filters,
        pair: tuple[int, str],
        span: tuple[float, ...],
        tags: frozenset[str],
        maybe: Point | None = None,
        choice: int | str = 0,
        who: UserId = NOBODY,
        shade: Shade = Shade.DARK,
    ) -> str:
        """Typed."""
        seen.update(locals())
        return "ok"

    result = f.execute(
        {
            "unit": "fahrenheit",
            "level": 2,
            "box": {"width": 3, "corner": {"x": 1, "y": 2}},
            "points": [{"x": 0.5}, {"x": 1, "labels": ["b"]}],
            "filters": {"text": "red", "tags": ["a"]},
            "pair": [7, "seven"],
            "span": [1, 2.5],
            "tags": ["x", "y"],
            "choice": "two",
            "shade": "light",
        },
        ctx(),
    )
    assert result == "ok"
    assert seen["unit"] is Unit.FAHRENHEIT
    assert seen["level"] is Level.HIGH
    assert seen["box"] == Box(3, Point(1.0, 2.0))
    assert isinstance(seen["box"].corner.x, float)
    assert seen["points"] == [Point(0.5), Point(1.0, labels=["b"])]
    assert seen["filters"] == {"text": "red", "tags": ["a"]}
    assert seen["pair"] == (7, "seven")
    assert seen["span"] == (1.0, 2.5)
    assert seen["tags"] == frozenset({"x", "y"})
    assert seen["maybe"] is None
    assert seen["choice"] == "two"
    assert seen["who"] == "nobody"
    assert seen["shade"] is Shade.LIGHT


def test_bad_arguments_raise_a_typed_error_with_paths() -> None:
    """Wrong shapes, missing and unknown arguments are one ToolArgumentsError; no call."""
    calls: list[Any] = []

    @tool
    def f(n: int, flag: bool, point: Point, unit: Unit, filters: Filters) -> None:
        """Strict."""
        calls.append(n)

    with pytest.raises(ToolArgumentsError) as caught:
        f.execute(
            {
                "n": "5",
                "flag": 1,
                "point": {"x": True, "z": 0},
                "unit": "kelvin",
                "filters": {"tags": [1]},
                "surprise": 1,
            },
            ctx("f"),
        )
    error = caught.value
    assert isinstance(error, PrismError)
    assert error.code == "ERR_PRISM_TOOL_ARGUMENTS"
    message = str(error)
    assert message.startswith("Invalid arguments for f: ")
    for expected in (
        "unexpected argument @ $.surprise",
        "expected an integer, got str @ $.n",
        "expected a boolean, got int @ $.flag",
        "expected a number, got bool @ $.point.x",
        "extra fields found (z) @ $.point",
        "'kelvin' is not a value of Unit @ $.unit",
        "required field missing @ $.filters.text",
        "expected a string, got int @ $.filters.tags[0]",
    ):
        assert expected in message
    with pytest.raises(ToolArgumentsError, match=r"missing required argument @ \$\.n"):
        f.execute({}, ctx("f"))
    assert calls == []


def test_integral_floats_are_integers_and_literals_compare_strictly() -> None:
    """JSON ``2.0`` is the integer 2; ``true`` is not the literal 1."""

    @tool
    def f(n: int, pick: Literal[1, 2], named: Literal[Unit.CELSIUS] | None = None) -> Any:
        """Numbers."""
        return [n, pick, named]

    assert f.execute({"n": 2.0, "pick": 1, "named": "celsius"}, ctx()) == [2, 1, "celsius"]
    with pytest.raises(ToolArgumentsError, match="not one of the allowed values"):
        f.execute({"n": 1, "pick": True}, ctx())
    with pytest.raises(ToolArgumentsError, match="expected an integer"):
        f.execute({"n": 2.5, "pick": 1}, ctx())


def test_context_parameter_is_injected_and_not_in_the_schema() -> None:
    """A ToolExecutionContext parameter receives the context wherever it sits."""

    @tool
    def f(
        context: ToolExecutionContext, text: str, other: Annotated[ToolExecutionContext, "x"]
    ) -> Any:
        """Context."""
        return [context.tool_call_id, other.run_id, text]

    assert set(schema_of(f)["properties"]) == {"text"}
    assert schema_of(f)["required"] == ["text"]
    assert f.execute({"text": "hi"}, ctx()) == ["c1", "r", "hi"]

    @tool
    def g(text: str, context: ToolExecutionContext | None = None) -> str:
        """Optional context."""
        assert context is not None
        return context.tool_name

    assert set(schema_of(g)["properties"]) == {"text"}
    assert g.execute({"text": "hi"}, ctx("g")) == "g"
    with pytest.raises(ToolArgumentsError, match=r"unexpected argument @ \$\.context"):
        f.execute({"text": "hi", "context": {}}, ctx())


def test_positional_only_keyword_only_and_defaults() -> None:
    """Positional-only parameters are passed by position, their defaults filled in order."""

    @tool
    def f(a: int, b: int = 10, /, c: int = 20, *, d: int = 30) -> list[int]:
        """Kinds."""
        return [a, b, c, d]

    assert f.execute({"a": 1}, ctx()) == [1, 10, 20, 30]
    assert f.execute({"a": 1, "d": 4, "c": 3}, ctx()) == [1, 10, 3, 4]
    assert f.execute({"a": 1, "b": 2}, ctx()) == [1, 2, 20, 30]


def test_return_values_are_unstructured_to_json() -> None:
    """Dataclass, attrs, Enum, tuple and set results become JSON; a ToolResult is kept."""

    @tool
    def shapes() -> Any:
        """Shapes."""
        return {
            "box": Box(1, Point(2.0)),
            "unit": Unit.CELSIUS,
            "pts": (Point(1.0),),
            "ids": frozenset({7}),
        }

    assert shapes.execute({}, ctx()) == {
        "box": {"width": 1, "corner": {"x": 2.0, "y": 0.0, "labels": []}, "name": "box"},
        "unit": "celsius",
        "pts": [{"x": 1.0, "y": 0.0, "labels": []}],
        "ids": [7],
    }

    @tool
    def point() -> Point:
        """One point."""
        return Point(3.0, 4.0)

    assert point.execute({}, ctx()) == {"x": 3.0, "y": 4.0, "labels": []}

    @tool
    def explicit(context: ToolExecutionContext) -> ToolResult:
        """A result."""
        return ToolResult(context.tool_call_id, "explicit", value={"kept": True})

    assert explicit.execute({}, ctx()) == ToolResult("c1", "explicit", value={"kept": True})


def test_methods_callable_objects_and_partials() -> None:
    """Bound methods, objects with ``__call__`` and partials work; ``self`` is not a parameter."""

    class Shop:
        def __init__(self) -> None:
            self.stock = {"apple": 3}

        def count(self, item: str) -> int:
            """Count an item."""
            return self.stock.get(item, 0)

        def __call__(self, item: str, n: int = 1) -> int:
            self.stock[item] = self.stock.get(item, 0) + n
            return self.stock[item]

    shop = Shop()
    count = tool(shop.count)
    assert count.name == "count"
    assert set(schema_of(count)["properties"]) == {"item"}
    assert count.execute({"item": "apple"}, ctx()) == 3
    add = tool(name="add")(shop)
    assert set(schema_of(add)["properties"]) == {"item", "n"}
    assert add.execute({"item": "pear", "n": 2}, ctx()) == 2
    assert add.execute.__wrapped__ is shop  # type: ignore[attr-defined]

    def scale(factor: int, value: float) -> float:
        return factor * value

    double = tool(name="double")(functools.partial(scale, 2))
    assert schema_of(double)["properties"] == {"value": {"type": "number"}}
    assert double.execute({"value": 1.5}, ctx()) == 3.0
