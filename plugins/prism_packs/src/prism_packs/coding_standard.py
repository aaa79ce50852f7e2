"""``coding-standard``: keep file edits inside the workspace and leave the tests alone.

Options: ``cwd`` (default: the process's working directory when the pack compiles) and
``roots`` (at most 16 directories, resolved against ``cwd``; default: ``cwd`` alone). Paths
are compared lexically after normalisation, so ``a/../../etc`` is outside ``a``; symlinks
are not followed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from prism_core.guardrails import GuardrailPack, PackRule, PackRuleContext

__all__ = (
    "CODING_STANDARD",
    "FILE_TOOLS",
    "MAX_ROOTS",
    "PATH_ARGUMENTS",
    "outside_every_root",
    "validate_options",
)

#: The tools whose calls change files.
FILE_TOOLS = ("write", "edit", "delete", "move")
#: The arguments of those tools that name a path (a string or a list of strings).
PATH_ARGUMENTS = ("path", "paths", "from", "to")
MAX_ROOTS = 16

# A __tests__/test/tests/spec/specs directory segment, or a foo.test.ts / bar.spec.jsx file.
_TEST_PATH = (
    r"(?i)(?:^|[/\\])(?:__tests__|tests?|specs?)(?:[/\\]|$)"
    r"|\.(?:test|spec)\.[cm]?[jt]sx?$"
)


def validate_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Resolve ``cwd`` and ``roots`` to absolute, normalised paths."""
    unknown = sorted(set(options) - {"cwd", "roots"})
    if unknown:
        raise ValueError(f"unknown options {unknown}; coding-standard takes cwd and roots")
    cwd = options.get("cwd", os.getcwd())
    if not isinstance(cwd, str) or not cwd:
        raise ValueError("cwd must be a non-empty path string")
    cwd = os.path.abspath(cwd)
    roots = options.get("roots", [cwd])
    if (
        isinstance(roots, str)
        or not isinstance(roots, Sequence)
        or not 1 <= len(roots) <= MAX_ROOTS
        or not all(isinstance(root, str) and root for root in roots)
    ):
        raise ValueError(f"roots must be a list of 1..{MAX_ROOTS} non-empty path strings")
    return {"cwd": cwd, "roots": [os.path.normpath(os.path.join(cwd, root)) for root in roots]}


def _path_values(args: Mapping[str, Any]) -> Iterator[Any]:
    for name in PATH_ARGUMENTS:
        value = args.get(name)
        if isinstance(value, list):
            yield from value
        elif value is not None:
            yield value


def _inside(path: Any, cwd: str, roots: Sequence[str]) -> bool:
    if not isinstance(path, str):
        return False  # a path we cannot read is not a path we can vouch for
    target = os.path.normpath(os.path.join(cwd, path))
    return any(target == root or target.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def outside_every_root(args: dict[str, Any], ctx: PackRuleContext) -> bool:
    """Whether any path argument of the call lies outside every configured root."""
    cwd, roots = ctx.options["cwd"], ctx.options["roots"]
    return any(not _inside(path, cwd, roots) for path in _path_values(args))


CODING_STANDARD = GuardrailPack(
    id="coding-standard",
    version=1,
    description="Keeps file edits inside the workspace roots and test files read-only.",
    validate_options=validate_options,
    rules=(
        PackRule(
            id="no-unrelated-file-edits",
            tool=FILE_TOOLS,
            deny=outside_every_root,
            reason="File edits are restricted to the configured workspace roots",
        ),
        PackRule(
            id="no-test-rewrites",
            tool=FILE_TOOLS,
            arg_path=PATH_ARGUMENTS,
            pattern=_TEST_PATH,
            reason="Test files are read-only under this pack",
        ),
    ),
)
