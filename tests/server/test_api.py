"""The JSON API against a real uvicorn server on loopback, on SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from typing import Any

import pytest

from prism_core.tools import idempotency_key
from prism_server import create_app

from ._support import (
    Database,
    Host,
    client,
    header_tenant,
    make_in_doubt,
    running,
    seed,
    sse_frames,
    sse_frames_with_ids,
    stored,
    stored_run,
)


@pytest.fixture
def host() -> Host:
    """The host application (its refund log starts empty)."""
    return Host()


def serve(db: Database, host: Host, **options: Any) -> Any:
    """The app over ``db`` with the test's ``authorize``, running on loopback."""
    checkpoints, sessions = db.stores()
    options.setdefault("authorize", header_tenant)
    app = create_app(
        checkpoints=checkpoints, sessions=sessions, resolve_agent=host.resolve_agent, **options
    )
    return running(app, checkpoints, sessions)


@pytest.fixture
def base(database: Database, host: Host) -> Iterator[str]:
    """The server's base URL."""
    with serve(database, host) as url:
        yield url


def test_list_runs_is_scoped_filtered_and_paged(database: Database, host: Host, base: str) -> None:
    mine = {seed(database, host, ["A-1"], owner={"tenant_id": "t1"}) for _ in range(3)}
    foreign = seed(database, host, ["B-2"], owner={"tenant_id": "t2"})
    with client(base) as http:
        answer = http.get("/api/runs", params={"status": "suspended"})
        assert answer.status_code == 200
        body = answer.json()
        assert {run["run_id"] for run in body["runs"]} == mine
        assert body["cursor"] is None
        run = body["runs"][0]
        assert run["agent_id"] == "billing"
        assert run["pending_decisions"] == 1
        assert run["in_doubt"] == []
        seen, cursor = [], None
        while True:
            params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
            page = http.get("/api/runs", params=params).json()
            assert len(page["runs"]) <= 2
            seen += [run["run_id"] for run in page["runs"]]
            cursor = page["cursor"]
            if cursor is None:
                break
        assert sorted(seen) == sorted(mine)
        assert http.get("/api/runs", params={"status": "succeeded"}).json()["runs"] == []
        bad = http.get("/api/runs", params={"status": "nonsense"})
        assert bad.status_code == 400
        assert bad.json()["code"] == "ERR_PRISM_WEB_BAD_REQUEST"
        assert http.get("/api/runs", params={"limit": "0"}).status_code == 400
    with client(base, "t2") as http:
        assert [r["run_id"] for r in http.get("/api/runs").json()["runs"]] == [foreign]


def test_run_detail_shows_pending_calls_and_foreign_runs_are_404(
    database: Database, host: Host, base: str
) -> None:
    run_id = seed(database, host, ["A-1", "B-2"], owner={"tenant_id": "t1"})
    with client(base) as http:
        detail = http.get(f"/api/runs/{run_id}").json()
    assert detail["status"] == "suspended"
    assert detail["version"] == stored(database, run_id, {"tenant_id": "t1"})[0]
    assert detail["counters"]["turns"] == 1
    calls = {item["tool_call_id"]: item for item in detail["pending"]}
    assert set(calls) == {"c1", "c2"}
    assert calls["c1"]["tool"] == "refund"
    assert calls["c1"]["arguments"] == {"order": "A-1"}
    assert calls["c1"]["kind"] == "tool_approval"
    assert calls["c1"]["parameters"]["required"] == ["order"]
    with client(base, "t2") as http:
        foreign = http.get(f"/api/runs/{run_id}")
        unknown = http.get("/api/runs/no-such-run")
    assert foreign.status_code == unknown.status_code == 404
    assert (
        foreign.json()
        == unknown.json()
        == {
            "code": "ERR_PRISM_SERVER_NOT_FOUND",
            "message": "no such run",
        }
    )


def test_approve_runs_the_tool_once_and_the_second_decision_is_409(
    database: Database, host: Host, base: str
) -> None:
    owner = {"tenant_id": "t1"}
    run_id = seed(database, host, ["A-1"], owner=owner)
    version, _ = stored(database, run_id, owner)
    with client(base, "t2") as http:
        foreign = http.post(
            f"/api/runs/{run_id}/resume", json={"expected_version": version, "decision": "approve"}
        )
    assert foreign.status_code == 404
    assert foreign.json() == {"code": "ERR_PRISM_SERVER_NOT_FOUND", "message": "no such run"}
    assert stored(database, run_id, owner) == (version, "suspended")
    with client(base) as http:
        answer = http.post(
            f"/api/runs/{run_id}/resume", json={"expected_version": version, "decision": "approve"}
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "succeeded"
        assert answer.json()["text"] == "refunds settled"
        again = http.post(
            f"/api/runs/{run_id}/resume", json={"expected_version": version, "decision": "approve"}
        )
    assert again.status_code == 409
    assert again.json()["code"] == "ERR_PRISM_AGENT_RUN_STATE"
    assert host.refunds == ["A-1"]
    assert stored(database, run_id, owner)[1] == "succeeded"


def test_deny_and_per_call_batches(database: Database, host: Host, base: str) -> None:
    owner = {"tenant_id": "t1"}
    denied = seed(database, host, ["A-1"], owner=owner)
    batch = seed(database, host, ["B-2", "C-3"], owner=owner)
    with client(base) as http:
        version = http.get(f"/api/runs/{denied}").json()["version"]
        answer = http.post(
            f"/api/runs/{denied}/resume", json={"expected_version": version, "decision": "deny"}
        )
        assert answer.json()["status"] == "denied"
        detail = http.get(f"/api/runs/{batch}").json()
        ids = {item["tool_call_id"]: item["approval_id"] for item in detail["pending"]}
        decisions = [
            {
                "approval_id": ids["c1"],
                "outcome": "allow_once",
                "modified_arguments": {"order": "B-9"},
            },
            {"approval_id": ids["c2"], "outcome": "reject_once", "reason": "already refunded"},
        ]
        answer = http.post(
            f"/api/runs/{batch}/resume",
            json={"expected_version": detail["version"], "decisions": decisions},
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "succeeded"
    assert host.refunds == ["B-9"]


def test_invalid_decisions_are_422_with_the_decision_code(
    database: Database, host: Host, base: str
) -> None:
    owner = {"tenant_id": "t1"}
    run_id = seed(database, host, ["A-1"], owner=owner)
    with client(base) as http:
        detail = http.get(f"/api/runs/{run_id}").json()
        version, approval = detail["version"], detail["pending"][0]["approval_id"]
        url = f"/api/runs/{run_id}/resume"
        malformed = http.post(url, json={"expected_version": version, "decision": "maybe"})
        assert malformed.status_code == 422
        assert malformed.json()["code"] == "ERR_PRISM_DECISION_INVALID"
        unknown = http.post(
            url,
            json={
                "expected_version": version,
                "decisions": [{"approval_id": "nope", "outcome": "allow_once"}],
            },
        )
        assert unknown.status_code == 422
        assert unknown.json()["code"].startswith("ERR_PRISM_DECISION_")
        schema = http.post(
            url,
            json={
                "expected_version": version,
                "decisions": [
                    {
                        "approval_id": approval,
                        "outcome": "allow_once",
                        "modified_arguments": {"order": 7},
                    }
                ],
            },
        )
        assert schema.status_code == 422
        assert schema.json()["code"] == "ERR_PRISM_DECISION_INVALID"
        assert schema.json()["message"] == "Modified arguments failed schema validation"
        assert stored(database, run_id, owner) == (version, "suspended")
        not_json = http.post(url, content=b"{nope", headers={"content-type": "application/json"})
        assert not_json.status_code == 400
        listed = http.post(url, json=[1, 2])
        assert listed.status_code == 400
    assert host.refunds == []


def test_authorize_answers_401_and_403(database: Database, host: Host, base: str) -> None:
    run_id = seed(database, host, ["A-1"], owner={"tenant_id": "t1"})
    for route in ("/api/runs", f"/api/runs/{run_id}"):
        with client(base, None) as http:
            nobody = http.get(route)
        with client(base, "blocked") as http:
            blocked = http.get(route)
        assert nobody.status_code == 401
        assert nobody.json()["code"] == "ERR_PRISM_WEB_UNAUTHENTICATED"
        assert blocked.status_code == 403
        assert blocked.json()["code"] == "ERR_PRISM_WEB_FORBIDDEN"
    with client(base, None) as http:
        assert http.post(f"/api/runs/{run_id}/resume", json={}).status_code == 401


def test_server_sent_events_end_with_the_terminal_event(
    database: Database, host: Host, base: str
) -> None:
    owner = {"tenant_id": "t1"}
    run_id = seed(database, host, ["A-1"], owner=owner)
    version, _ = stored(database, run_id, owner)
    body = {"expected_version": version, "decision": "approve"}
    stream = {"accept": "text/event-stream"}
    with client(base) as http:
        with http.stream("POST", f"/api/runs/{run_id}/resume", json=body, headers=stream) as sse:
            assert sse.status_code == 200
            assert sse.headers["content-type"].startswith("text/event-stream")
            text = sse.read().decode()
        stale = http.post(f"/api/runs/{run_id}/resume", json=body, headers=stream)
    frames = sse_frames_with_ids(text)
    types = [event for _, event, _ in frames]
    # What the worker did after the decision, observed from the stores: the approved call's
    # result, the answer, the end; each with an id to resume after.
    assert types == ["tool_execution_finished", "message_finished", "agent_finished", "result"]
    assert frames[-1][2]["status"] == "succeeded"
    assert all(data["type"] == event for _, event, data in frames[:-1])
    assert all(event_id for event_id, _, _ in frames[:-1])
    assert stale.status_code == 409
    assert stale.headers["content-type"].startswith("application/json")
    assert host.refunds == ["A-1"]


def test_bodies_over_the_bound_are_413(database: Database, host: Host) -> None:
    run_id = seed(database, host, ["A-1"], owner={"tenant_id": "t1"})
    with serve(database, host, max_body_bytes=512) as url, client(url) as http:
        big = {"expected_version": 1, "decision": "approve", "pad": "x" * 600}
        answer = http.post(f"/api/runs/{run_id}/resume", json=big)

        def chunks() -> Iterator[bytes]:
            yield b'{"pad": "'
            for _ in range(10):
                yield b"y" * 100
            yield b'"}'

        streamed = http.post(
            f"/api/runs/{run_id}/resume",
            content=chunks(),
            headers={"content-type": "application/json"},
        )
    assert answer.status_code == streamed.status_code == 413
    assert answer.json()["code"] == "ERR_PRISM_WEB_BODY_TOO_LARGE"
    assert host.refunds == []


def test_restore_failures_and_in_doubt_runs_are_409(database: Database, host: Host) -> None:
    owner = {"tenant_id": "t1"}
    run_id = seed(database, host, ["A-1"], owner=owner)
    doubtful = seed(database, host, ["B-2", "C-3"], owner=owner)
    make_in_doubt(database, doubtful, owner=owner)

    def refuse(context: Any) -> None:
        raise RuntimeError("the sandbox is gone")

    with serve(database, host, restore_hooks=[refuse]) as url, client(url) as http:
        version = http.get(f"/api/runs/{run_id}").json()["version"]
        answer = http.post(
            f"/api/runs/{run_id}/resume", json={"expected_version": version, "decision": "approve"}
        )
        assert answer.status_code == 409
        assert answer.json()["code"] == "ERR_PRISM_CHECKPOINT_RESTORE"
        listed = http.get("/api/runs", params={"recoverable": "true"}).json()["runs"]
        # The approved run stays recorded (running, no lease), left as it is by the worker
        # whose restore hook failed; the doubtful one waits for a resolution.
        assert {run["run_id"]: run["in_doubt"] for run in listed} == {
            run_id: [],
            doubtful: ["c1"],
        }
        detail = http.get(f"/api/runs/{doubtful}").json()
        assert detail["in_doubt_calls"] == [
            {
                "tool_call_id": "c1",
                "tool": "refund",
                "arguments": {"order": "B-2"},
                "idempotency_key": idempotency_key(doubtful, "c1"),
            }
        ]
        version = detail["version"]
        blocked = http.post(
            f"/api/runs/{doubtful}/resume",
            json={"expected_version": version, "decision": "continue"},
        )
    assert blocked.status_code == 409
    assert host.refunds == []


def test_pending_arguments_pass_the_agent_redactor(database: Database) -> None:
    """A call whose arguments carry a secret is never offered for approval (the approver could
    not see what would run), and the secret appears nowhere in the run's detail."""
    # A secret no id, timestamp or number in the detail can contain by chance.
    host = Host(secrets=["pan-4111-0042"])
    run_id = seed(database, host, ["A-1", "ASK"], owner={"tenant_id": "t1"})
    with serve(database, host) as url, client(url) as http:
        response = http.get(f"/api/runs/{run_id}")
    detail = response.json()
    calls = {item["tool_call_id"]: item for item in detail["pending"]}
    assert calls["c1"]["arguments"] == {"order": "A-1"}
    assert "c2" not in calls
    assert "pan-4111-0042" not in response.text


def test_elicitations_are_answered(database: Database, host: Host, base: str) -> None:
    run_id = seed(database, host, ["A-1", "ASK"], owner={"tenant_id": "t1"})
    with client(base) as http:
        detail = http.get(f"/api/runs/{run_id}").json()
        calls = {item["tool_call_id"]: item for item in detail["pending"]}
        assert calls["c2"]["kind"] == "elicitation"
        assert calls["c2"]["tool"] == "confirm"
        assert calls["c2"]["elicitation_schema"]["required"] == ["approved_by"]
        url_resume = f"/api/runs/{run_id}/resume"
        answer = {"approval_id": calls["c2"]["approval_id"], "outcome": "allow_once"}
        approve = {"approval_id": calls["c1"]["approval_id"], "outcome": "allow_once"}
        wrong = http.post(
            url_resume,
            json={
                "expected_version": detail["version"],
                "decisions": [approve, {**answer, "elicitation": {"who": 1}}],
            },
        )
        assert wrong.status_code == 422, wrong.text
        assert wrong.json()["code"] == "ERR_PRISM_DECISION_INVALID"
        done = http.post(
            url_resume,
            json={
                "expected_version": detail["version"],
                "decisions": [approve, {**answer, "elicitation": {"approved_by": "Ana"}}],
            },
        )
        assert done.status_code == 200, done.text
        assert done.json()["status"] == "succeeded"
    # The answer is the confirm call's result: only the refund ran.
    assert host.refunds == ["A-1"]


def test_a_denied_run_streams_its_denial(database: Database, host: Host, base: str) -> None:
    owner = {"tenant_id": "t1"}
    run_id = seed(database, host, ["A-1"], owner=owner)
    version, _ = stored(database, run_id, owner)
    body = {"expected_version": version, "decision": "deny"}
    with client(base) as http:
        answer = http.post(
            f"/api/runs/{run_id}/resume", json=body, headers={"accept": "text/event-stream"}
        )
    frames = sse_frames(answer.text)
    assert [event for event, _ in frames] == ["agent_denied", "result"]
    assert frames[-1][1]["status"] == "denied"
    assert stored(database, run_id, owner)[1] == "denied"
    assert host.refunds == []


@pytest.mark.parametrize("outcome", ["completed", "failed"])
def test_in_doubt_calls_are_resolved_over_http(
    database: Database, host: Host, base: str, outcome: str
) -> None:
    """A run that crashed between ``refund B-2``'s dispatch and its result is settled by an
    operator's resolution: the call is never run again, the rest of its round runs once, and
    the stored run records the outcome, the result the session keeps and the audit."""
    owner = {"tenant_id": "t1"}
    run_id = seed(database, host, ["B-2", "C-3"], owner=owner)
    make_in_doubt(database, run_id, owner=owner)
    version, status = stored(database, run_id, owner)
    assert status == "running"
    resolution: dict[str, Any] = {"tool_call_id": "c1", "outcome": outcome}
    if outcome == "completed":
        resolution["result"] = {"refunded": "B-2", "by": "operator"}
    else:
        resolution["reason"] = "the payment provider rejected it"
    body = {"expected_version": version, "decision": "continue", "resolutions": [resolution]}
    with client(base) as http:
        answer = http.post(f"/api/runs/{run_id}/resume", json=body)
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "succeeded"
        assert answer.json()["text"] == "refunds settled"
        again = http.post(f"/api/runs/{run_id}/resume", json=body)
        assert again.status_code == 409
        detail = http.get(f"/api/runs/{run_id}").json()
    assert detail["status"] == "succeeded"
    assert detail["in_doubt_calls"] == []
    assert host.refunds == ["C-3"]
    value, results = stored_run(database, run_id, owner)
    assert value["status"] == "succeeded"
    assert detail["version"] == answer.json()["version"] == stored(database, run_id, owner)[0]
    assert answer.json()["version"] > version
    assert results["c2"] == {"refunded": "C-3"}
    if outcome == "completed":
        assert results["c1"] == {"refunded": "B-2", "by": "operator"}
    else:
        assert "the payment provider rejected it" in results["c1"]
    [audit] = value["resolutions"]
    assert (audit["tool_call_id"], audit["outcome"], audit["source"]) == ("c1", outcome, "operator")


def test_a_client_that_leaves_an_event_stream_does_not_stop_the_run(database: Database) -> None:
    """A real SSE client reads the resume's first frames and disconnects while the model is
    still answering: the run is its worker's, so it goes on to its end (``succeeded``), and
    the refund ran once (a disconnect used to abort the resumed run)."""
    host = Host(answer_delay=2)
    owner = {"tenant_id": "t1"}
    run_id = seed(database, host, ["A-1"], owner=owner)
    version, _ = stored(database, run_id, owner)
    body = {"expected_version": version, "decision": "approve"}
    with serve(database, host) as url, client(url) as http:
        with http.stream(
            "POST", f"/api/runs/{run_id}/resume", json=body, headers={"accept": "text/event-stream"}
        ) as sse:
            seen = ""
            for chunk in sse.iter_text():
                seen += chunk
                if "event: tool_execution_finished" in seen:
                    break  # the refund ran; the model is now answering, slowly
        deadline = time.monotonic() + 60
        while stored(database, run_id, owner)[1] == "running":
            assert time.monotonic() < deadline, "the run never reached its end"
            time.sleep(0.1)
    assert stored(database, run_id, owner)[1] == "succeeded"
    assert host.refunds == ["A-1"]


def test_a_body_that_repeats_a_key_is_refused_and_decides_nothing(
    database: Database, host: Host, base: str
) -> None:
    """A resume body with a key twice (``decision`` "deny" then "approve", or a repeated key
    inside a decision) is a 400 naming the key: nothing is decided, nothing runs, and the
    checkpoint is as it was."""
    owner = {"tenant_id": "t1"}
    run_id = seed(database, host, ["A-1"], owner=owner)
    version, _ = stored(database, run_id, owner)
    url = f"/api/runs/{run_id}/resume"
    headers = {"content-type": "application/json"}
    top = f'{{"expected_version": {version}, "decision": "deny", "decision": "approve"}}'
    nested = (
        f'{{"expected_version": {version}, "decisions": [{{"approval_id": "x", '
        '"outcome": "reject_once", "outcome": "allow_once"}]}'
    )
    with client(base) as http:
        for body, key in ((top, "decision"), (nested, "outcome")):
            answer = http.post(url, content=body.encode(), headers=headers)
            assert answer.status_code == 400
            assert answer.json()["code"] == "ERR_PRISM_WEB_BAD_REQUEST"
            assert f"repeats the key '{key}'" in answer.json()["message"]
    assert stored(database, run_id, owner) == (version, "suspended")
    assert host.refunds == []


def test_a_corrupt_run_record_is_reported_not_fatal(sqlite_database: Database, host: Host) -> None:
    """``GET /api/runs`` over a store with one run row rewritten with ``sqlite3`` so it cannot
    be read back: 200, the other runs, and the corrupt one named in ``unreadable``."""
    owner = {"tenant_id": "t1"}
    good = seed(sqlite_database, host, ["A-1"], owner=owner)
    bad = seed(sqlite_database, host, ["B-2"], owner=owner)
    path = sqlite_database.url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        table = f"{sqlite_database.prefix}checkpoints"
        db.execute(f"UPDATE {table} SET value = '{{\"status\": ' WHERE key = ?", (bad,))
    with serve(sqlite_database, host) as url, client(url) as http:
        answer = http.get("/api/runs")
    assert answer.status_code == 200
    body = answer.json()
    assert [run["run_id"] for run in body["runs"]] == [good]
    assert [u["key"] for u in body["unreadable"]] == [bad]
    assert "corrupt" in body["unreadable"][0]["reason"]


@pytest.mark.parametrize(
    ("scope", "actor"),
    [
        ({"tenant_id": "t1", "sub": "user-7", "actor": "ana@acme.example"}, "ana@acme.example"),
        ({"tenant_id": "t1", "sub": "user-7"}, "user-7"),
        ({"tenant_id": "t1"}, "api"),
    ],
)
def test_the_audit_names_the_authorized_caller(
    database: Database, host: Host, scope: dict[str, str], actor: str
) -> None:
    """The decision's actor is the caller's ``actor``, else its ``sub``, else ``"api"`` (the
    channel's name) — never what the body claims, nor its channel; the run detail carries
    the audit."""
    run_id = seed(database, host, ["A-1"], owner=scope)
    version, _ = stored(database, run_id, scope)
    with (
        serve(database, host, authorize=lambda request: dict(scope)) as url,
        client(url, None) as http,
    ):
        answer = http.post(
            f"/api/runs/{run_id}/resume",
            json={
                "expected_version": version,
                "decision": "approve",
                "actor": "mallory",
                "channel": "cli",
                "reason": "refund approved by phone",
            },
        )
        assert answer.status_code == 200, answer.text
        detail = http.get(f"/api/runs/{run_id}").json()
    assert detail["status"] == "succeeded"
    assert [
        (r["tool_call_id"], r["tool_name"], r["outcome"], r["actor"], r["reason"], r["version"])
        for r in detail["audit"][:1]
    ] == [("c1", "refund", "allow_once", actor, "refund approved by phone", version)]
    record = stored_run(database, run_id, scope)[0]["audit"][0]
    assert (record["actor"], record["channel"]) == (actor, "api")
    # The refund ran in the server's process: its receipt follows the decision.
    assert [(r["tool_call_id"], r["outcome"], r["channel"]) for r in detail["audit"][1:]] == [
        ("c1", "executed", "worker")
    ]


def test_a_run_of_a_retired_agent_can_still_be_denied(database: Database, host: Host) -> None:
    """The host serves the agent no more: an approve is refused, a deny ends the run denied
    and audits it; the run page's detail still reads."""
    owner = {"tenant_id": "t1"}
    run_id = seed(database, host, ["A-1"], owner=owner, agent_id="retired")
    version, _ = stored(database, run_id, owner)
    with serve(database, host) as url, client(url) as http:
        approve = http.post(
            f"/api/runs/{run_id}/resume", json={"expected_version": version, "decision": "approve"}
        )
        assert approve.status_code == 404
        assert stored(database, run_id, owner) == (version, "suspended")
        deny = http.post(
            f"/api/runs/{run_id}/resume",
            json={"expected_version": version, "decision": "deny", "reason": "agent retired"},
        )
        assert deny.status_code == 200, deny.text
        assert deny.json()["status"] == "denied"
        detail = http.get(f"/api/runs/{run_id}").json()
    assert detail["status"] == "denied"
    assert [(r["outcome"], r["actor"], r["reason"]) for r in detail["audit"]] == [
        ("deny", "api", "agent retired")
    ]
    assert host.refunds == []
