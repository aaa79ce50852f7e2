"""Every ``python`` example in the README and docs runs as written."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _examples() -> list[tuple[str, int, str]]:
    found = []
    for path in DOCS:
        for index, match in enumerate(BLOCK.finditer(path.read_text(encoding="utf-8"))):
            found.append((path.name, index, match.group(1)))
    return found


@pytest.mark.parametrize(("doc", "index", "code"), _examples(), ids=lambda v: str(v)[:20])
def test_doc_example_runs(
    doc: str, index: int, code: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The example executes without error in a fresh namespace."""
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        # dont_inherit: an example runs as written, not under this module's __future__ flags.
        exec(compile(code, f"{doc}[{index}]", "exec", dont_inherit=True), {"__name__": "__docs__"})
    finally:
        os.chdir(cwd)
