"""Values that break careless code: deep nesting and objects whose every access raises."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


def nested(depth: int) -> Any:
    """A list nested ``depth`` levels deep (deeper than repr() can go)."""
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


class Hostile:
    """Every comparison, iteration and repr raises."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")

    def __hash__(self) -> int:
        return 1

    def __iter__(self) -> Iterator[Any]:
        raise RuntimeError("iter")

    def __repr__(self) -> str:
        raise RuntimeError("repr")


class HostileMapping(Mapping[str, Any]):
    """A mapping whose every access raises."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("getitem")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("iter")

    def __len__(self) -> int:
        return 1
