"""Every ``python`` example in the README and docs runs as written.

Examples run as scripts (``__name__ == "__main__"``), so code under an
``if __name__ == "__main__":`` guard runs too. A block whose first line is ``# file: NAME`` is
not run: it is a file the page's other examples use (an MCP server script, say), written as
``NAME`` into the folder each of them runs in. An example that talks to Redis skips (or fails,
when services are required) if the test server is unreachable, like the store tests.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.conftest import REDIS_URL, service_unavailable

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
MAIN_GUARD = re.compile(r"^if __name__ == [\"']__main__[\"']:", re.M)
FILE_BLOCK = re.compile(r"\A# file: ([\w.-]+)\n")
FENCED = re.compile(r"^```.*?^```", re.S | re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+)$", re.M)


def _page(path: Path) -> str:
    """A page's name in test ids and file lookups: its path from the repository's root."""
    return path.relative_to(ROOT).as_posix()


def _examples() -> list[tuple[str, int, str]]:
    found = []
    for path in DOCS:
        for index, match in enumerate(BLOCK.finditer(path.read_text(encoding="utf-8"))):
            if not FILE_BLOCK.match(match.group(1)):
                found.append((_page(path), index, match.group(1)))
    return found


def _page_files(doc: str) -> dict[str, str]:
    """The ``# file: NAME`` blocks of one page, by name."""
    (path,) = [path for path in DOCS if _page(path) == doc]
    files = {}
    for match in BLOCK.finditer(path.read_text(encoding="utf-8")):
        named = FILE_BLOCK.match(match.group(1))
        if named:
            files[named.group(1)] = match.group(1)
    return files


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
    for name, text in _page_files(doc).items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    _run_as_script(code, f"{doc}[{index}]", tmp_path)


def test_main_guarded_code_runs(tmp_path: Path) -> None:
    """Code under ``if __name__ == "__main__":`` runs, and the docs do contain such examples."""
    namespace = _run_as_script(
        'ran = []\nif __name__ == "__main__":\n    ran.append("main")\n', "guarded", tmp_path
    )
    assert namespace["ran"] == ["main"]
    assert any(MAIN_GUARD.search(code) for _doc, _index, code in _examples())


def test_file_blocks_are_used_by_an_example_of_their_page() -> None:
    """Each ``# file: NAME`` block is named by an example of its page, and is not run itself."""
    examples = _examples()
    pages = {doc for doc, _index, _code in examples}
    files = {(doc, name) for doc in pages for name in _page_files(doc)}
    assert ("docs/mcp.md", "notes_server.py") in files
    for doc, name in files:
        assert any(name in code for page, _index, code in examples if page == doc), name
        assert not any(code.startswith("# file: ") for _page, _index, code in examples)


def _anchors(path: Path) -> set[str]:
    """The anchors of a page's headings, as GitHub makes them (lower case, punctuation
    dropped, spaces as hyphens, a repeated heading numbered)."""
    seen: dict[str, int] = {}
    anchors = set()
    for heading in HEADING.findall(FENCED.sub("", path.read_text(encoding="utf-8"))):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def test_relative_links_in_the_docs_resolve() -> None:
    """Every relative link of the README and the docs names a file that exists, and an anchor
    its page has (outside code blocks)."""
    broken = []
    for path in DOCS:
        for target in LINK.findall(FENCED.sub("", path.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target):
                continue
            name, _, anchor = target.partition("#")
            dest = (path.parent / name).resolve() if name else path
            missing = not dest.exists()
            if missing or (anchor and dest.suffix == ".md" and anchor not in _anchors(dest)):
                broken.append(f"{_page(path)}: {target}")
    assert broken == []
