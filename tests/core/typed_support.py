"""Types and helpers shared by the ``@tool`` tests."""

from __future__ import annotations

import dataclasses
import enum
import typing
from collections.abc import Callable
from typing import Any, NewType, NotRequired, Required, TypedDict, TypeVar

import attrs
from jsonschema import Draft202012Validator

from prism_core import ToolDefinition, ToolExecutionContext

__all__ = (
    "Box",
    "Elsewhere",
    "Filters",
    "Generic",
    "Holder",
    "Hollow",
    "Level",
    "Loose",
    "Point",
    "Shade",
    "Tree",
    "Unit",
    "UserId",
    "ctx",
    "prop",
    "schema_of",
    "valid",
)


def ctx(name: str = "t") -> ToolExecutionContext:
    """A tool context outside any run."""
    return ToolExecutionContext(session_id="s", run_id="r", tool_call_id="c1", tool_name=name)


def schema_of(definition: ToolDefinition) -> dict[str, Any]:
    """The definition's parameters, after checking they are a valid 2020-12 schema."""
    assert definition.parameters is not None
    schema = dict(definition.parameters)
    Draft202012Validator.check_schema(schema)
    return schema


def prop(definition: ToolDefinition, name: str) -> Any:
    """One property's schema."""
    return schema_of(definition)["properties"][name]


def valid(definition: ToolDefinition, arguments: dict[str, Any]) -> bool:
    """Whether a full 2020-12 validator accepts ``arguments``."""
    return Draft202012Validator(schema_of(definition)).is_valid(arguments)


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Shade(enum.StrEnum):
    DARK = "dark"
    LIGHT = "light"


@dataclasses.dataclass
class Point:
    """A point on the plane.

    Attributes:
        x: Across.
        y: Up.
    """

    x: float
    y: float = 0.0
    labels: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Tree:
    value: int
    children: list[Tree] = dataclasses.field(default_factory=list)


@attrs.define
class Box:
    """A box."""

    width: int
    corner: Point
    name: str = "box"


class Filters(TypedDict):
    text: str
    tags: NotRequired[list[str]]


class Loose(TypedDict, total=False):
    id: Required[int]
    note: str


class Elsewhere:
    @dataclasses.dataclass
    class Point:
        lat: float


UserId = NewType("UserId", str)


T = TypeVar("T")


@dataclasses.dataclass
class Generic(typing.Generic[T]):
    item: T


class Hollow(enum.Enum):
    pass


@dataclasses.dataclass
class Holder:
    callback: Callable[[], None]
