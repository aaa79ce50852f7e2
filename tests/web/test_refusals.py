"""The three HTTP faces answer the same bad request with the same status and code
(API.md, fourth round, "Callers"): 400 malformed JSON or a repeated key at any depth, 401 no
credentials, 403 a refused caller, 413 a body over ``max_body_bytes`` (1 MiB by default),
415 not JSON, 421 a ``Host`` that is not served. Sent over HTTP to one uvicorn process serving
the JSON API, AG-UI and A2A; the A2A face carries the code in its JSON-RPC error object.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ._support import Server, bearer

#: Where each face takes a JSON body.
FACES = {"server": "/api/runs/run_unknown/resume", "agui": "/agui/", "a2a": "/a2a/"}
JSON = {"content-type": "application/json"}
MIB = 1024 * 1024


def code_of(face: str, answer: httpx.Response) -> str:
    """The refusal's code in the face's error envelope."""
    body = answer.json()
    if face == "a2a":
        assert body["jsonrpc"] == "2.0"
        assert body["error"]["message"].startswith(body["error"]["data"]["code"])
        return str(body["error"]["data"]["code"])
    assert set(body) == {"code", "message"}
    return str(body["code"])


def _chunks(total: int) -> Iterator[bytes]:
    yield b'{"pad": "'
    sent = 0
    while sent < total:
        yield b"x" * 65536
        sent += 65536
    yield b'"}'


#: name → (headers, body, status, code); the body is sent as bytes (or streamed, without a
#: declared length, from an iterator).
CASES: dict[str, tuple[dict[str, str], Any, int, str]] = {
    "repeated key at depth": (
        {**bearer("ana"), **JSON},
        b'{"threadId": "t", "x": {"y": [{"approved": false, "approved": true}]}}',
        400,
        "ERR_PRISM_WEB_BAD_REQUEST",
    ),
    "repeated key at the top": (
        {**bearer("ana"), **JSON},
        b'{"decision": "deny", "decision": "approve"}',
        400,
        "ERR_PRISM_WEB_BAD_REQUEST",
    ),
    "malformed JSON": (
        {**bearer("ana"), **JSON},
        b'{"threadId": ',
        400,
        "ERR_PRISM_WEB_BAD_REQUEST",
    ),
    "not an object": ({**bearer("ana"), **JSON}, b"[1, 2]", 400, "ERR_PRISM_WEB_BAD_REQUEST"),
    "NaN": ({**bearer("ana"), **JSON}, b'{"x": NaN}', 400, "ERR_PRISM_WEB_BAD_REQUEST"),
    "nesting too deep": (
        {**bearer("ana"), **JSON},
        b'{"x": ' + b"[" * 200 + b"]" * 200 + b"}",
        400,
        "ERR_PRISM_WEB_BAD_REQUEST",
    ),
    "oversized, declared": (
        {**bearer("ana"), **JSON},
        json.dumps({"pad": "x" * (2 * MIB)}).encode(),
        413,
        "ERR_PRISM_WEB_BODY_TOO_LARGE",
    ),
    "oversized, streamed": (
        {**bearer("ana"), **JSON},
        "chunks",
        413,
        "ERR_PRISM_WEB_BODY_TOO_LARGE",
    ),
    "plain text": (
        {**bearer("ana"), "content-type": "text/plain"},
        b'{"x": 1}',
        415,
        "ERR_PRISM_WEB_UNSUPPORTED_MEDIA_TYPE",
    ),
    "a form post": (
        {**bearer("ana"), "content-type": "application/x-www-form-urlencoded"},
        b"x=1",
        415,
        "ERR_PRISM_WEB_UNSUPPORTED_MEDIA_TYPE",
    ),
    "no media type": (bearer("ana"), b'{"x": 1}', 415, "ERR_PRISM_WEB_UNSUPPORTED_MEDIA_TYPE"),
    "oversized plain text (the media type first)": (
        {**bearer("ana"), "content-type": "text/plain"},
        b"x" * (2 * MIB),
        415,
        "ERR_PRISM_WEB_UNSUPPORTED_MEDIA_TYPE",
    ),
    "no credentials": (JSON, b'{"x": 1}', 401, "ERR_PRISM_WEB_UNAUTHENTICATED"),
    "no credentials and a repeated key (the caller first)": (
        JSON,
        b'{"x": 1, "x": 2}',
        401,
        "ERR_PRISM_WEB_UNAUTHENTICATED",
    ),
    "a refused caller": (
        {**bearer("mallory"), **JSON},
        b'{"x": 1}',
        403,
        "ERR_PRISM_WEB_FORBIDDEN",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_face_refuses_a_bad_request_with_one_status(server: Server, case: str) -> None:
    """Each bad request gets the same status and code from the JSON API, AG-UI and A2A."""
    headers, body, status, code = CASES[case]
    seen = {}
    with httpx.Client(base_url=server.base, timeout=60) as http:
        for face, path in FACES.items():
            content = _chunks(2 * MIB) if body == "chunks" else body
            answer = http.post(path, content=content, headers=headers)
            seen[face] = (answer.status_code, code_of(face, answer))
            if status == 401:
                assert answer.headers["www-authenticate"] == "Bearer"
    assert seen == dict.fromkeys(FACES, (status, code))


@pytest.mark.parametrize("name", ["attacker.example", "attacker.example:80", "127.0.0.1.nip.io"])
def test_every_token_less_face_refuses_a_host_it_does_not_serve(
    default_server: Server, name: str
) -> None:
    """Without a token every face serves this machine only: a request naming another host
    (a page whose DNS name was rebound to 127.0.0.1) is 421 on all three; addressed to a
    loopback name, the same request passes the gate (and meets the face's own checks)."""
    seen = {}
    passed = {}
    with httpx.Client(base_url=default_server.base, timeout=60) as http:
        for face, path in FACES.items():
            answer = http.post(path, content=b'{"x": 1}', headers={**JSON, "host": name})
            seen[face] = (answer.status_code, code_of(face, answer))
            local = http.post(
                path, content=b'{"x": 1, "x": 2}', headers={**JSON, "host": "localhost"}
            )
            passed[face] = (local.status_code, code_of(face, local))
    assert seen == dict.fromkeys(FACES, (421, "ERR_PRISM_WEB_MISDIRECTED"))
    assert passed == dict.fromkeys(FACES, (400, "ERR_PRISM_WEB_BAD_REQUEST"))


def test_the_refusals_are_decided_in_one_table() -> None:
    """The table every face answers from: one class and one code per status."""
    from prism_web import REFUSALS

    assert [(status, cls.status, cls.code) for status, cls, _ in REFUSALS] == [
        (421, 421, "ERR_PRISM_WEB_MISDIRECTED"),
        (403, 403, "ERR_PRISM_WEB_FORBIDDEN"),
        (401, 401, "ERR_PRISM_WEB_UNAUTHENTICATED"),
        (415, 415, "ERR_PRISM_WEB_UNSUPPORTED_MEDIA_TYPE"),
        (413, 413, "ERR_PRISM_WEB_BODY_TOO_LARGE"),
        (400, 400, "ERR_PRISM_WEB_BAD_REQUEST"),
    ]
