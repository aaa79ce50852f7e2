"""Every ``python`` example in the README and docs runs as written.

Examples run as scripts (``__name__ == "__main__"``), so code under an
``if __name__ == "__main__":`` guard runs too. An example that talks to Redis skips (or fails,
when services are required) if the test server is unreachable, like the store tests.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.conftest import REDIS_URL, service_unavailable

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
MAIN_GUARD = re.compile(r"^if __name__ == [\"']__main__[\"']:", re.M)


def _examples() -> list[tuple[str, int, str]]:
    found = []
    for path in DOCS:
        for index, match in enumerate(BLOCK.finditer(path.read_text(encoding="utf-8"))):
            found.append((path.name, index, match.group(1)))
    return found


def _run_as_script(code: str, name: str, where: Path) -> dict[str, object]:
    namespace: dict[str, object] = {"__name__": "__main__"}
    cwd = os.getcwd()
    os.chdir(where)
    try:
        # dont_inherit: an example runs as written, not under this module's __future__ flags.
        exec(compile(code, name, "exec", dont_inherit=True), namespace)
    finally:
        os.chdir(cwd)
    return namespace


def _require_redis() -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        service_unavailable("Redis", f"{REDIS_URL}: {exc}")
    finally:
        client.close()


@pytest.mark.parametrize(("doc", "index", "code"), _examples(), ids=lambda v: str(v)[:20])
def test_doc_example_runs(
    doc: str, index: int, code: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The example executes without error in a fresh namespace, as a script."""
    if "redis://" in code:
        _require_redis()
    _run_as_script(code, f"{doc}[{index}]", tmp_path)


def test_main_guarded_code_runs(tmp_path: Path) -> None:
    """Code under ``if __name__ == "__main__":`` runs, and the docs do contain such examples."""
    namespace = _run_as_script(
        'ran = []\nif __name__ == "__main__":\n    ran.append("main")\n', "guarded", tmp_path
    )
    assert namespace["ran"] == ["main"]
    assert any(MAIN_GUARD.search(code) for _doc, _index, code in _examples())
