"""Who may run and answer what: ``authorize`` (401, 403), ownership of threads and runs, the
default bearer-token and loopback checks, and the requests refused before any run, through
the official client where a client is involved and plain HTTP for malformed requests."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx

from prism_core import Message, TextContent, create_session_entry
from prism_store_sql import open_sql_stores

from ._support import Host, Server, new_thread, read_runs, run_client, serving

T1 = {"tenant_id": "t1"}
T2 = {"tenant_id": "t2"}


def _approve() -> dict[str, Any]:
    return {"status": "resolved", "payload": {"approved": True}}


def _sse_events(text: str) -> list[dict[str, Any]]:
    return [
        json.loads(line[len("data: ") :]) for line in text.split("\n") if line.startswith("data: ")
    ]


def _input(thread: str, content: Any = "hello") -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": "run-1",
        "messages": [{"id": "m1", "role": "user", "content": content}],
    }


def test_an_unknown_caller_gets_401_and_nothing_runs(server: Server, shared_host: Host) -> None:
    thread = new_thread()
    run = run_client(f"{server.url}/billing/", thread, [{"message": "refund A-1"}], tenant=None)
    end = run.end(0)
    assert (end["end"], end["status"]) == ("rejected", 401)
    assert "ERR_PRISM_WEB_UNAUTHENTICATED" in end["error"]
    assert run.events(0) == []
    assert read_runs(shared_host, thread, None) == read_runs(shared_host, thread, T1) == {}


def test_a_caller_authorize_refuses_gets_403(server: Server, shared_host: Host) -> None:
    thread = new_thread()
    run = run_client(f"{server.url}/billing/", thread, [{"message": "hi"}], tenant="blocked")
    end = run.end(0)
    assert (end["end"], end["status"]) == ("rejected", 403)
    assert "ERR_PRISM_WEB_FORBIDDEN" in end["error"]
    assert read_runs(shared_host, thread, {"tenant_id": "blocked"}) == {}


def test_another_tenant_can_neither_continue_nor_answer_a_thread(
    server: Server, shared_host: Host
) -> None:
    url = f"{server.url}/billing/"
    thread = new_thread()
    (interrupt,) = run_client(url, thread, [{"message": "refund A-1"}]).interrupts(0)
    (before,) = read_runs(shared_host, thread, T1).values()

    taken = run_client(url, thread, [{"message": "refund B-1"}], tenant="t2")
    assert taken.types(0) == ["RUN_STARTED", "RUN_ERROR"]
    assert taken.error(0)["code"] == "ERR_PRISM_AGUI_THREAD"
    answered = run_client(
        url, thread, [{"resume": [{"interruptId": interrupt["id"], **_approve()}]}], tenant="t2"
    )
    assert answered.types(0) == ["RUN_STARTED", "RUN_ERROR"]
    # The same answer as for an id that never existed: t2 cannot tell t1's run is there.
    assert answered.error(0)["code"] == "ERR_PRISM_DECISION_UNKNOWN"

    assert read_runs(shared_host, thread, T2) == {}
    (after,) = read_runs(shared_host, thread, T1).values()
    assert (after["status"], after["version"]) == ("suspended", before["version"])
    assert shared_host.effects(thread) == []
    # Its owner still answers it, and the refund runs once.
    done = run_client(url, thread, [{"resume": [{"interruptId": interrupt["id"], **_approve()}]}])
    assert done.finished(0)["outcome"] == {"type": "success"}
    assert shared_host.effects(thread) == [("refund", {"order": "A-1"})]


def test_a_session_started_elsewhere_is_not_continued(server: Server, shared_host: Host) -> None:
    thread = new_thread()

    async def seed() -> None:
        stores = open_sql_stores(shared_host.db_url)
        try:
            message = Message("user", (TextContent("my card is 4111"),))
            entry = create_session_entry(session_id=thread, kind="message", message=message)
            await stores.sessions.append(entry)
        finally:
            await stores.aclose()

    anyio.run(seed)
    run = run_client(f"{server.url}/assistant/", thread, [{"message": "hello"}])
    assert run.types(0) == ["RUN_STARTED", "RUN_ERROR"]
    assert run.error(0)["code"] == "ERR_PRISM_AGUI_THREAD"
    assert read_runs(shared_host, thread, T1) == {}


def test_an_input_without_a_user_message_is_refused(server: Server) -> None:
    run = run_client(f"{server.url}/assistant/", new_thread(), [{}])
    assert run.types(0) == ["RUN_STARTED", "RUN_ERROR"]
    assert run.error(0)["code"] == "ERR_PRISM_AGUI_INPUT"


def test_media_content_is_refused(server: Server, shared_host: Host) -> None:
    thread = new_thread()
    image = {"type": "image", "source": {"type": "url", "value": "https://example.com/a.png"}}
    body = _input(thread, [{"type": "text", "text": "look"}, image])
    answer = httpx.post(
        f"{server.url}/assistant/", json=body, headers={"x-tenant": "t1"}, timeout=30
    )
    assert answer.status_code == 200
    events = _sse_events(answer.text)
    assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_ERROR"]
    assert events[1]["code"] == "ERR_PRISM_AGUI_INPUT"
    assert read_runs(shared_host, thread, T1) == {}


def test_requests_that_are_not_run_inputs_are_refused_before_any_run(server: Server) -> None:
    url = f"{server.url}/assistant/"
    tenant = {"x-tenant": "t1"}
    with httpx.Client(timeout=30) as http:
        form = http.post(url, content=json.dumps(_input("t")), headers=tenant)
        assert form.status_code == 415
        assert form.json()["code"] == "ERR_PRISM_WEB_UNSUPPORTED_MEDIA_TYPE"
        plain = http.post(
            url, content=json.dumps(_input("t")), headers={**tenant, "content-type": "text/plain"}
        )
        assert plain.status_code == 415
        broken = http.post(
            url, content=b"{", headers={**tenant, "content-type": "application/json"}
        )
        assert broken.status_code == 400
        assert broken.json()["code"] == "ERR_PRISM_WEB_BAD_REQUEST"
        not_input = http.post(url, json={"threadId": "t", "runId": "r"}, headers=tenant)
        assert not_input.status_code == 400
        assert "messages" in not_input.json()["message"]
        huge = http.post(url, json=_input("t", "x" * (5 * 1024 * 1024)), headers=tenant)
        assert huge.status_code == 413
        assert huge.json()["code"] == "ERR_PRISM_WEB_BODY_TOO_LARGE"
        # Authentication comes first: a stranger learns nothing about the body.
        stranger = http.post(url, json={"threadId": "t"})
        assert stranger.status_code == 401


def test_the_default_authorize_takes_the_bearer_token(host: Host) -> None:
    env = {"PRISM_AGUI_TEST_DEFAULT_AUTH": "1", "PRISM_AGUI_TOKEN": "s3cret-token"}
    with serving(host, env=env) as server:
        url = f"{server.url}/assistant/"
        thread = new_thread()
        for headers in ({}, {"authorization": "Bearer wrong"}, {"x-tenant": "t1"}):
            refused = run_client(url, thread, [{"message": "hello"}], headers=headers)
            assert refused.end(0)["status"] == 401, headers
        run = run_client(
            url, thread, [{"message": "hello"}], headers={"authorization": "Bearer s3cret-token"}
        )
        assert run.finished(0)["outcome"] == {"type": "success"}
    # The token names one caller, the unscoped one.
    (state,) = read_runs(host, thread, None).values()
    assert state["status"] == "succeeded"


def test_without_a_token_the_default_serves_loopback_requests_only(host: Host) -> None:
    with serving(host, env={"PRISM_AGUI_TEST_DEFAULT_AUTH": "1"}) as server:
        url = f"{server.url}/assistant/"
        thread = new_thread()
        run = run_client(url, thread, [{"message": "hello"}], headers={})
        assert run.finished(0)["outcome"] == {"type": "success"}
        # A page whose own name was rebound to 127.0.0.1 still sends its name.
        rebound = httpx.post(
            url, json=_input(new_thread()), headers={"host": "attacker.example"}, timeout=30
        )
        assert rebound.status_code == 421
        assert rebound.json()["code"] == "ERR_PRISM_WEB_MISDIRECTED"
    assert len(read_runs(host, thread, None)) == 1
