"""What keeps another site's page from driving the server through a browser: the resume
endpoint takes JSON only (415), and the token-less loopback server answers only requests
addressed to a loopback name (421), against a real uvicorn server on loopback."""

from __future__ import annotations

import httpx
import pytest

from prism_server import create_app
from prism_web import host_name

from ._support import Database, Host, client, header_tenant, running, seed, stored


@pytest.fixture
def host() -> Host:
    """The host application (its refund log starts empty)."""
    return Host()


def test_resume_refuses_bodies_not_declared_json(database: Database, host: Host) -> None:
    """A cross-site form post (urlencoded, multipart, text/plain) or an undeclared body is
    415 before the body is read; nothing is decided. ``application/json`` with a charset
    parameter is JSON."""
    owner = {"tenant_id": "t1"}
    run_id = seed(database, host, ["A-1"], owner=owner)
    version, _ = stored(database, run_id, owner)
    body = f'{{"expected_version": {version}, "decision": "approve"}}'
    checkpoints, sessions = database.stores()
    app = create_app(
        checkpoints=checkpoints,
        sessions=sessions,
        resolve_agent=host.resolve_agent,
        authorize=header_tenant,
    )
    url = f"/api/runs/{run_id}/resume"
    with running(app, checkpoints, sessions) as base, client(base) as http:
        refused = [
            http.post(url, content=body, headers={"content-type": "text/plain"}),
            http.post(url, data={"expected_version": str(version), "decision": "approve"}),
            http.post(url, files={"f": ("f.json", body.encode(), "application/json")}),
            http.post(url, content=body.encode()),
            http.post(url, content=body, headers={"content-type": "application/json-seq"}),
        ]
        for answer in refused:
            assert answer.status_code == 415, answer.text
            assert answer.json()["code"] == "ERR_PRISM_WEB_UNSUPPORTED_MEDIA_TYPE"
        assert "Content-Type: application/json" in refused[0].json()["message"]
        assert stored(database, run_id, owner) == (version, "suspended")
        assert host.refunds == []
        # Who is asking is settled first: a stranger gets 401, not a hint about the body.
        with client(base, None) as stranger:
            assert stranger.post(url, content=body).status_code == 401
        accepted = http.post(
            url, content=body, headers={"content-type": "Application/JSON; charset=utf-8"}
        )
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["status"] == "succeeded"
    assert host.refunds == ["A-1"]


def test_the_token_less_server_answers_loopback_host_names_only(
    sqlite_database: Database, host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page whose DNS name was rebound to 127.0.0.1 reaches the server with its own name in
    ``Host``: every route answers 421 and nothing is decided; loopback names are served."""
    monkeypatch.delenv("PRISM_SERVER_TOKEN", raising=False)
    run_id = seed(sqlite_database, host, ["A-1"])
    version, _ = stored(sqlite_database, run_id)
    checkpoints, sessions = sqlite_database.stores()
    app = create_app(checkpoints=checkpoints, sessions=sessions, resolve_agent=host.resolve_agent)
    decide = {"expected_version": version, "decision": "approve"}
    with running(app, checkpoints, sessions) as base, httpx.Client(base_url=base) as http:
        port = base.rsplit(":", 1)[1]
        for rebound in (f"attacker.example:{port}", "attacker.example", f"127.0.0.1.nip.io:{port}"):
            headers = {"host": rebound}
            answers = [
                http.get("/api/runs", headers=headers),
                http.get(f"/api/runs/{run_id}", headers=headers),
                http.post(f"/api/runs/{run_id}/resume", json=decide, headers=headers),
            ]
            for answer in answers:
                assert answer.status_code == 421, answer.text
                assert answer.json()["code"] == "ERR_PRISM_WEB_MISDIRECTED"
            page = http.get("/", headers=headers)
            assert page.status_code == 421
            assert run_id not in page.text
        assert stored(sqlite_database, run_id) == (version, "suspended")
        for name in (f"localhost:{port}", f"127.0.0.1:{port}", "LOCALHOST.", "127.8.9.10"):
            listed = http.get("/api/runs", headers={"host": name})
            assert listed.status_code == 200, (name, listed.text)
            assert [run["run_id"] for run in listed.json()["runs"]] == [run_id]
        done = http.post(f"/api/runs/{run_id}/resume", json=decide)
    assert done.status_code == 200, done.text
    assert host.refunds == ["A-1"]


def test_with_a_token_or_a_host_authorize_the_host_name_is_not_checked(
    sqlite_database: Database, host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Host check guards the token-less loopback mode only: behind a token (or the host's
    own ``authorize``) a proxy may address the server by any name."""
    run_id = seed(sqlite_database, host, ["A-1"], owner={"tenant_id": "t1"})
    monkeypatch.setenv("PRISM_SERVER_TOKEN", "s3cret-token")
    checkpoints, sessions = sqlite_database.stores()
    app = create_app(checkpoints=checkpoints, sessions=sessions, resolve_agent=host.resolve_agent)
    proxied = {"host": "approvals.example.com"}
    with running(app, checkpoints, sessions) as base, httpx.Client(base_url=base) as http:
        token = {"authorization": "Bearer s3cret-token", **proxied}
        assert http.get("/api/runs", headers=token).status_code == 200
        assert http.get("/api/runs", headers=proxied).status_code == 401
    checkpoints, sessions = sqlite_database.stores()
    scoped = create_app(
        checkpoints=checkpoints,
        sessions=sessions,
        resolve_agent=host.resolve_agent,
        authorize=header_tenant,
    )
    with running(scoped, checkpoints, sessions) as base, client(base) as http:
        answer = http.get(f"/api/runs/{run_id}", headers=proxied)
    assert answer.status_code == 200
    assert answer.json()["run_id"] == run_id


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("127.0.0.1:8000", "127.0.0.1"),
        ("[::1]:8000", "::1"),
        ("[::1]", "::1"),
        ("LocalHost.:80", "localhost"),
        ("attacker.example", "attacker.example"),
        ("localhost.attacker.example:1", "localhost.attacker.example"),
    ],
)
def test_host_names_are_read_without_port_or_brackets(header: str, name: str) -> None:
    assert host_name(header) == name
