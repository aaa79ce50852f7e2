"""The one-pass canonical JSON of plain checkpoint values matches the kernel's encoding."""

from __future__ import annotations

import enum
import math
from collections import OrderedDict
from typing import Any

import attrs
import pytest

from prism_core.codec import dumps
from prism_store_redis._values import plain_json


class Colour(enum.StrEnum):
    """A string enum: plain to ``json``, not an exact ``str``."""

    RED = "red"


@attrs.frozen
class Point:
    """An attrs value the kernel unstructures."""

    x: int


PLAIN: list[Any] = [
    None,
    0,
    -1.25,
    2**70,
    "",
    "ünïcode ☃ \x00",
    True,
    [],
    {},
    [1, [2, [3]]],
    {"b": 1, "a": {"d": [True, None, "x" * 1000], "c": 1e-300}},
]


@pytest.mark.parametrize("value", PLAIN)
def test_plain_values_encode_like_the_kernel(value: Any) -> None:
    """Same canonical bytes as ``prism_core.codec.dumps``; the copy is equal and independent."""
    encoded = plain_json(value)
    assert encoded is not None
    data, copy = encoded
    assert data == dumps(value)
    assert copy == value
    assert type(copy) is type(value)
    if isinstance(value, dict | list) and value:
        assert copy is not value


def test_the_copy_shares_no_container_with_the_value() -> None:
    """Mutating the caller's value after encoding leaves the copy as it was."""
    value: dict[str, Any] = {"items": [1, 2], "inner": {"x": [3]}}
    encoded = plain_json(value)
    assert encoded is not None
    value["items"].append(9)
    value["inner"]["x"].append(9)
    assert encoded[1] == {"items": [1, 2], "inner": {"x": [3]}}


@pytest.mark.parametrize(
    "value",
    [
        (1, 2),
        {"a": (1,)},
        {1: "int key"},
        Colour.RED,
        [Colour.RED],
        OrderedDict(a=1),
        Point(1),
        {"p": Point(2)},
        math.nan,
        [math.inf],
        {1, 2},
        b"bytes",
    ],
)
def test_anything_else_is_left_to_the_kernel(value: Any) -> None:
    """Tuples, subclasses, attrs values, NaN, non-string keys: ``None`` (the kernel's path)."""
    assert plain_json(value) is None


def test_a_cycle_is_left_to_the_kernel() -> None:
    """A self-containing value does not recurse forever; the kernel rejects it."""
    value: list[Any] = []
    value.append(value)
    assert plain_json(value) is None
