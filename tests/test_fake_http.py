"""The loopback HTTP server that provider tests use behaves like a real one."""

from __future__ import annotations

import httpx
import pytest

from tests.fake_http import Reply, named_sse, serve, sse, sse_frames


def test_replays_chunks_and_records_the_request() -> None:
    """A scripted SSE reply arrives intact and the request is recorded."""
    with serve(Reply(chunks=sse([{"n": 1}, {"n": 2}]))) as server:
        response = httpx.post(server.base_url + "/v1/x", json={"hello": "world"})
    assert response.status_code == 200
    assert response.text == 'data: {"n": 1}\n\ndata: {"n": 2}\n\ndata: [DONE]\n\n'
    (request,) = server.requests
    assert (request.method, request.path, request.json()) == ("POST", "/v1/x", {"hello": "world"})


def test_sees_a_client_close_mid_stream() -> None:
    """Closing the response early is observed by the server as a disconnect."""
    chunks: tuple[bytes | float, ...] = (b"data: 1\n\n",) + (0.05, b"data: more\n\n") * 100
    with serve(Reply(chunks=chunks)) as server, httpx.Client() as client:
        with client.stream("POST", server.base_url + "/s") as response:
            next(response.iter_bytes())
        assert server.wait_for_disconnect(5)


def test_a_stalled_reply_times_the_client_out() -> None:
    """A reply that stops sending makes the client's read timeout fire."""

    def read_all(url: str) -> None:
        with httpx.Client(timeout=0.3) as client, client.stream("POST", url) as response:
            for _ in response.iter_bytes():
                pass

    with (
        serve(Reply(chunks=(b"data: 1\n\n",), stall=True)) as server,
        pytest.raises(httpx.ReadTimeout),
    ):
        read_all(server.base_url + "/s")


def test_named_frames_and_recorded_transcripts() -> None:
    """Named-event frames carry the dict's type; a transcript splits into whole frames."""
    (frame,) = named_sse([{"type": "ping"}])
    assert frame == b'event: ping\ndata: {"type": "ping"}\n\n'
    recorded = 'event: a\r\ndata: {"n": 1}\r\n\r\nevent: b\ndata: {}\n\n\n'
    assert sse_frames(recorded) == (b'event: a\ndata: {"n": 1}\n\n', b"event: b\ndata: {}\n\n")
    with serve(Reply(chunks=sse_frames(recorded))) as server:
        response = httpx.post(server.base_url + "/v1/messages", json={})
    assert response.text == 'event: a\ndata: {"n": 1}\n\nevent: b\ndata: {}\n\n'
