"""The house rules, held on every distribution of the family (the kernel, the stores, each
plugin), each checker fed a synthetic violation to show that it fails.

- no module-level ``__getattr__`` (a shim that resolves names lazily hides where they live);
- no package re-exporting a name defined in another package of the kernel (a moved name keeps
  one public home; only the faces, ``prism_core`` and ``prism_core.stores``, gather names
  from several packages);
- every import inside a function or class is a deferred import and says why, in a comment
  beginning ``# Deferred:`` right above it; a ``# Deferred:`` comment with no import under it
  is stale;
- every public module-level class and function, and every public method of a public class,
  has a docstring (``@overload`` signatures aside).

Import cycles and the size bounds (module ≤ 600 lines, class ≤ 500) are checked on every
distribution by ``test_architecture.py``, whose helpers this module reuses.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.core.test_architecture import (
    FAMILY_ROOTS,
    MAX_CLASS_LINES,
    MAX_MODULE_LINES,
    PACKAGE_ROOT,
    _write,
    find_cycles,
    import_graph,
    module_files,
    oversized,
)

#: The packages that gather names from several packages of the kernel: the package root
#: and the store authors' face (both bound by the API reference).
FACES = frozenset({"prism_core", "prism_core.stores"})
#: The comment that opens the reason for a deferred import.
DEFERRED = "# Deferred:"


def _target(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an ``import from`` statement in ``module`` names."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def getattr_shims(root: Path) -> list[str]:
    """Modules under package ``root`` that define a module-level ``__getattr__`` (a function
    or an assignment), as ``module:line``."""
    found: list[str] = []
    for module, (path, _) in module_files(root).items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in tree.body:
            defines = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and (
                node.name == "__getattr__"
            )
            assigns = isinstance(node, ast.Assign | ast.AnnAssign) and any(
                isinstance(target, ast.Name) and target.id == "__getattr__"
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            )
            if defines or assigns:
                found.append(f"{module}:{node.lineno}")
    return found


def _exported(tree: ast.Module) -> set[str] | None:
    """The names of a module's literal ``__all__``, or ``None`` without one."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            return {str(name) for name in ast.literal_eval(node.value)}
    return None


def moved_names(
    root: Path, kernel: str = PACKAGE_ROOT.name, faces: frozenset[str] = FACES
) -> list[str]:
    """Names a package ``__init__`` under ``root`` exports (its ``__all__``, else every name it
    imports) that it imports from a module of the kernel or of ``root`` outside the package
    itself, as ``package: name from module``; the ``faces`` are exempt."""
    found: list[str] = []
    for module, (path, is_package) in module_files(root).items():
        if not is_package or module in faces:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        exported = _exported(tree)
        for node in tree.body:
            if not isinstance(node, ast.ImportFrom):
                continue
            target = _target(module, is_package, node)
            inside = target == module or target.startswith(f"{module}.")
            if inside or target.split(".")[0] not in {root.name, kernel}:
                continue
            for alias in node.names:
                name = alias.asname or alias.name
                if exported is None or name in exported:
                    found.append(f"{module}: {name} from {target}")
    return found


def _comment_above(lines: list[str], lineno: int) -> list[str]:
    """The block of comment lines right above line ``lineno`` (1-based), top first."""
    block: list[str] = []
    index = lineno - 2
    while index >= 0 and lines[index].strip().startswith("#"):
        block.insert(0, lines[index].strip())
        index -= 1
    return block


def _nested_imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement inside a function or a class body (at any depth)."""

    def walk(node: ast.AST, nested: bool) -> Iterator[ast.Import | ast.ImportFrom]:
        for child in ast.iter_child_nodes(node):
            if nested and isinstance(child, ast.Import | ast.ImportFrom):
                yield child
            scopes = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda
            yield from walk(child, nested or isinstance(child, scopes))

    yield from walk(tree, False)


def deferred_import_gaps(root: Path) -> list[str]:
    """Imports inside a function or class under ``root`` whose comment block right above
    does not begin with ``# Deferred:`` (an import of the same block, blank lines between
    groups included, counts as marked when the first import of the block is), and
    ``# Deferred:`` comments with no import under them, as ``module:line: problem``."""
    gaps: list[str] = []
    for module, (path, _) in module_files(root).items():
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        tree = ast.parse(source, str(path))
        marked: set[int] = set()
        imports = sorted(_nested_imports(tree), key=lambda node: node.lineno)
        ends = {node.end_lineno: node for node in imports}
        for node in imports:
            block = _comment_above(lines, node.lineno)
            above = node.lineno - 1
            while above > 0 and not lines[above - 1].strip():
                above -= 1  # the blank line between two groups of one block
            follows = ends.get(above)
            if block and block[0].startswith(DEFERRED):
                marked.add(node.lineno)
            elif not block and follows is not None and follows.lineno in marked:
                marked.add(node.lineno)  # the next import of a marked block
            else:
                gaps.append(f"{module}:{node.lineno}: unmarked deferred import")
        for number, line in enumerate(lines, 1):
            if not line.strip().startswith(DEFERRED):
                continue
            below = number
            while below < len(lines) and lines[below].strip().startswith("#"):
                below += 1
            if below + 1 not in marked:
                gaps.append(f"{module}:{number}: '# Deferred:' with no deferred import under it")
    return gaps


def _is_overload(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(
        (isinstance(d, ast.Name) and d.id == "overload")
        or (isinstance(d, ast.Attribute) and d.attr == "overload")
        for d in node.decorator_list
    )


def public_docstring_gaps(root: Path) -> list[str]:
    """Public module-level classes and functions under ``root``, and public methods of public
    classes, without a docstring (``@overload`` signatures aside), as ``module.name``."""
    gaps: list[str] = []
    functions = ast.FunctionDef | ast.AsyncFunctionDef
    for module, (path, _) in module_files(root).items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in tree.body:
            if not isinstance(node, functions | ast.ClassDef) or node.name.startswith("_"):
                continue
            if isinstance(node, functions) and _is_overload(node):
                continue
            if not ast.get_docstring(node):
                gaps.append(f"{module}.{node.name}")
            if isinstance(node, ast.ClassDef):
                gaps.extend(
                    f"{module}.{node.name}.{member.name}"
                    for member in node.body
                    if isinstance(member, functions)
                    and not member.name.startswith("_")
                    and not _is_overload(member)
                    and not ast.get_docstring(member)
                )
    return gaps


# -- every distribution -----------------------------------------------------------------------


@pytest.mark.parametrize("root", FAMILY_ROOTS, ids=lambda root: root.name)
def test_no_distribution_has_a_getattr_shim(root: Path) -> None:
    """No module of any distribution defines a module-level ``__getattr__``."""
    assert getattr_shims(root) == []


@pytest.mark.parametrize("root", FAMILY_ROOTS, ids=lambda root: root.name)
def test_no_package_reexports_a_moved_name(root: Path) -> None:
    """No package of any distribution exports a name it imports from another package of
    the kernel or of its own distribution (the faces aside): each name has one home."""
    assert moved_names(root) == []


@pytest.mark.parametrize("root", FAMILY_ROOTS, ids=lambda root: root.name)
def test_every_deferred_import_says_why(root: Path) -> None:
    """Every import inside a function or class of any distribution is marked
    ``# Deferred:`` with its reason, and no such comment is stale."""
    assert deferred_import_gaps(root) == []


@pytest.mark.parametrize("root", FAMILY_ROOTS, ids=lambda root: root.name)
def test_every_public_name_has_a_docstring(root: Path) -> None:
    """Every public class, function and public method of any distribution says what it is."""
    assert public_docstring_gaps(root) == []


# -- the checkers, on synthetic violations ------------------------------------------------------


def test_getattr_check_flags_a_module_shim(tmp_path: Path) -> None:
    """A module ``__getattr__`` (defined or assigned) is reported; a class's is not."""
    root = _write(
        tmp_path,
        {
            "pkg/__init__.py": "def __getattr__(name):\n    raise AttributeError(name)\n",
            "pkg/_a.py": "__getattr__ = lambda name: None\n",
            "pkg/_b.py": "class C:\n    def __getattr__(self, name):\n        return 1\n",
        },
    )
    assert getattr_shims(root) == ["pkg:1", "pkg._a:1"]


def test_moved_name_check_flags_a_reexport_from_another_package(tmp_path: Path) -> None:
    """A package exporting a name of a sibling package is reported (whatever ``__all__``
    holds when it has none); its own submodules' names, names it imports but does not
    export, and the faces are not."""
    root = _write(
        tmp_path,
        {
            "pkg/__init__.py": "from .low import Entry\n__all__ = ('Entry',)\n",
            "pkg/low/__init__.py": "from ._entries import Entry\n__all__ = ('Entry',)\n",
            "pkg/low/_entries.py": "class Entry: ...\n",
            "pkg/high/__init__.py": (
                "from ..low import Entry\nfrom ..low._entries import Entry as Old\n"
                "from ._own import Own\n__all__ = ('Entry', 'Old', 'Own')\n"
            ),
            "pkg/high/_own.py": "Own = 1\n",
            "pkg/quiet/__init__.py": "from ..low import Entry\n__all__ = ()\n",
            "pkg/bare/__init__.py": "from ..low import Entry\n",
        },
    )
    assert sorted(moved_names(root, kernel="pkg", faces=frozenset({"pkg"}))) == [
        "pkg.bare: Entry from pkg.low",
        "pkg.high: Entry from pkg.low",
        "pkg.high: Old from pkg.low._entries",
    ]


def test_moved_name_check_counts_imports_of_the_kernel_from_another_distribution(
    tmp_path: Path,
) -> None:
    """A plugin package re-exporting a kernel name is reported; its own names are not."""
    root = _write(
        tmp_path,
        {
            "pkg/__init__.py": (
                "from prism_core.stores import StorePair\nfrom ._own import Own\n"
                "__all__ = ('Own', 'StorePair')\n"
            ),
            "pkg/_own.py": "Own = 1\n",
        },
    )
    assert moved_names(root) == ["pkg: StorePair from prism_core.stores"]


def test_deferred_import_check_flags_unmarked_imports_and_stale_comments(
    tmp_path: Path,
) -> None:
    """An import in a function or method without ``# Deferred:`` above it is reported, a
    marked block of imports is not, and a ``# Deferred:`` comment over no import is."""
    root = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/mod.py": (
                "import json\n"
                "def ok():\n"
                "    # Deferred: an optional dependency, installed with the extra.\n"
                "    # It is loaded only here.\n"
                "    import redis\n"
                "\n"
                "    from . import other\n"
                "def bare():\n"
                "    import asyncio\n"
                "def wrong():\n"
                "    # Loaded late.\n"
                "    import ssl\n"
                "class C:\n"
                "    def m(self):\n"
                "        from . import other\n"
                "def stale():\n"
                "    # Deferred: nothing is imported here any more.\n"
                "    return json.dumps(1)\n"
            ),
            "pkg/other.py": "",
        },
    )
    assert deferred_import_gaps(root) == [
        "pkg.mod:9: unmarked deferred import",
        "pkg.mod:12: unmarked deferred import",
        "pkg.mod:15: unmarked deferred import",
        "pkg.mod:17: '# Deferred:' with no deferred import under it",
    ]


def test_docstring_check_flags_public_names_without_one(tmp_path: Path) -> None:
    """A public function, class and method without a docstring are reported; private names,
    dunders, methods of private classes and ``@overload`` signatures are not."""
    root = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/mod.py": (
                "from typing import overload\n"
                "def bare(): ...\n"
                "def said():\n    'Says.'\n"
                "def _private(): ...\n"
                "@overload\ndef over(x: int) -> int: ...\n"
                "def over(x):\n    'The implementation.'\n    return x\n"
                "class Open:\n"
                "    'A class.'\n"
                "    def method(self): ...\n"
                "    def _helper(self): ...\n"
                "    def __init__(self): ...\n"
                "class Silent: ...\n"
                "class _Hidden:\n    def method(self): ...\n"
            ),
        },
    )
    assert public_docstring_gaps(root) == ["pkg.mod.bare", "pkg.mod.Open.method", "pkg.mod.Silent"]


def test_the_shared_checkers_fail_on_a_cycle_and_a_long_module(tmp_path: Path) -> None:
    """The cycle and size checks this module relies on fail on a synthetic violation in a
    distribution-shaped package (a module-level circle, a module and a class over bounds)."""
    root = (
        _write(
            tmp_path,
            {
                "plugin/__init__.py": "from ._a import A\n",
                "plugin/_a.py": "from ._b import B\nA = 1\n",
                "plugin/_b.py": "from ._a import A\nB = 2\n",
                "plugin/_long.py": "x = 1\n" * (MAX_MODULE_LINES + 1),
                "plugin/_big.py": "class Big:\n" + "    x = 1\n" * MAX_CLASS_LINES,
            },
        ).parent
        / "plugin"
    )
    assert find_cycles(import_graph(root)) == [["plugin._a", "plugin._b"]]
    assert len(oversized(root)) == 2
