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
