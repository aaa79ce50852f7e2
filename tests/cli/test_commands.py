"""The subcommands of ``prism`` come from the entry-point group ``prism.commands``.

Installed distributions are simulated the way Python finds real ones: a ``*.dist-info``
folder with ``METADATA`` and ``entry_points.txt`` on ``sys.path`` (or ``PYTHONPATH`` for a
child process), next to the module its entry point names.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import prism_cli
from prism_cli import COMMAND_GROUP, CommandError, command_table, load_command, main
from prism_cli._main import run_command_line

HELLO = textwrap.dedent(
    '''
    """A third-party command."""

    import argparse


    class Hello:
        help = "say hello"

        def configure(self, parser: argparse.ArgumentParser) -> None:
            parser.add_argument("--name", default="world")

        def run(self, args: argparse.Namespace) -> int:
            print(f"hello {args.name}")
            return 7


    command = Hello()
    '''
)


def distribution(root: Path, name: str, entries: dict[str, str], **modules: str) -> Path:
    """An installed distribution ``name`` in ``root`` declaring ``entries`` under
    ``prism.commands``, with ``modules`` (module name → source) beside it."""
    info = root / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    lines = "".join(f"{key} = {value}\n" for key, value in entries.items())
    (info / "entry_points.txt").write_text(f"[{COMMAND_GROUP}]\n{lines}")
    for module, source in modules.items():
        (root / f"{module}.py").write_text(source)
    return root


def prism(
    *args: str, path: Path | None = None, code: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m prism_cli ARGS`` (or ``python -c CODE``) in a child process, with ``path``
    on its ``PYTHONPATH``."""
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(path), env.get("PYTHONPATH")]))
    command = ["-c", code] if code is not None else ["-m", "prism_cli", *args]
    return subprocess.run(
        [sys.executable, *command], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def test_the_table_holds_the_clis_commands_and_the_servers_serve() -> None:
    """The CLI's own commands and ``serve`` (from prism-runtime-server) are entry points of
    the group, each named after its command."""
    table = command_table()
    assert {"chat", "demo", "plugins", "runs", "serve"} <= set(table)
    assert list(table) == sorted(table)
    origin = {name: (entry.dist.name if entry.dist else None) for name, entry in table.items()}
    assert origin["serve"] == "prism-runtime-server"
    assert {origin[name] for name in ("chat", "demo", "plugins", "runs")} == {"prism-runtime-cli"}
    assert table["serve"].value == "prism_server._serve_cli:command"
    for name in ("chat", "demo", "plugins", "runs", "serve"):
        command = load_command(table[name])
        assert isinstance(command, prism_cli.Command)
        assert command.help


def test_a_command_imports_only_its_own_module() -> None:
    """Reading the table imports no command; ``prism plugins`` imports its own module only,
    and neither the server nor the other commands."""
    probe = textwrap.dedent(
        """
        import sys
        from prism_cli import command_table, main
        command_table()
        before = sorted(m for m in sys.modules if m.startswith(("prism_server", "prism_cli.")))
        code = main(["plugins", "--json"])
        after = sorted(m for m in sys.modules if m.startswith(("prism_server", "prism_cli.")))
        print("RESULT", code, before, after)
        """
    )
    done = prism(code=probe)
    assert done.returncode == 0, done.stderr
    result = next(line for line in done.stdout.splitlines() if line.startswith("RESULT"))
    commands = ["prism_cli._main", "prism_cli._plugins", "prism_cli._registry"]
    assert result == f"RESULT 0 {commands} {commands}"


def test_help_lists_every_command_without_starting_the_server() -> None:
    """``prism --help`` imports each command's module, but not uvicorn: the server itself
    is imported only when ``prism serve`` runs."""
    probe = textwrap.dedent(
        """
        import sys
        from prism_cli import main
        try:
            main(["--help"])
        except SystemExit as exc:
            print("EXIT", exc.code)
        print("LOADED", "prism_server._serve_cli" in sys.modules, "uvicorn" in sys.modules)
        """
    )
    done = prism(code=probe)
    assert done.returncode == 0, done.stderr
    for name in ("chat", "demo", "plugins", "runs", "serve"):
        assert f"    {name} " in done.stdout
    assert "EXIT 0" in done.stdout
    assert "LOADED True False" in done.stdout


def test_another_distribution_adds_a_command(tmp_path: Path) -> None:
    """A distribution's ``prism.commands`` entry point is a subcommand: listed in ``--help``
    with its help, parsed with its arguments, and its exit code is prism's."""
    root = distribution(tmp_path, "prism-hello", {"hello": "hello_cmd:command"}, hello_cmd=HELLO)
    done = prism("hello", "--name", "ops", path=root)
    assert (done.returncode, done.stdout, done.stderr) == (7, "hello ops\n", "")
    listed = prism("--help", path=root)
    assert listed.returncode == 0
    assert "hello     say hello" in listed.stdout


def test_a_broken_command_is_refused_when_run_and_named_in_help(tmp_path: Path) -> None:
    """A command whose module fails on import: running it exits 1 with the error code and
    the cause; ``--help`` still works and says it is unavailable; other commands never
    import it."""
    marker = tmp_path / "imported.txt"
    broken = f"open({str(marker)!r}, 'w').write('x')\nraise RuntimeError('no config file')\n"
    root = distribution(
        tmp_path, "prism-broken", {"broken": "broken_cmd:command"}, broken_cmd=broken
    )
    done = prism("plugins", "--json", path=root)
    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    run = prism("broken", path=root)
    assert run.returncode == 1
    assert run.stdout == ""
    assert "refused (ERR_PRISM_CLI_COMMAND)" in run.stderr
    assert "'broken' (prism-broken: broken_cmd:command) cannot be loaded" in run.stderr
    assert "RuntimeError: no config file" in run.stderr
    listed = prism("--help", path=root)
    assert listed.returncode == 0
    assert "unavailable" in listed.stdout
    assert "runs " in listed.stdout


def test_an_object_that_is_not_a_command_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry point naming something without ``help``, ``configure`` and ``run`` is refused
    with what it lacks."""
    half = (
        "class Half:\n    help = 3\n    def run(self, args):\n        return 0\ncommand = Half()\n"
    )
    root = distribution(tmp_path, "prism-half", {"half": "half_cmd:command"}, half_cmd=half)
    monkeypatch.syspath_prepend(str(root))
    with pytest.raises(CommandError, match="Half has no a string help, no configure") as info:
        load_command(command_table()["half"])
    assert info.value.code == "ERR_PRISM_CLI_COMMAND"
    monkeypatch.delitem(sys.modules, "half_cmd")


def test_a_run_that_returns_no_exit_code_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``run`` must return an int: anything else (``None``, ``True``) exits 1, named, rather
    than as a silent 0 or a refusal without a message."""
    vague = HELLO.replace("return 7", "return VALUE").replace(
        "command = Hello()", "VALUE = None\ncommand = Hello()"
    )
    root = distribution(tmp_path, "prism-vague", {"vague": "vague_cmd:command"}, vague_cmd=vague)
    monkeypatch.syspath_prepend(str(root))
    assert main(["vague"]) == 1
    out, err = capsys.readouterr()
    assert out == "hello world\n"
    assert "'vague' (vague_cmd:command) returned None, not an exit code" in err
    monkeypatch.setattr(sys.modules["vague_cmd"], "VALUE", True)
    assert main(["vague"]) == 1
    assert "returned True, not an exit code" in capsys.readouterr().err
    monkeypatch.delitem(sys.modules, "vague_cmd")


def test_two_distributions_declaring_one_command_are_refused(tmp_path: Path) -> None:
    """A name declared twice (here ``runs``, the CLI's own) is refused for every invocation,
    naming both distributions: either choice could run a command the user did not mean."""
    root = distribution(tmp_path, "prism-impostor", {"runs": "hello_cmd:command"}, hello_cmd=HELLO)
    done = prism("plugins", path=root)
    assert done.returncode == 1
    assert "refused (ERR_PRISM_CLI_COMMAND)" in done.stderr
    assert "two distributions declare the command 'runs'" in done.stderr
    assert "prism-runtime-cli: prism_cli._runs:command" in done.stderr
    assert "prism-impostor: hello_cmd:command" in done.stderr


def test_a_command_name_that_is_not_a_word_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Entry point names become subcommands, so they must be lowercase words."""
    root = distribution(tmp_path, "prism-odd", {"--all": "hello_cmd:command"}, hello_cmd=HELLO)
    monkeypatch.syspath_prepend(str(root))
    with pytest.raises(CommandError, match="the command name '--all'"):
        command_table()
    assert main(["plugins"]) == 1


def test_serve_without_the_server_says_how_to_install_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Where no distribution declares ``serve``, ``prism serve`` names the extra to install
    (exit 2) instead of argparse's "invalid choice"."""
    table = {name: entry for name, entry in command_table().items() if name != "serve"}
    assert run_command_line(["serve", "--store", "memory://", "--app", "x:y"], table) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "prism serve needs the server: pip install 'prism-runtime[server]'" in err


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """``prism`` alone exits 2 with the usage line; an unknown command lists the choices."""
    with pytest.raises(SystemExit) as done:
        main([])
    assert done.value.code == 2
    assert "usage: prism" in capsys.readouterr().err
    with pytest.raises(SystemExit) as unknown:
        main(["nonesuch"])
    assert unknown.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'nonesuch'" in err
    assert "'runs'" in err


def test_python_dash_m_prism_cli_is_the_console_script() -> None:
    """``python -m prism_cli`` runs the same command line as the ``prism`` script, and the
    script is declared by prism-runtime-cli."""
    from importlib.metadata import distribution as installed

    scripts = [
        e for e in installed("prism-runtime-cli").entry_points if e.group == "console_scripts"
    ]
    assert [(e.name, e.value) for e in scripts] == [("prism", "prism_cli._main:main")]
    done = prism("plugins", "--json")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert {"name": "packs", "distribution": "prism-runtime-packs"}.items() <= next(
        row for row in rows if row["name"] == "packs"
    ).items()
