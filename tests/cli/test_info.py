"""``prism --version`` and ``prism plugins``: package metadata only, no plugin imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from prism_cli import main
from prism_cli._demo_stores import open_demo_stores
from prism_core import discover_plugins
from prism_core.plugins import InstalledPlugin, list_installed_plugins


def _prism(*args: str, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(path), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "prism_cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def _fake_distribution(root: Path) -> Path:
    """An installed distribution whose plugin module records (and refuses) being imported."""
    marker = root / "imported.txt"
    (root / "exploding_plugin.py").write_text(
        f"open({str(marker)!r}, 'w').write('imported')\n"
        "raise RuntimeError('this plugin must not be imported by prism plugins')\n"
    )
    info = root / "prism_runtime_exploding-2.5.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: prism-runtime-exploding\nVersion: 2.5.1\n"
    )
    (info / "entry_points.txt").write_text("[prism]\nexploding = exploding_plugin:plugin\n")
    return marker


def test_version_prints_the_core_distribution_version(capsys: pytest.CaptureFixture[str]) -> None:
    """``--version`` prints ``prism-runtime <version of prism-runtime-core>`` and exits 0."""
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"prism-runtime {version('prism-runtime-core')}"


def test_plugins_lists_workspace_plugins_with_distribution_and_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The table names each entry point, its distribution and version, and the object path."""
    assert main(["plugins"]) == 0
    lines = capsys.readouterr().out.splitlines()
    by_name = {line.split()[0]: line.split() for line in lines}
    for name, dist, value in (
        ("sql", "prism-runtime-sql", "prism_store_sql:plugin"),
        ("redis", "prism-runtime-redis", "prism_store_redis:plugin"),
        ("packs", "prism-runtime-packs", "prism_packs:plugin"),
    ):
        assert by_name[name] == [name, dist, version(dist), value]


def test_plugins_json_and_no_import(tmp_path: Path) -> None:
    """``--json`` gives one object per line; a plugin that fails on import is listed, not run."""
    marker = _fake_distribution(tmp_path)
    done = _prism("plugins", "--json", path=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert {
        "name": "exploding",
        "distribution": "prism-runtime-exploding",
        "version": "2.5.1",
        "value": "exploding_plugin:plugin",
    } in rows
    assert all(set(row) == {"name", "distribution", "version", "value"} for row in rows)
    assert [row["name"] for row in rows] == sorted(row["name"] for row in rows)
    assert not marker.exists()
    text = _prism("plugins", path=tmp_path)
    assert "exploding  prism-runtime-exploding 2.5.1" in text.stdout.replace("   ", " ")
    assert not marker.exists()


def test_list_installed_plugins_imports_nothing(tmp_path: Path) -> None:
    """Listing in-process leaves the plugin modules out of ``sys.modules``."""
    _fake_distribution(tmp_path)
    sys.path.insert(0, str(tmp_path))
    try:
        found = list_installed_plugins()
    finally:
        sys.path.remove(str(tmp_path))
    assert (
        InstalledPlugin("exploding", "exploding_plugin:plugin", "prism-runtime-exploding", "2.5.1")
        in found
    )
    assert "exploding_plugin" not in sys.modules
    assert list_installed_plugins("prism-no-such-group") == []


def test_plugins_with_an_empty_group_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """With nothing installed under the group, the command says so and exits 0."""
    from prism_cli._plugins import print_plugins

    assert print_plugins(as_json=False, group="prism-no-such-group") == 0
    assert "no plugins installed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("url", "module", "hint"),
    [
        ("sqlite:///demo.db", "prism_store_sql", "pip install 'prism-runtime[sql]'"),
        ("postgresql://u@h/db", "prism_store_sql", "pip install 'prism-runtime[postgres]'"),
        ("redis://127.0.0.1:6379/0", "prism_store_redis", "pip install 'prism-runtime[redis]'"),
    ],
)
def test_demo_names_the_install_command_for_a_missing_store(
    url: str, module: str, hint: str
) -> None:
    """Without the store distribution's plugin, ``prism demo --store URL`` says what to
    install (the demo opens stores through the installed plugins, as a host does)."""
    installed = discover_plugins()
    without = [p for p in installed if type(p).__module__.split(".")[0] != module]
    assert len(without) == len(installed) - 1
    with pytest.raises(SystemExit) as info:
        open_demo_stores(url, "prefix", plugins=without)
    assert str(info.value).endswith(hint)
