"""coding-standard: edits stay inside the roots, test files stay untouched."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from prism_core.guardrails import CompiledGuardrailPacks

from ._support import compile_packs, fired

OUTSIDE = "pack:coding-standard/no-unrelated-file-edits"
TESTS = "pack:coding-standard/no-test-rewrites"


@pytest.fixture(scope="module")
def compiled() -> CompiledGuardrailPacks:
    return compile_packs([{"id": "coding-standard", "options": {"cwd": "/work/app"}}])


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("write", {"path": "/etc/passwd"}),
        ("edit", {"path": "../other/readme.md"}),
        ("delete", {"path": "src/../../secrets.txt"}),
        ("move", {"from": "src/a.py", "to": "/tmp/a.py"}),
        ("move", {"from": "/srv/a.py", "to": "src/a.py"}),
        ("write", {"paths": ["src/a.py", "/home/me/.bashrc"]}),
        ("write", {"path": "/work/application/x.py"}),
        ("write", {"path": 42}),
        ("write", {"paths": ["src/a.py", None]}),
    ],
)
def test_edits_outside_the_roots_are_refused(
    compiled: CompiledGuardrailPacks, tool: str, arguments: dict[str, Any]
) -> None:
    assert OUTSIDE in fired(compiled, tool, arguments)


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("write", {"path": "src/app.py"}),
        ("edit", {"path": "/work/app/README.md"}),
        ("delete", {"path": "./build/../dist/out.js"}),
        ("move", {"from": "a.py", "to": "lib/a.py"}),
        ("write", {"paths": ["a.py", "b/c.py"]}),
        ("write", {"content": "/etc/passwd"}),
        ("read", {"path": "/etc/passwd"}),
        ("shell", {"path": "/etc/passwd"}),
    ],
)
def test_edits_inside_the_roots_or_other_tools_pass(
    compiled: CompiledGuardrailPacks, tool: str, arguments: dict[str, Any]
) -> None:
    assert OUTSIDE not in fired(compiled, tool, arguments)


@pytest.mark.parametrize(
    "path",
    [
        "tests/test_app.py",
        "src/__tests__/app.js",
        "test/unit.py",
        "pkg/spec/model_spec.rb",
        "specs/a.md",
        "src\\tests\\x.py",
        "src/button.test.ts",
        "src/button.spec.jsx",
        "lib/util.test.mjs",
        "Tests/Case.py",
    ],
)
def test_test_files_are_refused(compiled: CompiledGuardrailPacks, path: str) -> None:
    assert TESTS in fired(compiled, "edit", {"path": path})


@pytest.mark.parametrize(
    "path",
    [
        "src/testing/helpers.py",
        "src/contest.py",
        "src/test_utils_notes.md",
        "docs/specification.md",
        "src/button.ts",
        "src/latest/a.py",
        "src/button.test.py",
        "src/x.spec.json",
    ],
)
def test_other_files_pass(compiled: CompiledGuardrailPacks, path: str) -> None:
    assert TESTS not in fired(compiled, "edit", {"path": path})


def test_every_path_argument_is_checked_for_tests(compiled: CompiledGuardrailPacks) -> None:
    assert TESTS in fired(compiled, "move", {"from": "src/a.py", "to": "tests/a.py"})
    assert TESTS in fired(compiled, "write", {"paths": ["src/a.py", "spec/a_spec.rb"]})
    assert TESTS not in fired(compiled, "read", {"path": "tests/a.py"})


def test_roots_resolve_against_cwd() -> None:
    compiled = compile_packs(
        [{"id": "coding-standard", "options": {"cwd": "/repo", "roots": ["src", "/shared/lib"]}}]
    )
    assert OUTSIDE not in fired(compiled, "write", {"path": "src/a.py"})
    assert OUTSIDE not in fired(compiled, "write", {"path": "/shared/lib/b.py"})
    assert OUTSIDE in fired(compiled, "write", {"path": "docs/a.md"})
    assert OUTSIDE in fired(compiled, "write", {"path": "/repo/README.md"})


def test_default_root_is_the_process_cwd_at_compile_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    compiled = compile_packs(["coding-standard"])
    monkeypatch.chdir(os.sep)
    assert OUTSIDE not in fired(compiled, "write", {"path": "a.py"})
    assert OUTSIDE not in fired(compiled, "write", {"path": str(tmp_path / "b" / "c.py")})
    assert OUTSIDE in fired(compiled, "write", {"path": str(tmp_path.parent / "x.py")})
    assert compiled.refs == ({"id": "coding-standard", "version": 1},)


def test_the_filesystem_root_as_a_root_allows_every_absolute_path() -> None:
    compiled = compile_packs([{"id": "coding-standard", "options": {"roots": ["/"]}}])
    assert OUTSIDE not in fired(compiled, "write", {"path": "/etc/hosts"})
