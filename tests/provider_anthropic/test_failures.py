"""Failures of the Anthropic provider over the wire: stream errors, rate limits, auth, bad
requests, stalls and aborts, and how Prism's retry and abort handle them."""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import pytest

from prism_core import AgentRunError, ModelConfig, ProviderError, ProviderRequest
from prism_core import provider_errors as pe
from prism_core.provider_errors import retry_after_ms
from prism_core.signals import AbortSignal
from prism_provider_anthropic import create_anthropic_provider
from tests.fake_http import Reply, named_sse, serve

from .support import API_KEY, agent_for, error_reply, stream_reply, transcript

RETRY = {"max_attempts": 3, "base_delay_ms": 10, "max_delay_ms": 5000}
MESSAGE_START = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "claude-sonnet-4-6",
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    },
}
TEXT_START = {
    "type": "content_block_start",
    "index": 0,
    "content_block": {"type": "text", "text": ""},
}


def text_delta(text: str) -> dict[str, Any]:
    """One ``text_delta`` event of block 0."""
    return {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": text},
    }


async def one_turn(base_url: str, **provider: Any) -> list[Any]:
    """Every event of one ``generate`` call against ``base_url``."""
    request = ProviderRequest(model=ModelConfig("anthropic", "claude-sonnet-4-6"), messages=())
    async with create_anthropic_provider(api_key=API_KEY, base_url=base_url, **provider) as p:
        return [event async for event in p.generate(request)]


@pytest.mark.anyio
async def test_overloaded_error_event_before_output_is_retried() -> None:
    """An overloaded_error event mid-stream, before any output, is retryable: Prism retries
    and the run succeeds on the second attempt."""
    with serve(stream_reply("overloaded_midstream"), stream_reply("text")) as server:
        agent = agent_for(server.base_url, retry=RETRY)
        events = [e async for e in agent.create_session().stream("hi")]
    retries = [e for e in events if e.type == "retry_scheduled"]
    assert len(retries) == 1
    assert retries[0].error.code == pe.PROVIDER_OVERLOADED
    assert retries[0].error.retryable is True
    assert "Overloaded" in retries[0].error.message
    assert events[-1].type == "agent_finished"
    assert len(server.requests) == 2


@pytest.mark.anyio
async def test_error_event_after_output_fails_the_run() -> None:
    """Once text was streamed, a mid-stream error is not retried: the run fails with it."""
    chunks = named_sse(
        [
            MESSAGE_START,
            TEXT_START,
            text_delta("Partial"),
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        ]
    )
    with serve(Reply(chunks=chunks), stream_reply("text")) as server:
        agent = agent_for(server.base_url, retry=RETRY)
        with pytest.raises(AgentRunError) as caught:
            await agent.create_session().run("hi")
    assert caught.value.result.error.code == pe.PROVIDER_OVERLOADED
    assert len(server.requests) == 1


@pytest.mark.anyio
async def test_rate_limit_waits_for_retry_after_then_succeeds() -> None:
    """A 429 with retry-after: 1 is retried no sooner than a second later, and succeeds."""
    limited = error_reply(
        429, "rate_limit_error", "Number of request tokens exceeded", ("retry-after", "1")
    )
    with serve(limited, stream_reply("text")) as server:
        agent = agent_for(server.base_url, retry=RETRY)
        started = time.monotonic()
        events = [e async for e in agent.create_session().stream("hi")]
        elapsed = time.monotonic() - started
    (retry,) = [e for e in events if e.type == "retry_scheduled"]
    assert retry.delay_ms == 1000
    assert retry.error.code == pe.PROVIDER_RATE_LIMITED
    assert retry.error.retry_after_ms == 1000
    assert elapsed >= 1.0
    assert events[-1].type == "agent_finished"
    assert [e.delta.text for e in events if e.type == "message_delta"] == ["Hello", ", world!"]
    assert len(server.requests) == 2
    assert server.requests[1].json() == server.requests[0].json()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "kind", "code"),
    [
        (529, "overloaded_error", pe.PROVIDER_OVERLOADED),
        (500, "api_error", pe.PROVIDER_SERVER),
        (503, "api_error", pe.PROVIDER_SERVER),
    ],
)
async def test_server_side_failures_are_retryable(status: int, kind: str, code: str) -> None:
    """529 and 5xx become one retryable error event (the SDK itself does not retry)."""
    with serve(error_reply(status, kind, "try later", ("retry-after-ms", "250"))) as server:
        events = await one_turn(server.base_url)
    (event,) = events
    assert isinstance(event, ProviderError)
    assert (event.error.code, event.error.retryable) == (code, True)
    assert event.error.retry_after_ms == 250
    assert f"{status}" in event.error.message
    assert len(server.requests) == 1


@pytest.mark.anyio
async def test_authentication_failure_shows_the_server_message_never_the_key() -> None:
    """A 401 is final: one request even with retry on, the server's message is shown, and the
    key appears nowhere in the error (even when the server echoes it back)."""
    echoed = f"invalid x-api-key: {API_KEY}"
    with serve(error_reply(401, "authentication_error", echoed)) as server:
        agent = agent_for(server.base_url, retry=RETRY)
        with pytest.raises(AgentRunError) as caught:
            await agent.create_session().run("hi")
    error = caught.value.result.error
    assert error.code == pe.PROVIDER_AUTH
    assert error.retryable is False
    assert "invalid x-api-key" in error.message
    assert "401" in error.message
    assert API_KEY not in error.message
    assert API_KEY not in str(caught.value)
    assert "[REDACTED]" in error.message
    assert len(server.requests) == 1


@pytest.mark.anyio
async def test_bad_request_is_final_with_the_server_message() -> None:
    """A 400 invalid_request_error is not retried and carries the server's explanation."""
    message = "max_tokens: 999999 > 64000, which is the maximum allowed"
    with serve(error_reply(400, "invalid_request_error", message)) as server:
        (event,) = await one_turn(server.base_url)
    assert isinstance(event, ProviderError)
    assert event.error.code == pe.PROVIDER_REQUEST
    assert event.error.retryable is False
    assert message in event.error.message


@pytest.mark.anyio
async def test_a_stalled_stream_hits_the_read_timeout() -> None:
    """A stream that stops sending fails with a retryable timeout after the read timeout, and
    the connection is closed."""
    stalled = Reply(chunks=named_sse([MESSAGE_START, TEXT_START]), stall=True)
    with serve(stalled) as server:
        agent = agent_for(server.base_url, timeout={"read": 0.4, "connect": 2.0})
        started = time.monotonic()
        with anyio.fail_after(10), pytest.raises(AgentRunError) as caught:
            await agent.create_session().run("hi")
        elapsed = time.monotonic() - started
        assert await anyio.to_thread.run_sync(server.wait_for_disconnect, 5)
    error = caught.value.result.error
    assert error.code == pe.PROVIDER_TIMEOUT
    assert error.retryable is True
    assert elapsed >= 0.4  # never before the read timeout; fail_after bounds the rest


@pytest.mark.anyio
async def test_a_stream_cut_before_message_stop_is_a_retryable_error() -> None:
    """A response that ends without message_stop is reported as truncated, retryable."""
    with serve(Reply(chunks=transcript("text")[:4])) as server:
        events = await one_turn(server.base_url)
    error = events[-1]
    assert isinstance(error, ProviderError)
    assert (error.error.code, error.error.retryable) == (pe.PROVIDER_STREAM, True)


def slow_stream() -> tuple[bytes | float, ...]:
    """A stream that keeps sending text for ten seconds."""
    head: tuple[bytes | float, ...] = named_sse([MESSAGE_START, TEXT_START, text_delta("First")])
    tail: tuple[bytes | float, ...] = ()
    for frame in named_sse([text_delta(" more")] * 200):
        tail += (0.05, frame)
    return head + tail


@pytest.mark.anyio
async def test_aborting_the_run_closes_the_http_stream_at_once() -> None:
    """session.abort() mid-stream ends the run as aborted and the server sees the connection
    close right away."""
    with serve(Reply(chunks=slow_stream())) as server:
        session = agent_for(server.base_url).create_session()
        events = []
        with anyio.fail_after(10):
            async for event in session.stream("Tell me a long story"):
                events.append(event)
                if event.type == "message_delta":
                    session.abort("user pressed stop")
            closed = await anyio.to_thread.run_sync(server.wait_for_disconnect, 5)
    assert closed  # closed mid-reply, long before the ten-second stream ends
    assert events[-1].type == "error"
    assert events[-1].status == "aborted"
    assert len(server.requests) == 1


@pytest.mark.anyio
async def test_the_request_signal_alone_stops_the_stream() -> None:
    """Firing request.signal (without cancelling the consumer) ends generate() promptly and
    closes the connection."""
    signal = AbortSignal()
    request = ProviderRequest(
        model=ModelConfig("anthropic", "claude-sonnet-4-6"), messages=(), signal=signal
    )
    with serve(Reply(chunks=slow_stream())) as server:
        async with create_anthropic_provider(api_key=API_KEY, base_url=server.base_url) as p:
            seen: list[Any] = []
            with anyio.fail_after(5):
                async for event in p.generate(request):
                    seen.append(event)
                    if len(seen) == 1:
                        signal.abort("stop")
        assert await anyio.to_thread.run_sync(server.wait_for_disconnect, 5)
    assert len(seen) <= 2


def test_retry_after_forms() -> None:
    """retry-after-ms wins; retry-after may be seconds or an HTTP date; junk is ignored."""
    assert retry_after_ms({"retry-after-ms": "1500", "retry-after": "9"}) == 1500
    assert retry_after_ms({"retry-after": "2"}) == 2000
    assert retry_after_ms({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0
    assert retry_after_ms({"retry-after": "soon"}) is None
    assert retry_after_ms({}) is None


def test_error_bodies_are_json_shaped_like_the_api() -> None:
    """The helper's error body is what the API sends (the SDK parses it)."""
    reply = error_reply(429, "rate_limit_error", "slow down")
    body = json.loads(b"".join(c for c in reply.chunks if isinstance(c, bytes)))
    assert body["error"] == {"type": "rate_limit_error", "message": "slow down"}


@pytest.mark.anyio
async def test_no_credentials_is_a_final_configuration_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """Without any key the turn fails at once, not retryable, saying how to configure it
    (whether the provider keeps one client or opens one per turn)."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    request = ProviderRequest(model=ModelConfig("anthropic", "claude-sonnet-4-6"), messages=())
    with serve() as server:
        for reuse in (True, False):
            provider = create_anthropic_provider(base_url=server.base_url, reuse_connections=reuse)
            async with provider:
                (event,) = [e async for e in provider.generate(request)]
            assert isinstance(event, ProviderError)
            assert (event.error.code, event.error.retryable) == (pe.PROVIDER_CONFIG, False)
            assert "ANTHROPIC_API_KEY" in event.error.message
    assert server.requests == []


@pytest.mark.anyio
async def test_a_refused_connection_is_a_retryable_connection_error() -> None:
    """Nothing listening on the port: a retryable provider_connection error, no hang."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with anyio.fail_after(10):
        (event,) = await one_turn(f"http://127.0.0.1:{port}", timeout={"connect": 2.0})
    assert isinstance(event, ProviderError)
    assert (event.error.code, event.error.retryable) == (pe.PROVIDER_CONNECTION, True)


@pytest.mark.anyio
async def test_an_unknown_thinking_level_is_refused_before_any_request() -> None:
    """A thinking_level the provider has no budget for is a final error; nothing is sent."""
    request = ProviderRequest(
        model=ModelConfig("anthropic", "claude-sonnet-4-6"),
        messages=(),
        options={"thinking_level": "galaxy-brain"},
    )
    with serve() as server:
        async with create_anthropic_provider(api_key=API_KEY, base_url=server.base_url) as p:
            (event,) = [e async for e in p.generate(request)]
    assert isinstance(event, ProviderError)
    assert (event.error.code, event.error.retryable) == (pe.PROVIDER_OPTIONS, False)
    assert "galaxy-brain" in event.error.message
    assert server.requests == []
