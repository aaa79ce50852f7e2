"""Bodies every face reads the same way: a repeated key never decides, a large body is never
read whole.

- ``{"approved": false, "approved": true}`` (and ``"outcome"`` twice) at any depth is 400 on
  the JSON API, AG-UI and A2A, and the refund never runs; the same body without the repeat is
  taken and runs it once (so the refusal is the repeat's, not the body's).
- A2A refuses a 20 MiB body with 413: declared (answered before the body is sent), streamed
  (answered before it is all sent), and, measured at the ASGI boundary, every face stops
  asking for body chunks at the first one past its 1 MiB bound.
"""

from __future__ import annotations

import json
import select
import socket
from typing import Any

import anyio
import httpx
import pytest

from prism_a2a import create_a2a_app
from prism_agui import create_agui_app
from prism_core import (
    Principal,
    StorePair,
    create_agent,
    create_memory_checkpoint_store,
    create_memory_session_store,
)
from prism_server import create_app
from tests.agui._support import new_thread, run_client

from ._support import Server, bearer, order, start_as, stored
from .agents import read_effects

MIB = 1024 * 1024
CHUNK = 64 * 1024


def _pending(server: Server, run_id: str) -> tuple[str, int]:
    found = stored(server.db, run_id)
    assert found.state.interruption is not None
    (decision,) = found.state.interruption.pending_decisions
    return decision.approval_id, found.version


def _ran(server: Server, refunded: str) -> int:
    return sum(1 for line in read_effects(server.effects) if line["order"] == refunded)


def test_a_repeated_outcome_never_decides_over_the_json_api(server: Server) -> None:
    refunded = order()
    run_id, _ = start_as(server.db, server.effects, "ana", f"refund {refunded}")
    approval, version = _pending(server, run_id)
    repeated = (
        f'{{"expected_version": {version}, "decisions": [{{"approval_id": "{approval}", '
        '"outcome": "reject_once", "outcome": "allow_once"}]}'
    )
    once = repeated.replace('"outcome": "reject_once", ', "")
    url = f"{server.base}/api/runs/{run_id}/resume"
    headers = {**bearer("bob"), "content-type": "application/json"}
    with httpx.Client(timeout=60) as http:
        refused = http.post(url, content=repeated, headers=headers)
        assert refused.status_code == 400
        assert "outcome" in refused.json()["message"]
        assert (stored(server.db, run_id).version, _ran(server, refunded)) == (version, 0)
        taken = http.post(url, content=once, headers=headers)
    assert taken.status_code == 200, taken.text
    assert _ran(server, refunded) == 1


def test_a_repeated_approved_never_decides_over_agui(server: Server) -> None:
    url = f"{server.base}/agui/"
    thread = new_thread()
    refunded = order()
    started = run_client(url, thread, [{"message": f"refund {refunded}"}], headers=bearer("ana"))
    (interrupt,) = started.interrupts(0)
    repeated = (
        f'{{"threadId": "{thread}", "runId": "r-2", "state": {{}}, "messages": [], "tools": [], '
        '"context": [], "forwardedProps": {}, "resume": [{"interruptId": '
        f'"{interrupt["id"]}", "status": "resolved", '
        '"payload": {"approved": false, "approved": true}}]}'
    )
    once = repeated.replace('"approved": false, ', "")
    headers = {**bearer("bob"), "content-type": "application/json"}
    with httpx.Client(timeout=60) as http:
        refused = http.post(url, content=repeated, headers=headers)
        assert refused.status_code == 400
        assert refused.json()["code"] == "ERR_PRISM_WEB_BAD_REQUEST"
        assert _ran(server, refunded) == 0
        taken = http.post(url, content=once, headers=headers)
    assert taken.status_code == 200
    assert '"type":"RUN_FINISHED"' in taken.text
    assert _ran(server, refunded) == 1


def test_a_repeated_outcome_never_decides_over_a2a(server: Server) -> None:
    refunded = order()
    send = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "role": "user",
                "messageId": f"m-{refunded}",
                "parts": [{"kind": "text", "text": f"refund {refunded}"}],
            }
        },
    }
    with httpx.Client(base_url=server.base, timeout=60, headers=bearer("ana")) as http:
        task = http.post("/a2a/", json=send).json()["result"]
    assert task["status"]["state"] == "input-required"
    run_id = task["id"]
    approval, version = _pending(server, run_id)
    repeated = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "message/send",
            "params": {
                "message": {
                    "kind": "message",
                    "role": "user",
                    "messageId": f"d-{refunded}",
                    "taskId": run_id,
                    "parts": [
                        {
                            "kind": "data",
                            "data": {"decisions": [{"approval_id": approval, "outcome": "X"}]},
                        }
                    ],
                }
            },
        }
    ).replace('"outcome": "X"', '"outcome": "reject_once", "outcome": "allow_once"')
    once = repeated.replace('"outcome": "reject_once", ', "")
    headers = {**bearer("bob"), "content-type": "application/json"}
    with httpx.Client(base_url=server.base, timeout=60) as http:
        refused = http.post("/a2a/", content=repeated, headers=headers)
        assert refused.status_code == 400
        assert refused.json()["error"]["data"]["code"] == "ERR_PRISM_WEB_BAD_REQUEST"
        assert (stored(server.db, run_id).version, _ran(server, refunded)) == (version, 0)
        taken = http.post("/a2a/", content=once, headers=headers)
    assert taken.status_code == 200
    assert taken.json()["result"]["status"]["state"] == "completed"
    assert _ran(server, refunded) == 1


def _status_line(sock: socket.socket) -> str:
    sock.settimeout(60)
    head = b""
    while b"\r\n" not in head:
        data = sock.recv(4096)
        if not data:
            break
        head += data
    return head.split(b"\r\n", 1)[0].decode()


def _request_head(server: Server, extra: str) -> bytes:
    return (
        f"POST /a2a/ HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
        "Authorization: Bearer ana\r\nContent-Type: application/json\r\n"
        f"{extra}\r\n"
    ).encode()


def test_a2a_answers_a_declared_20_mib_body_before_it_is_sent(server: Server) -> None:
    """A request declaring 20 MiB gets 413 after its first 64 KiB: the endpoint did not
    wait for (or read) the rest."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        sock.sendall(_request_head(server, f"Content-Length: {20 * MIB}\r\n"))
        sock.sendall(b'{"pad": "' + b"x" * CHUNK)
        assert _status_line(sock) == "HTTP/1.1 413 Request Entity Too Large"


def test_a2a_answers_a_streamed_20_mib_body_before_it_is_all_sent(server: Server) -> None:
    """A chunked 20 MiB body with no declared length: 413 arrives while most of it is still
    unsent (the sender stops as soon as the answer is readable)."""
    sent = 0
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        sock.sendall(_request_head(server, "Transfer-Encoding: chunked\r\n"))
        chunk = f"{CHUNK:x}\r\n".encode() + b"x" * CHUNK + b"\r\n"
        while sent < 20 * MIB:
            readable, writable, _ = select.select([sock], [sock], [], 60)
            if readable:
                break
            assert writable, "the connection neither answered nor took more within 60 s"
            sock.sendall(chunk)
            sent += CHUNK
        assert _status_line(sock) == "HTTP/1.1 413 Request Entity Too Large"
    assert sent < 20 * MIB


def _faces() -> dict[str, Any]:
    stores = StorePair(create_memory_checkpoint_store(), create_memory_session_store())
    agent = create_agent(id="billing", model={"provider": "mock", "model": "demo"})

    def authorize(request: Any) -> Principal:
        return Principal({"tenant_id": "acme"}, actor="ana")

    return {
        "/api/runs/r/resume": create_app(
            stores, resolve_agent=lambda agent_id: None, authorize=authorize
        ),
        "/": create_agui_app(agent, stores, definition_revision="r", authorize=authorize),
        "/a2a": create_a2a_app(
            agent, stores, definition_revision="r", url="http://localhost/", authorize=authorize
        ),
    }


@pytest.mark.parametrize("face", ["/api/runs/r/resume", "/", "/a2a"])
def test_no_face_reads_past_its_bound(face: str) -> None:
    """Fed 20 MiB in 64 KiB chunks (no declared length), each face asks for at most the
    chunks that reach 1 MiB and one more, and answers 413."""
    app = _faces()[face]
    path = "/" if face == "/a2a" else face
    asked = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal asked
        asked += 1
        more = asked < 20 * MIB // CHUNK
        return {"type": "http.request", "body": b"x" * CHUNK, "more_body": more}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"localhost"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 80),
        "state": {},
    }
    anyio.run(app, scope, receive, send)
    assert sent[0]["type"] == "http.response.start"
    assert sent[0]["status"] == 413
    assert asked <= MIB // CHUNK + 1
