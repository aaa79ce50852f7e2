"""The fenced-effects example of docs/durable/in-doubt.md proves its point: as written, one
payment lands; with its fence removed, the frozen worker's late payment lands a second time
and the example's own assertion fails."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "durable" / "in-doubt.md"
FENCE = "        if token < self._fence(run_id, token):\n"


def _example() -> str:
    blocks = re.findall(r"^```python\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.S | re.M)
    (example,) = [block for block in blocks if "class StaleFence" in block]
    return example


def _run(code: str) -> None:
    exec(compile(code, "fenced-effects", "exec", dont_inherit=True), {"__name__": "__main__"})


def test_the_fenced_example_applies_one_payment() -> None:
    _run(_example())


def test_without_its_fence_the_example_fails() -> None:
    example = _example()
    assert FENCE in example
    unfenced = example.replace(FENCE, "        if False:  # the fence, removed\n")
    with pytest.raises(AssertionError):
        _run(unfenced)
