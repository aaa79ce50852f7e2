"""The server's notifiers (API.md, fourth round, "Approvals fit for money"): the runs it
decides notify, and its workers (or, without workers, its own deliverer) POST the
notifications, signed, to a webhook."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from prism_core import NotifierConfigError, WebhookNotifier
from prism_server import create_app
from tests.webhook_receiver import Receiver, signature_of

from ._support import Database, Host, client, header_tenant, running, seed, stored
from .test_auth_and_serve import HOST_MODULE

OWNER = {"tenant_id": "t1"}
SECRET = "whsec-server"


def serve(db: Database, host: Host, **options: Any) -> Any:
    checkpoints, sessions = db.stores()
    app = create_app(
        checkpoints=checkpoints,
        sessions=sessions,
        resolve_agent=host.resolve_agent,
        authorize=header_tenant,
        **options,
    )
    return running(app, checkpoints, sessions)


@pytest.mark.parametrize("workers", [1, 0])
def test_a_decision_through_the_server_is_notified(database: Database, workers: int) -> None:
    """A run started without notifications is approved through ``POST /decisions``: the
    server hosts it with ``notify``, so the decision is notified, and, with a worker, so is
    the end of the run it then runs."""
    host = Host()
    run_id = seed(database, host, ["A-1"], owner=OWNER)
    version, _ = stored(database, run_id, OWNER)
    with Receiver() as receiver:
        notifier = WebhookNotifier(receiver.url, secret=SECRET)
        with serve(database, host, workers=workers, notifiers=[notifier]) as url:
            with client(url) as http:
                answer = http.post(
                    f"/api/runs/{run_id}/decisions",
                    json={"expected_version": version, "decision": "approve"},
                )
            assert answer.status_code == 202, answer.text
            got = receiver.wait_for(2 if workers else 1)
    bodies = [delivery.json() for delivery in got]
    for delivery in got:
        assert delivery.headers["X-Prism-Signature"] == signature_of(delivery.body, SECRET)
    events = sorted((body["version"], body["event"]) for body in bodies)
    assert events[0] == (version + 1, "decided")
    (decided,) = [body for body in bodies if body["event"] == "decided"]
    assert [(r["outcome"], r["channel"]) for r in decided["audit"]] == [("allow_once", "api")]
    if workers:
        assert events[1][1] == "finished"
        assert host.refunds == ["A-1"]
    else:
        assert host.refunds == []


def test_a_notifier_without_deliver_is_refused() -> None:
    with pytest.raises(NotifierConfigError):
        create_app(
            checkpoints=object(),
            sessions=object(),
            resolve_agent=lambda agent_id: None,
            notifiers=[object()],
        )


def test_prism_serve_notify_posts_signed_notifications(
    sqlite_database: Database, tmp_path: Path
) -> None:
    """``prism serve --notify URL`` with ``PRISM_NOTIFY_SECRET``: a decision through its API
    is notified, signed with that secret, and so is the end of the run its worker runs."""
    host = Host()
    run_id = seed(sqlite_database, host, ["A-1"])
    version, _ = stored(sqlite_database, run_id)
    (tmp_path / "served_host.py").write_text(HOST_MODULE)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    root = Path(__file__).resolve().parents[2]
    with Receiver() as receiver:
        command = [sys.executable, "-m", "prism_cli", "serve", "--store", sqlite_database.url]
        command += ["--app", "served_host:resolve_agent", "--port", str(port)]
        command += ["--notify", receiver.url]
        env = {
            "PYTHONPATH": f"{tmp_path}:{root}",
            "PATH": "/usr/bin:/bin",
            "PRISM_NOTIFY_SECRET": SECRET,
        }
        server = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE)
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                try:
                    answer = httpx.post(
                        f"{base}/api/runs/{run_id}/decisions",
                        json={"expected_version": version, "decision": "approve"},
                        timeout=10,
                    )
                    break
                except httpx.TransportError:
                    assert server.poll() is None, server.stderr.read() if server.stderr else ""
                    assert time.monotonic() < deadline, "prism serve did not start"
                    time.sleep(0.1)
            assert answer.status_code == 202, answer.text
            got = receiver.wait_for(2)
        finally:
            server.terminate()
            server.wait(20)
            if server.stderr:
                server.stderr.close()
    assert sorted(d.json()["event"] for d in got) == ["decided", "finished"]
    for delivery in got:
        assert delivery.headers["X-Prism-Signature"] == signature_of(delivery.body, SECRET)


def test_prism_serve_refuses_notify_without_a_secret_or_with_a_bad_url(tmp_path: Path) -> None:
    """Refused on stderr with exit status 2, before the host module is imported."""
    (tmp_path / "served_host.py").write_text(HOST_MODULE + "\nopen('imported', 'w').close()\n")
    url = f"sqlite:///{tmp_path / 'prism.db'}"
    root = Path(__file__).resolve().parents[2]
    base = [sys.executable, "-m", "prism_cli", "serve", "--store", url]
    base += ["--app", "served_host:resolve_agent"]
    env = {"PYTHONPATH": f"{tmp_path}:{root}", "PATH": "/usr/bin:/bin"}
    no_secret = subprocess.run(
        [*base, "--notify", "http://127.0.0.1:9/hook"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert no_secret.returncode == 2
    assert "--notify needs the signing secret in PRISM_NOTIFY_SECRET" in no_secret.stderr
    bad_url = subprocess.run(
        [*base, "--notify", "ftp://example.com/hook"],
        cwd=tmp_path,
        env={**env, "PRISM_NOTIFY_SECRET": SECRET},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad_url.returncode == 2
    assert "http:// or https://" in bad_url.stderr
    assert not (tmp_path / "imported").exists()
