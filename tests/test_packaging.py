"""The distributions' manifests agree with each other and with ``make dist``.

The install itself (wheels of every distribution into a fresh venv) runs in CI, in
``.ci/wheels.sh``; these checks need no package index.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MANIFESTS = [
    ROOT / "pyproject.toml",
    ROOT / "prism_core" / "pyproject.toml",
    ROOT / "prism_store_sql" / "pyproject.toml",
    ROOT / "prism_store_redis" / "pyproject.toml",
    *sorted((ROOT / "plugins").glob("*/pyproject.toml")),
]
PIN = re.compile(r"^(prism-runtime[a-z0-9-]*)(\[[^\]]*\])?==([^;\s]+)")


def _project(path: Path) -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))["project"]
    return project


def _workspace() -> dict[str, str]:
    return {_project(path)["name"]: _project(path)["version"] for path in MANIFESTS}


def test_every_distribution_belongs_to_the_prism_runtime_family() -> None:
    """Each manifest names a ``prism-runtime`` distribution; the kernel and meta are there."""
    names = _workspace()
    assert {"prism-runtime", "prism-runtime-core"} <= set(names)
    assert all(name == "prism-runtime" or name.startswith("prism-runtime-") for name in names)


def test_every_pinned_prism_requirement_is_built_from_this_workspace() -> None:
    """A ``prism-runtime-*==X`` requirement anywhere names a workspace distribution at X."""
    workspace = _workspace()
    pins = []
    for path in MANIFESTS:
        project = _project(path)
        requirements = list(project.get("dependencies", []))
        for extra in project.get("optional-dependencies", {}).values():
            requirements.extend(extra)
        for requirement in requirements:
            match = PIN.match(requirement)
            if match is None:
                assert not requirement.startswith("prism"), f"{path}: unpinned {requirement}"
                continue
            name, _extras, version = match.groups()
            pins.append(name)
            assert workspace.get(name) == version, f"{path}: {requirement} is not in the workspace"
    assert "prism-runtime-core" in pins


def test_make_dist_builds_every_distribution() -> None:
    """``make -n dist`` builds the root, the kernel, both stores and every plugins/* folder."""
    done = subprocess.run(
        ["make", "-n", "dist"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    built = set(re.findall(r"--outdir dist (\S+)", done.stdout))
    expected = {str(path.parent.relative_to(ROOT)) for path in MANIFESTS}
    assert built == expected


def test_readme_says_how_to_install_from_a_checkout() -> None:
    """The README names ``make dist`` and the ``--find-links dist`` install of the meta."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make dist" in readme
    assert "pip install --find-links dist 'prism-runtime[" in readme


PROSE = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
INSTALL = re.compile(r"pip install (?:--?\S+ )*'?(prism[a-z0-9-]*)(?![\w/])(?:\[([a-z0-9,-]+)\])?")
RETIRED = re.compile(r"`prism\[|\bprism-(core|store-sql|store-redis|packs)\b")


def _extras() -> dict[str, set[str]]:
    return {
        _project(path)["name"]: set(_project(path).get("optional-dependencies", {}))
        for path in MANIFESTS
    }


def test_install_commands_in_the_docs_name_real_distributions_and_extras() -> None:
    """Every ``pip install prism…`` in the README, the docs and the changelog installs a
    workspace distribution with extras it declares (``prism-runtime[sql,postgres]`` …)."""
    extras = _extras()
    seen = 0
    for path in PROSE:
        for match in INSTALL.finditer(path.read_text(encoding="utf-8")):
            name, wanted = match.groups()
            assert name in extras, f"{path.name}: pip install {name} is not a distribution"
            unknown = set((wanted or "").split(",")) - {""} - extras[name]
            assert not unknown, f"{path.name}: {name} has no extra {sorted(unknown)}"
            seen += 1
    assert seen > 10


def test_the_docs_and_changelog_name_no_retired_distribution() -> None:
    """The pre-``prism-runtime`` names appear only where the rename is explained, and every
    ``prism-runtime-*`` name in backticks is a workspace distribution."""
    workspace = _workspace()
    for path in PROSE:
        text = path.read_text(encoding="utf-8")
        for match in RETIRED.finditer(text):
            around = text[max(0, match.start() - 200) : match.end() + 200]
            assert "public index" in around, f"{path.name}: {around}"
        for name in re.findall(r"`(prism-runtime-[a-z0-9-]+)", text):
            assert name in workspace, f"{path.name}: {name} is not a distribution"


def _manifest(name: str) -> dict[str, Any]:
    return next(_project(path) for path in MANIFESTS if _project(path)["name"] == name)


def test_the_kernel_has_no_console_script_and_needs_no_other_distribution() -> None:
    """``prism-runtime-core`` declares no script and requires nothing of the family."""
    core = _manifest("prism-runtime-core")
    assert "scripts" not in core
    assert [r for r in core["dependencies"] if r.startswith("prism")] == []


def test_the_cli_distribution_declares_prism_and_the_meta_depends_on_it() -> None:
    """``prism`` comes from ``prism-runtime-cli``, which needs only the kernel; the meta
    distribution depends on it, so ``pip install prism-runtime`` gives ``prism``."""
    cli = _manifest("prism-runtime-cli")
    assert cli["scripts"] == {"prism": "prism_cli._main:main"}
    assert cli["dependencies"] == ["prism-runtime-core==0.1.0"]
    assert "prism-runtime-cli==0.1.0" in _manifest("prism-runtime")["dependencies"]
    scripts = {name for path in MANIFESTS for name in _project(path).get("scripts", {})}
    assert scripts == {"prism"}


def test_every_declared_command_names_a_module_of_its_distribution() -> None:
    """Each ``prism.commands`` entry point of the workspace names a module that its own
    distribution ships; the CLI declares its commands and the server ``serve``."""
    declared: dict[str, dict[str, str]] = {}
    for path in MANIFESTS:
        project = _project(path)
        commands = project.get("entry-points", {}).get("prism.commands", {})
        if not commands:
            continue
        declared[project["name"]] = commands
        for value in commands.values():
            module, _, attribute = value.partition(":")
            assert attribute, f"{path}: {value} names no object"
            source = path.parent / "src" / Path(*module.split("."))
            assert source.with_suffix(".py").exists() or (source / "__init__.py").exists(), value
    assert set(declared["prism-runtime-cli"]) == {
        "audit",
        "chat",
        "demo",
        "effects",
        "plugins",
        "runs",
        "sessions",
        "worker",
    }
    assert declared["prism-runtime-server"] == {"serve": "prism_server._serve_cli:command"}


def test_the_three_http_faces_share_the_web_layer() -> None:
    """``prism-runtime-server``, ``-agui`` and ``-a2a`` depend on ``prism-runtime-web``, which
    needs only the kernel and Starlette and answers no hook (no ``prism`` entry point, so
    discovering plugins never imports Starlette for it); the meta has a ``web`` extra."""
    for face in ("prism-runtime-server", "prism-runtime-agui", "prism-runtime-a2a"):
        assert "prism-runtime-web==0.1.0" in _manifest(face)["dependencies"], face
    web = _manifest("prism-runtime-web")
    assert [r for r in web["dependencies"] if r.startswith("prism")] == [
        "prism-runtime-core==0.1.0"
    ]
    assert "entry-points" not in web
    extras = _project(ROOT / "pyproject.toml")["optional-dependencies"]
    assert extras["web"] == ["prism-runtime-web==0.1.0"]
    assert "prism-runtime-web==0.1.0" in extras["all"]


def test_every_plugin_entry_point_names_an_object_that_answers_a_hook() -> None:
    """A ``prism`` entry point is loaded by every host that discovers plugins, so each names
    an object implementing at least one of the kernel's hooks (an application that answers
    none, such as the server or the AG-UI endpoint, declares no entry point and is never
    imported by discovery)."""
    from importlib import import_module

    from prism_core.hookspecs import PROJECT_NAME

    marker = f"{PROJECT_NAME}_impl"
    seen = {}
    for path in MANIFESTS:
        project = _project(path)
        for name, value in project.get("entry-points", {}).get("prism", {}).items():
            module, _, attribute = value.partition(":")
            plugin = getattr(import_module(module), attribute)
            hooks = [attr for attr in dir(plugin) if hasattr(getattr(plugin, attr, None), marker)]
            assert hooks, f"{project['name']}: entry point {name} = {value} answers no hook"
            seen[name] = project["name"]
    assert "agui" not in seen
    assert "server" not in seen
    assert {"sql", "redis", "packs", "otel", "openai", "anthropic"} <= set(seen)


def test_every_plugin_object_lives_in_its_distributions_plugin_module() -> None:
    """One module name for the plugin object: each ``prism`` entry point names the package's
    ``plugin``, defined in the package's ``plugin.py`` (the module itself, or an object whose
    class that module defines)."""
    from importlib import import_module
    from types import ModuleType

    for path in MANIFESTS:
        project = _project(path)
        for name, value in project.get("entry-points", {}).get("prism", {}).items():
            package, _, attribute = value.partition(":")
            assert attribute == "plugin", f"{project['name']}: {name} = {value}"
            plugin = getattr(import_module(package), attribute)
            home = plugin.__name__ if isinstance(plugin, ModuleType) else type(plugin).__module__
            assert home == f"{package}.plugin", f"{project['name']}: {value} lives in {home}"
