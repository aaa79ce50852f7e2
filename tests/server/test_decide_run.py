"""Decide here, run there, through the server (API.md, fourth round): ``POST .../decisions``
records and runs nothing; the server's workers (or another's) run the decided run; ``GET
.../events`` streams it with ids a client resumes after; a client that disconnects only stops
watching."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from prism_server import create_app

from ._support import (
    Database,
    Host,
    client,
    header_tenant,
    running,
    seed,
    sse_frames_with_ids,
    stored,
)

OWNER = {"tenant_id": "t1"}


@pytest.fixture
def host() -> Host:
    """The host's agents."""
    return Host()


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


def until(condition: Any, seconds: float = 60) -> None:
    """Wait generously for ``condition()``; fail when it never holds."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.02)


def test_a_recorded_decision_runs_nothing_until_a_worker_takes_it(
    database: Database, host: Host
) -> None:
    """On a server without workers, ``POST /decisions`` answers 202 with the run still
    ``running`` and audited; nothing has run. A server with a worker on the same stores then
    runs the approved refund, once."""
    run_id = seed(database, host, ["A-1"], owner=OWNER)
    version, _ = stored(database, run_id, OWNER)
    with serve(database, host, workers=0) as url, client(url) as http:
        answer = http.post(
            f"/api/runs/{run_id}/decisions",
            json={"expected_version": version, "decision": "approve", "actor": "mallory"},
        )
    assert answer.status_code == 202, answer.text
    detail = answer.json()
    assert detail["status"] == "running"
    assert [(r["actor"], r["channel"]) for r in detail["audit"]] == [("api", "api")]
    assert host.refunds == []
    with serve(database, host, workers=1):
        until(lambda: stored(database, run_id, OWNER)[1] == "succeeded")  # type: ignore[index]
    assert host.refunds == ["A-1"]


def test_events_resume_after_the_last_event_id(database: Database, host: Host) -> None:
    """``GET /events`` streams a finished run's events with ids; reconnecting with
    ``Last-Event-ID`` (or ``?after=``) gives exactly what followed that event."""
    run_id = seed(database, host, ["A-1", "B-2"], owner=OWNER)
    version, _ = stored(database, run_id, OWNER)
    with serve(database, host) as url, client(url) as http:
        done = http.post(
            f"/api/runs/{run_id}/resume", json={"expected_version": version, "decision": "approve"}
        )
        assert done.json()["status"] == "succeeded"
        full = sse_frames_with_ids(http.get(f"/api/runs/{run_id}/events").text)
        second = full[1][0]
        again = sse_frames_with_ids(
            http.get(f"/api/runs/{run_id}/events", headers={"last-event-id": second}).text
        )
        query = sse_frames_with_ids(http.get(f"/api/runs/{run_id}/events?after={second}").text)
        bad = http.get(f"/api/runs/{run_id}/events", headers={"last-event-id": "7; x"})
        foreign = http.get(f"/api/runs/{run_id}/events", headers={"x-tenant": "t2"})
    kinds = [event for _, event, _ in full]
    assert kinds[-2:] == ["agent_finished", "result"]
    assert kinds.count("tool_execution_finished") == 2
    assert again == full[2:]
    assert query == full[2:]
    assert bad.status_code == 400
    assert foreign.status_code == 404


def test_a_client_leaving_the_stream_mid_tool_stops_only_its_watching(
    database: Database,
) -> None:
    """A client that asked for the resume as server-sent events disconnects while the
    approved refund runs: the run is not aborted, it reaches its end in the server's worker,
    and the refund ran exactly once."""
    host = Host(refund_delay=1.0)
    run_id = seed(database, host, ["A-1"], owner=OWNER)
    version, _ = stored(database, run_id, OWNER)
    body = {"expected_version": version, "decision": "approve"}
    with serve(database, host) as url:
        http = httpx.Client(base_url=url, headers={"x-tenant": "t1"}, timeout=60)
        stream = {"accept": "text/event-stream"}
        with (
            http,
            http.stream("POST", f"/api/runs/{run_id}/resume", json=body, headers=stream) as sse,
        ):
            assert sse.status_code == 200
            until(host.refunding.is_set)
            # Leaving the block closes the response, mid-tool.
        until(lambda: stored(database, run_id, OWNER)[1] == "succeeded")  # type: ignore[index]
    assert host.refunds == ["A-1"]
