"""The kernel's shape: no import cycles, layers that point one way, and modules of a readable size.

The import graph is built from source with :mod:`ast`, one node per module of ``prism_core``
(``pkg/__init__.py`` is the node ``pkg``). Its rules:

- Every import statement is an edge, wherever it is: at module level, inside a function, and
  under ``if TYPE_CHECKING:``. A name used only for typing still ties two modules together.
- Relative imports are resolved against the importing module (``from ..durable import x`` in
  ``prism_core.runs._state`` names ``prism_core.durable``).
- An edge goes to the most specific module the statement names: ``from .pkg import name`` is an
  edge to ``pkg.name`` when that is a module, else to ``pkg`` itself (its ``__init__``).
- A package ``__init__`` that re-exports its submodules has an edge to each of them, so
  importing *from a package* depends on everything the package re-exports: a module that does
  ``from ..guardrails import X`` closes a cycle if anything ``guardrails/__init__`` re-exports
  imports that module back, and it reaches every layer the package's ``__init__`` reaches.
- Importing a submodule does not add an edge to its parent package's ``__init__``, although
  Python runs it first: every ``pkg._x`` would otherwise depend on ``pkg``, which re-exports
  ``pkg._x``, and no package could re-export anything. A submodule that imports its own
  package (``from . import name`` where ``name`` is not a module) does get that edge, and it is
  a cycle with the re-export.

Any cycle in this graph fails :func:`test_prism_core_has_no_import_cycle`. The layers are
:data:`LAYERS`, top to bottom; every chain of imports from a module, followed through package
``__init__`` modules, stays in its layer or goes down (:func:`test_layers_point_down`). There
is no exemption list: a module that needs something of an upper layer declares the narrow
``Protocol`` it uses, in its own room. ``docs/architecture.md`` lists the same layers, in the
same order (:func:`test_architecture_page_lists_the_layers_of_the_test`).
"""

from __future__ import annotations

import ast
import fnmatch
import importlib
import inspect
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

import prism_core

#: Size bounds of the kernel; the conformance suites in ``testing/`` are exempt.
MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 500

#: The classes above the run loop: agents and the session object.
UPPER = ("prism_core.agents", "prism_core.sessions._session")

#: The kernel's layers, top to bottom, as module paths relative to the package (``runs/`` is
#: the package and everything in it, ``pkg/__init__`` a package's own module, ``*`` and ``?``
#: are globs). A module is in the first layer that matches it; the last layer takes the rest.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__init__", "stores/", "testing/"),
    ("agents",),
    ("sessions/",),
    ("workers/",),
    ("resume/",),
    ("runs/",),
    ("hookspecs", "plugins"),
    ("durable/", "_agent_config"),
    ("records/",),
    ("*",),
)

#: The rooms of the run loop, durable runs and guardrails: each module's docstring says what
#: it owns and what it must not touch.
ROOMS = ("resume/", "runs/", "durable/", "records/", "guardrails/")

PACKAGE_ROOT = Path(prism_core.__file__).parent
ARCHITECTURE_PAGE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
#: The packages whose every module the page's table of rooms lists (their ``__init__`` aside).
MAPPED = ("resume/", "runs/", "durable/", "records/", "guardrails/", "sessions/", "workers/")


def module_files(root: Path) -> dict[str, tuple[Path, bool]]:
    """``{module name: (path, is_package)}`` for every ``.py`` file under package ``root``."""
    modules: dict[str, tuple[Path, bool]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        modules[".".join(parts)] = (path, is_package)
    return modules


def _named(
    module: str, is_package: bool, node: ast.Import | ast.ImportFrom, known: Mapping[str, object]
) -> Iterator[str]:
    """The modules one import statement names (see the module docstring for the rules)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
        return
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join([*base, node.module] if node.module else base)
    else:
        target = node.module or ""
    for alias in node.names:
        candidate = f"{target}.{alias.name}"
        yield candidate if candidate in known else target


def import_graph(root: Path) -> dict[str, set[str]]:
    """The import graph of the package at ``root``: module → modules of the package it imports."""
    modules = module_files(root)
    graph: dict[str, set[str]] = {}
    for module, (path, is_package) in modules.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for name in _named(module, is_package, node, modules):
                # ``import a.b.c`` of a name inside a module resolves to that module.
                while name not in modules and "." in name:
                    name = name.rsplit(".", 1)[0]
                if name in modules and name != module:
                    edges.add(name)
        graph[module] = edges
    return graph


def find_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (each one a cycle or a
    knot of cycles), as sorted lists; empty when the graph is acyclic."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for node in sorted(graph):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
    return cycles


def oversized(root: Path) -> list[str]:
    """Modules over :data:`MAX_MODULE_LINES` and classes over :data:`MAX_CLASS_LINES` under
    ``root``, skipping ``testing/``."""
    problems: list[str] = []
    for module, (path, _) in module_files(root).items():
        if ".testing" in f".{module}":
            continue
        source = path.read_text(encoding="utf-8")
        lines = len(source.splitlines())
        if lines > MAX_MODULE_LINES:
            problems.append(f"{module}: {lines} lines (limit {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef):
                assert node.end_lineno is not None
                length = node.end_lineno - node.lineno + 1
                if length > MAX_CLASS_LINES:
                    problems.append(
                        f"{module}.{node.name}: {length} lines (limit {MAX_CLASS_LINES})"
                    )
    return problems


def module_paths(root: Path) -> dict[str, str]:
    """``{module name: path}``, the path relative to the package at ``root`` without ``.py``:
    ``prism_core.resume._api`` is ``durable/_api``, the package ``durable`` is
    ``durable/__init__``."""
    return {
        module: path.relative_to(root).with_suffix("").as_posix()
        for module, (path, _) in module_files(root).items()
    }


def matches(path: str, pattern: str) -> bool:
    """Whether module ``path`` (see :func:`module_path`) is one :data:`LAYERS` names."""
    if pattern.endswith("/"):
        return path.startswith(pattern)
    return fnmatch.fnmatchcase(path, pattern)


def layer_of(path: str, layers: tuple[tuple[str, ...], ...] = LAYERS) -> int:
    """The index of the first layer matching ``path`` (0 is the top); -1 when none does."""
    for index, patterns in enumerate(layers):
        if any(matches(path, pattern) for pattern in patterns):
            return index
    return -1


def layer_map(root: Path, layers: tuple[tuple[str, ...], ...] = LAYERS) -> dict[str, int]:
    """``{module name: layer index}`` for the package at ``root``."""
    return {module: layer_of(path, layers) for module, path in module_paths(root).items()}


def upward_chains(graph: Mapping[str, set[str]], layer: Mapping[str, int]) -> list[str]:
    """Every chain of imports that leads from a module to one of a higher layer, followed
    through any modules (package ``__init__`` modules included), each as ``a -> b -> c``; a
    chain stops at the first module above its start."""
    chains: list[str] = []
    for start in sorted(graph):
        came_from: dict[str, str | None] = {start: None}
        todo = [start]
        while todo:
            module = todo.pop(0)
            for target in sorted(graph[module]):
                if target in came_from:
                    continue
                came_from[target] = module
                if layer[target] < layer[start]:
                    chain = [target]
                    while (step := came_from[chain[-1]]) is not None:
                        chain.append(step)
                    chains.append(" -> ".join(reversed(chain)))
                else:
                    todo.append(target)
    return chains


def docstring_gaps(root: Path, rooms: tuple[str, ...] = ROOMS) -> list[str]:
    """Modules under ``root`` without a module docstring, and modules of ``rooms`` whose
    docstring does not say what they must not touch (the words ``must not``)."""
    gaps: list[str] = []
    for module, path in module_paths(root).items():
        source = (root / f"{path}.py").read_text(encoding="utf-8")
        doc = ast.get_docstring(ast.parse(source))
        if not doc or not doc.strip():
            gaps.append(f"{module}: no module docstring")
        elif path.startswith(rooms) and "must not" not in " ".join(doc.split()).lower():
            gaps.append(f"{module}: the docstring does not say what it must not touch")
    return gaps


def _section(page: str, title: str) -> str:
    start = page.index(f"\n## {title}\n")
    end = page.find("\n## ", start + 1)
    return page[start : end if end >= 0 else len(page)]


def _table_rows(section: str) -> list[list[str]]:
    rows = [line.strip().strip("|").split("|") for line in section.splitlines()]
    return [row for row in rows if len(row) > 1 and not set(row[0].strip()) <= {"-", " "}][1:]


def page_layers(page: str) -> list[tuple[str, ...]]:
    """The layers the page's "The layers" table lists, top to bottom, as module patterns."""
    return [
        tuple(re.findall(r"`([^`]+)`", row[1])) for row in _table_rows(_section(page, "The layers"))
    ]


def page_rooms(page: str) -> list[str]:
    """The modules the page's "The rooms" table lists, as module paths; a bare name in a cell
    (``_stream.py`` after ``runs/_driver.py``) is in the folder of the name before it."""
    listed: list[str] = []
    for row in _table_rows(_section(page, "The rooms")):
        folder = ""
        for name in re.findall(r"`([^`]+)`", row[0]):
            if "/" in name:
                folder = name.rsplit("/", 1)[0] + "/"
            else:
                name = folder + name
            listed.append(name.removesuffix(".py"))
    return listed


def page_references(page: str) -> list[str]:
    """Every module path the page names in code spans anywhere (``durable/_run.py``)."""
    folders = "|".join(re.escape(folder.rstrip("/")) for folder in MAPPED)
    spans = re.findall(rf"`((?:{folders})/_[A-Za-z0-9_]+)(?:\.py)?`", page)
    return sorted(set(spans))


def page_functions(page: str) -> list[tuple[str, str]]:
    """``(module, name)`` for each ``_module.name`` the page cites (``_request.x``)."""
    return sorted(set(re.findall(r"`(_[a-z_]+)\.(?!py`)([a-z_]+)(?:\(\))?`", page)))


def _write(root: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


# -- the kernel -------------------------------------------------------------------------------


def test_prism_core_has_no_import_cycle() -> None:
    """No cycle among prism_core's modules, counting TYPE_CHECKING and function-level imports."""
    cycles = find_cycles(import_graph(PACKAGE_ROOT))
    assert cycles == [], "import cycles in prism_core:\n" + "\n".join(
        " <-> ".join(cycle) for cycle in cycles
    )


def test_every_module_has_a_layer() -> None:
    """Each module of prism_core is in exactly the layer :data:`LAYERS` gives it, and every
    pattern there names a module."""
    paths = list(module_paths(PACKAGE_ROOT).values())
    assert [path for path in paths if layer_of(path) < 0] == []
    unused = [p for layer in LAYERS for p in layer if not any(matches(x, p) for x in paths)]
    assert unused == []


def test_layers_point_down() -> None:
    """No chain of imports from a module reaches a higher layer, TYPE_CHECKING and
    function-level imports and package ``__init__`` re-exports included."""
    assert upward_chains(import_graph(PACKAGE_ROOT), layer_map(PACKAGE_ROOT)) == []


def test_lower_layers_do_not_name_upper_ones() -> None:
    """runs/, durable/ and guardrails/ never reach agents or AgentSession, not even for
    typing; runs/ imports durable/ only via its boundary."""
    graph = import_graph(PACKAGE_ROOT)
    lower = ("prism_core.runs", "prism_core.durable", "prism_core.guardrails")
    wrong: list[str] = []
    for module, edges in sorted(graph.items()):
        if not module.startswith(lower):
            continue
        seen: set[str] = set()
        todo = [module]
        while todo:
            current = todo.pop()
            if current not in seen:
                seen.add(current)
                todo.extend(graph[current])
        wrong.extend(f"{module} reaches {target}" for target in sorted(seen) if target in UPPER)
        if module.startswith("prism_core.runs"):
            wrong.extend(
                f"{module} -> {target}"
                for target in sorted(edges)
                if target.startswith("prism_core.durable") and target != "prism_core.durable"
            )
    assert wrong == []


def test_the_durable_boundary_does_not_reach_the_run_loop() -> None:
    """What runs/ imports of durable/ never imports runs/, sessions or agents back, even
    through other modules."""
    graph = import_graph(PACKAGE_ROOT)
    seen: set[str] = set()
    todo = ["prism_core.durable"]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph[module])
    above = sorted(m for m in seen if m.startswith(("prism_core.runs", *UPPER)))
    assert above == []


def test_no_module_or_class_exceeds_the_size_bounds() -> None:
    """No prism_core module over 600 lines and no class over 500 (testing/ excepted)."""
    assert oversized(PACKAGE_ROOT) == []


def test_every_module_says_what_it_owns() -> None:
    """Every module of prism_core has a module docstring; in runs/, durable/ and guardrails/
    it also says what the module must not touch."""
    assert docstring_gaps(PACKAGE_ROOT) == []


def test_architecture_page_lists_the_layers_of_the_test() -> None:
    """docs/architecture.md lists exactly :data:`LAYERS`, in the same order."""
    assert page_layers(ARCHITECTURE_PAGE.read_text(encoding="utf-8")) == list(LAYERS)


def test_architecture_page_lists_every_room_and_only_rooms_that_exist() -> None:
    """Every module the page names exists; its table of rooms lists every module of runs/,
    durable/, guardrails/ and sessions/, once; each ``_module.function`` it cites exists."""
    page = ARCHITECTURE_PAGE.read_text(encoding="utf-8")
    paths = module_paths(PACKAGE_ROOT)
    existing = set(paths.values())
    rooms = page_rooms(page)
    assert [name for name in rooms + page_references(page) if name not in existing] == []
    assert sorted(name for name in rooms if rooms.count(name) > 1) == []
    expected = {p for p in existing if p.startswith(MAPPED) and not p.endswith("__init__")}
    assert sorted(expected - set(rooms)) == []
    defined: dict[str, set[str]] = {}
    for path in existing:
        if path.startswith(MAPPED):
            tree = ast.parse((PACKAGE_ROOT / f"{path}.py").read_text(encoding="utf-8"))
            names = defined.setdefault(path.rsplit("/", 1)[-1], set())
            names.update(
                node.name
                for node in tree.body
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            )
    cited = page_functions(page)
    assert cited != []
    assert [f"{m}.{n}" for m, n in cited if n not in defined.get(m, set())] == []


#: The root of every distribution's import package in this repository.
REPOSITORY = Path(__file__).resolve().parents[2]
FAMILY_ROOTS = tuple(
    sorted(
        [
            PACKAGE_ROOT,
            REPOSITORY / "prism_store_sql" / "src" / "prism_store_sql",
            REPOSITORY / "prism_store_redis" / "src" / "prism_store_redis",
            *(p.parent for p in REPOSITORY.glob("plugins/*/src/*/__init__.py")),
        ]
    )
)
#: Top-level imports the kernel must not make: the family's other distributions and the
#: drivers they wrap.
FOREIGN = frozenset(
    {root.name for root in FAMILY_ROOTS if root != PACKAGE_ROOT}
    | {"sqlalchemy", "asyncpg", "psycopg", "redis", "celery", "starlette", "uvicorn"}
)


def face_and_foreign_imports(root: Path, foreign: frozenset[str] = FOREIGN) -> list[str]:
    """Imports under package ``root`` of the package face itself (``from prism_core import``,
    ``from .. import name`` reaching the root, ``import prism_core``) or of a ``foreign``
    top-level package, as ``module: statement``; the face's own ``__init__`` is exempt."""
    problems: list[str] = []
    face = root.name
    for module, (path, is_package) in module_files(root).items():
        if module == face:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    top = alias.name.split(".")[0]
                    if alias.name == face or top in foreign:
                        problems.append(f"{module}: import {alias.name}")
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join([*base, node.module] if node.module else base)
                else:
                    target = node.module or ""
                if target == face or target.split(".")[0] in foreign:
                    names = ", ".join(alias.name for alias in node.names)
                    problems.append(f"{module}: from {target} import {names}")
    return problems


@pytest.mark.parametrize("root", FAMILY_ROOTS, ids=lambda root: root.name)
def test_no_distribution_has_an_import_cycle(root: Path) -> None:
    """No cycle among the modules of any distribution of the family, counted as for the
    kernel (TYPE_CHECKING, function-level and re-export edges included)."""
    cycles = find_cycles(import_graph(root))
    assert cycles == [], f"import cycles in {root.name}:\n" + "\n".join(
        " <-> ".join(cycle) for cycle in cycles
    )


@pytest.mark.parametrize("root", FAMILY_ROOTS, ids=lambda root: root.name)
def test_every_distribution_keeps_the_size_bounds(root: Path) -> None:
    """No module of any distribution over 600 lines and no class over 500 (the kernel's
    conformance suites under ``testing/`` excepted), so the house rule holds outside the
    kernel too."""
    assert oversized(root) == []


@pytest.mark.parametrize("root", FAMILY_ROOTS, ids=lambda root: root.name)
def test_every_distribution_module_says_what_it_is(root: Path) -> None:
    """Every module of every distribution has a module docstring."""
    assert docstring_gaps(root, ()) == []


@pytest.mark.parametrize("root", FAMILY_ROOTS, ids=lambda root: root.name)
def test_every_distribution_documents_its_public_names(root: Path) -> None:
    """Every class and function a distribution exports (its ``__all__``) has a docstring,
    and ``__all__`` is a tuple of names that exist."""
    package = importlib.import_module(root.name)
    names = getattr(package, "__all__", None)
    assert isinstance(names, tuple), root.name
    undocumented = [
        name
        for name in names
        if (inspect.isclass(getattr(package, name)) or inspect.isfunction(getattr(package, name)))
        and not inspect.getdoc(getattr(package, name))
    ]
    assert undocumented == []


def test_the_kernel_imports_neither_its_face_nor_another_distribution() -> None:
    """No kernel module imports ``prism_core`` itself (it is the face, not a room) or another
    distribution of the family or a store driver."""
    assert face_and_foreign_imports(PACKAGE_ROOT) == []


def session_private_reaches(root: Path, home: str = "sessions/") -> list[str]:
    """Attribute reads ``<…session>._name`` (a private member of something named ``session``)
    in modules under ``root`` outside the ``home`` folder, as ``module:line: expression``."""
    found: list[str] = []
    for module, path in module_paths(root).items():
        if path.startswith(home):
            continue
        tree = ast.parse((root / f"{path}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
                continue
            if node.attr.startswith("__"):
                continue
            owner = node.value
            name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
            if name == "session" or name.endswith("_session"):
                found.append(f"{module}:{node.lineno}: {ast.unparse(node)}")
    return sorted(found)


def test_no_room_reaches_into_a_session() -> None:
    """Outside ``sessions/``, no kernel module touches a session's private members: runs use
    what the session lends them (transcript, broadcaster, steers, run slot)."""
    assert session_private_reaches(PACKAGE_ROOT) == []


#: The kernel modules a store distribution may import: the store author's face and the public
#: modules it names (the store protocols, helpers and base classes all come from the face).
STORE_FACES = frozenset(
    {"prism_core.stores", "prism_core.errors", "prism_core.codec", "prism_core.hookspecs"}
)
#: The family's distributions other than the kernel.
OTHER_ROOTS = tuple(root for root in FAMILY_ROOTS if root != PACKAGE_ROOT)
#: The store distributions held to :data:`STORE_FACES`.
STORE_ROOTS = tuple(root for root in FAMILY_ROOTS if root.name.startswith("prism_store_"))


def kernel_imports(root: Path, kernel: Path = PACKAGE_ROOT) -> list[tuple[str, str]]:
    """``(module, kernel module)`` for every import of a ``prism_core`` module under package
    ``root``, wherever the statement is; ``from prism_core import codec`` names
    ``prism_core.codec``, ``from prism_core import PrismError`` names ``prism_core``."""
    known = module_files(kernel)
    found: list[tuple[str, str]] = []
    for module, (path, _) in module_files(root).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [
                    f"{node.module}.{alias.name}"
                    if f"{node.module}.{alias.name}" in known
                    else node.module
                    for alias in node.names
                ]
            else:
                continue
            found.extend((module, name) for name in names if name.split(".")[0] == kernel.name)
    return found


@pytest.mark.parametrize("root", OTHER_ROOTS, ids=lambda root: root.name)
def test_no_distribution_imports_a_private_kernel_module(root: Path) -> None:
    """No other distribution of the family imports a private module of the kernel (one with a
    ``_`` name anywhere in its path): the kernel may move those at any time."""
    private = [
        f"{module}: {name}"
        for module, name in kernel_imports(root)
        if any(part.startswith("_") for part in name.split(".")[1:])
    ]
    assert private == []


@pytest.mark.parametrize("root", STORE_ROOTS, ids=lambda root: root.name)
def test_store_distributions_import_the_kernel_only_through_its_faces(root: Path) -> None:
    """The store distributions import the kernel from :data:`STORE_FACES` only: the
    protocols, capabilities, records, helpers and base classes from ``prism_core.stores``."""
    outside = [
        f"{module}: {name}" for module, name in kernel_imports(root) if name not in STORE_FACES
    ]
    assert outside == []


def test_kernel_imports_are_found_wherever_they_are(tmp_path: Path) -> None:
    """Imports of kernel modules are found at module level and inside functions, and
    ``from prism_core import name`` resolves to the submodule when ``name`` is one."""
    files = ("__init__.py", "codec.py", "_echo.py", "stores/__init__.py")
    _write(tmp_path, {f"prism_core/{name}": "" for name in files})
    kernel = tmp_path / "prism_core"
    store = _write(
        tmp_path,
        {
            "pkg/__init__.py": "from prism_core.stores import echo\n",
            "pkg/low.py": (
                "from prism_core import codec, PrismError\n"
                "def f():\n    from prism_core._echo import echo\n"
            ),
        },
    )
    assert sorted(kernel_imports(store, kernel)) == [
        ("pkg", "prism_core.stores"),
        ("pkg.low", "prism_core"),
        ("pkg.low", "prism_core._echo"),
        ("pkg.low", "prism_core.codec"),
    ]


def test_layers_are_folders() -> None:
    """Every layer below the face is made of whole folders or top-level modules: no pattern
    names part of a folder, so a folder's place in the table is its layer."""
    partial = [
        pattern
        for layer in LAYERS[1:]
        for pattern in layer
        if "/" in pattern.rstrip("/") or ("*" in pattern and pattern != "*")
    ]
    assert partial == []
    folders = [p.rstrip("/") for layer in LAYERS for p in layer if p.endswith("/")]
    assert len(folders) == len(set(folders))


# -- the checks themselves --------------------------------------------------------------------


def test_cycle_finder_reports_a_cycle_in_a_synthetic_graph() -> None:
    """A three-module loop is reported once, with every member; the module hanging off it
    and an acyclic graph are not."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert find_cycles(graph) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_graph_counts_type_checking_function_level_and_relative_imports(tmp_path: Path) -> None:
    """A cycle closed only by a TYPE_CHECKING import and a function-level relative import is
    found in a package written to disk."""
    root = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/low.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from .high.top import Top\n"
            ),
            "pkg/high/__init__.py": "",
            "pkg/high/top.py": "def make():\n    from ..low import thing\n    return thing\n",
        },
    )
    graph = import_graph(root)
    assert graph["pkg.low"] == {"pkg.high.top"}
    assert graph["pkg.high.top"] == {"pkg.low"}
    assert find_cycles(graph) == [["pkg.high.top", "pkg.low"]]


def test_graph_treats_package_reexports_as_edges(tmp_path: Path) -> None:
    """``pkg/__init__`` re-exporting ``pkg._a`` is no cycle on its own; ``pkg._a`` importing a
    name from its own package is, and so is a sibling importing from a package that
    re-exports it."""
    root = _write(
        tmp_path,
        {
            "pkg/__init__.py": "from ._a import A\nfrom .sub import B\n",
            "pkg/_a.py": "A = 1\n",
            "pkg/sub/__init__.py": "from ._b import B\n",
            "pkg/sub/_b.py": "B = 2\n",
        },
    )
    assert find_cycles(import_graph(root)) == []
    (root / "_a.py").write_text("from . import B\nA = B\n", encoding="utf-8")
    assert find_cycles(import_graph(root)) == [["pkg", "pkg._a"]]
    (root / "_a.py").write_text("A = 1\n", encoding="utf-8")
    (root / "sub" / "_b.py").write_text("from .. import A\nB = A\n", encoding="utf-8")
    assert find_cycles(import_graph(root)) == [["pkg", "pkg.sub", "pkg.sub._b"]]


def test_upward_chains_are_found_through_package_inits(tmp_path: Path) -> None:
    """A low module importing a name from a package whose ``__init__`` re-exports an upper
    module is reported with its chain, also under TYPE_CHECKING; importing the submodule that
    holds the name is not."""
    root = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/top.py": "from .mid import Mid\n",
            "pkg/mid/__init__.py": "from ._x import Mid\nfrom ._y import Y\n",
            "pkg/mid/_x.py": "from ..low import Low\nclass Mid: ...\n",
            "pkg/mid/_y.py": "Y = 1\n",
            "pkg/low.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from .mid import Y\n"
                "class Low: ...\n"
            ),
        },
    )
    layers = (("top", "mid/__init__", "mid/_x"), ("low",), ("*",))
    graph = import_graph(root)
    assert find_cycles(graph) == [["pkg.low", "pkg.mid", "pkg.mid._x"]]
    assert upward_chains(graph, layer_map(root, layers)) == ["pkg.low -> pkg.mid"]
    (root / "low.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .mid._y import Y\n",
        encoding="utf-8",
    )
    graph = import_graph(root)
    assert find_cycles(graph) == []
    assert upward_chains(graph, layer_map(root, layers)) == []


def test_docstring_check_flags_missing_docstrings_and_room_limits(tmp_path: Path) -> None:
    """A module without a docstring is reported anywhere; one that does not say what it must
    not touch only inside a room."""
    root = _write(
        tmp_path,
        {
            "pkg/__init__.py": '"""The package."""\n',
            "pkg/bare.py": "x = 1\n",
            "pkg/blank.py": '"""  """\n',
            "pkg/plain.py": '"""Owns x."""\n',
            "pkg/room/__init__.py": '"""The room; it must not\n    hold behaviour."""\n',
            "pkg/room/_a.py": '"""Owns a."""\n',
            "pkg/room/_b.py": '"""Owns b. It must not touch c."""\n',
        },
    )
    assert sorted(docstring_gaps(root, ("room/",))) == [
        "pkg.bare: no module docstring",
        "pkg.blank: no module docstring",
        "pkg.room._a: the docstring does not say what it must not touch",
    ]


def test_size_check_flags_long_modules_and_classes_outside_testing(tmp_path: Path) -> None:
    """A module over the line bound and a class over the class bound are reported; the same
    under testing/ is not."""
    long_class = "class Big:\n" + "    x = 1\n" * MAX_CLASS_LINES
    long_module = "x = 1\n" * (MAX_MODULE_LINES + 1)
    root = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/big.py": long_class,
            "pkg/long.py": long_module,
            "pkg/testing/__init__.py": "",
            "pkg/testing/suite.py": long_module,
        },
    )
    assert oversized(root) == [
        f"pkg.big.Big: {MAX_CLASS_LINES + 1} lines (limit {MAX_CLASS_LINES})",
        f"pkg.long: {MAX_MODULE_LINES + 1} lines (limit {MAX_MODULE_LINES})",
    ]


def test_face_check_flags_face_and_foreign_imports(tmp_path: Path) -> None:
    """``from pkg import x``, ``from .. import x`` reaching the root, ``import pkg`` and a
    foreign top-level import are reported; the face's own ``__init__`` and a submodule
    import are not."""
    root = _write(
        tmp_path,
        {
            "pkg/__init__.py": "from ._a import A\n",
            "pkg/_a.py": "A = 1\n",
            "pkg/_b.py": "from pkg import A\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/_c.py": "from .. import _a\nfrom .._a import A\n",
            "pkg/_d.py": "import pkg\nimport sqlalchemy.ext\n",
        },
    )
    assert sorted(face_and_foreign_imports(root, frozenset({"sqlalchemy"}))) == [
        "pkg._b: from pkg import A",
        "pkg._d: import pkg",
        "pkg._d: import sqlalchemy.ext",
        "pkg.sub._c: from pkg import _a",
    ]


def test_session_reach_check_flags_private_members_outside_sessions(tmp_path: Path) -> None:
    """``run.session._x`` and ``session._y`` are reported outside ``sessions/``; public members,
    dunders and the same reads inside ``sessions/`` are not."""
    root = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/runs.py": (
                "def f(run, session):\n"
                "    run.session._history()\n"
                "    session._steers\n"
                "    session.transcript\n"
                "    session.__class__\n"
            ),
            "pkg/sessions/__init__.py": "",
            "pkg/sessions/own.py": "def g(session):\n    return session._steers\n",
        },
    )
    assert session_private_reaches(root) == [
        "pkg.runs:2: run.session._history",
        "pkg.runs:3: session._steers",
    ]


def test_the_kernel_tests_mirror_the_kernels_folders() -> None:
    """``tests/core/`` holds a folder per kernel folder its tests belong to (``runs/``,
    ``resume/``, ``durable/``, …) and no other: a test of a room sits under that room's name."""
    tests = Path(__file__).resolve().parent
    folders = {p.name for p in tests.iterdir() if (p / "__init__.py").exists()}
    kernel = {p.name for p in PACKAGE_ROOT.iterdir() if (p / "__init__.py").exists()}
    assert folders, "tests/core has no folders"
    assert folders <= kernel, sorted(folders - kernel)
    assert {"runs", "resume", "durable", "records", "sessions"} <= folders
