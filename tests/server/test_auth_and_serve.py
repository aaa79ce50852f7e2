"""The default bearer token, loopback-only service without one, and ``prism serve``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from prism_cli import main
from prism_server import create_app

from ._support import Database, Host, running, seed


def test_the_default_token_guards_every_route(
    sqlite_database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = Host()
    run_id = seed(sqlite_database, host, ["A-1"])
    monkeypatch.setenv("PRISM_SERVER_TOKEN", "s3cret-token")
    checkpoints, sessions = sqlite_database.stores()
    app = create_app(checkpoints=checkpoints, sessions=sessions, resolve_agent=host.resolve_agent)
    with running(app, checkpoints, sessions) as base:
        with httpx.Client(base_url=base) as http:
            assert http.get("/api/runs").status_code == 401
            wrong = {"authorization": "Bearer not-it"}
            assert http.get(f"/api/runs/{run_id}", headers=wrong).status_code == 401
            assert http.get("/", follow_redirects=False).status_code == 303
            good = {"authorization": "Bearer s3cret-token"}
            runs = http.get("/api/runs", headers=good).json()["runs"]
            assert [run["run_id"] for run in runs] == [run_id]
            signed = http.post("/login", data={"token": "s3cret-token"}, follow_redirects=False)
            assert signed.status_code == 303
            cookie = signed.cookies["prism_token"]
        with httpx.Client(base_url=base, cookies={"prism_token": cookie}) as http:
            page = http.get("/")
            assert page.status_code == 200
            assert run_id in page.text


def test_without_a_token_loopback_clients_are_served(sqlite_database: Database) -> None:
    host = Host()
    run_id = seed(sqlite_database, host, ["A-1"])
    checkpoints, sessions = sqlite_database.stores()
    app = create_app(checkpoints=checkpoints, sessions=sessions, resolve_agent=host.resolve_agent)
    with running(app, checkpoints, sessions) as base, httpx.Client(base_url=base) as http:
        assert http.get(f"/api/runs/{run_id}").json()["status"] == "suspended"


HOST_MODULE = textwrap.dedent(
    """
    from tests.server._support import Host

    resolve_agent = Host().resolve_agent
    """
)


def _prism(tmp_path: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``prism ARGV`` in a child process, with the tests importable and no server token."""
    root = Path(__file__).resolve().parents[2]
    return subprocess.run(
        [sys.executable, "-m", "prism_cli", *argv],
        cwd=tmp_path,
        env={"PYTHONPATH": f"{tmp_path}:{root}", "PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_prism_serve_refuses_a_public_address_without_a_token_on_stderr(tmp_path: Path) -> None:
    """The refusal is on stderr with exit status 2, before the host module is imported (it
    would write ``imported``) or the store is opened (no database file appears)."""
    (tmp_path / "served_host.py").write_text(HOST_MODULE + "\nopen('imported', 'w').close()\n")
    url = f"sqlite:///{tmp_path / 'prism.db'}"
    app = ["--app", "served_host:resolve_agent"]
    done = _prism(tmp_path, "serve", "--store", url, *app, "--host", "0.0.0.0")
    assert done.returncode == 2
    assert done.stdout == ""
    assert "refusing to listen on 0.0.0.0 without PRISM_SERVER_TOKEN" in done.stderr
    assert not (tmp_path / "imported").exists()
    assert not (tmp_path / "prism.db").exists()
    unknown = _prism(tmp_path, "serve", "--store", url, "--app", "nowhere_at_all:x")
    assert unknown.returncode == 2
    assert unknown.stdout == ""
    assert "cannot import 'nowhere_at_all'" in unknown.stderr


def test_prism_serve_refuses_a_store_it_cannot_open_on_stderr(tmp_path: Path) -> None:
    (tmp_path / "served_host.py").write_text(HOST_MODULE)
    done = _prism(tmp_path, "serve", "--store", "nosuch://x", "--app", "served_host:resolve_agent")
    assert done.returncode == 1
    assert done.stdout == ""
    assert "prism serve: cannot open --store: No checkpoint store for 'nosuch' URLs" in (
        done.stderr
    )


def test_prism_serve_in_process_refuses_on_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "served_host.py").write_text(HOST_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PRISM_SERVER_TOKEN", raising=False)
    url = f"sqlite:///{tmp_path / 'prism.db'}"
    argv = ["serve", "--store", url, "--app", "served_host:resolve_agent", "--host", "0.0.0.0"]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "PRISM_SERVER_TOKEN" in err


def test_prism_serve_serves_a_store(sqlite_database: Database, tmp_path: Path) -> None:
    host = Host()
    run_id = seed(sqlite_database, host, ["A-1"])
    (tmp_path / "served_host.py").write_text(HOST_MODULE)
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    root = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-m", "prism_cli", "serve", "--store", sqlite_database.url]
    command += ["--app", "served_host:resolve_agent", "--port", str(port)]
    env = {"PYTHONPATH": f"{tmp_path}:{root}", "PATH": "/usr/bin:/bin"}
    server = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/api/runs/{run_id}", timeout=5)
                break
            except httpx.TransportError:
                assert server.poll() is None, server.stderr.read() if server.stderr else ""
                assert time.monotonic() < deadline, "prism serve did not start"
                time.sleep(0.1)
        assert answer.status_code == 200
        assert answer.json()["pending"][0]["arguments"] == {"order": "A-1"}
    finally:
        server.terminate()
        server.wait(20)
        if server.stderr:
            server.stderr.close()
