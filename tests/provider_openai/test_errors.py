"""Failures over the wire: HTTP errors, retry-after, mid-stream errors, stalls and aborts."""

from __future__ import annotations

import logging
import time

import anyio
import pytest

import prism_provider_openai as oa
from prism_core import AgentRunError, Message, ModelConfig, ProviderRequest, create_agent
from prism_core import provider_errors as pe
from prism_core.signals import AbortSignal
from tests.fake_http import Reply, serve, sse

from ._support import (
    API_KEY,
    MODEL,
    SDK_STREAM_FINALISER,
    error_reply,
    frames,
    provider_for,
    replay,
    types,
)

pytestmark = [pytest.mark.anyio, SDK_STREAM_FINALISER]

FAST_RETRY = {"max_attempts": 2, "base_delay_ms": 1, "max_delay_ms": 5000}


async def test_rate_limit_waits_for_retry_after_then_succeeds() -> None:
    """A 429 with ``retry-after: 1`` is retried after a full second and the run succeeds."""
    limited = error_reply(429, "Rate limit reached for gpt-4.1-mini", **{"retry-after": "1"})
    with serve(limited, replay("plain_text")) as server:
        agent = create_agent(model=MODEL, provider=provider_for(server), retry=FAST_RETRY)
        started = time.monotonic()
        stream = agent.create_session().stream("What is the capital of France?")
        events = [e async for e in stream]
        elapsed = time.monotonic() - started
    assert stream.result is not None
    assert stream.result.status == "succeeded"
    assert stream.result.text == "The capital of France is Paris."
    (scheduled,) = [e for e in events if e.type == "retry_scheduled"]
    assert scheduled.delay_ms == 1000
    assert scheduled.error.code == pe.PROVIDER_RATE_LIMITED
    assert scheduled.error.retryable is True
    assert scheduled.error.retry_after_ms == 1000
    assert "Rate limit reached" in scheduled.error.message
    assert elapsed >= 0.95
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("status", "code", "retryable"),
    [
        (500, pe.PROVIDER_SERVER, True),
        (502, pe.PROVIDER_SERVER, True),
        (503, pe.PROVIDER_OVERLOADED, True),
        (529, pe.PROVIDER_OVERLOADED, True),
        (400, pe.PROVIDER_REQUEST, False),
        (404, pe.PROVIDER_REQUEST, False),
        (422, pe.PROVIDER_REQUEST, False),
        (403, pe.PROVIDER_AUTH, False),
    ],
)
async def test_http_errors_are_retried_only_when_waiting_can_help(
    status: int, code: str, retryable: bool
) -> None:
    """5xx and overloads are retried by Prism (once here); 4xx fail at once with the message."""
    with serve(error_reply(status, f"upstream said {status}"), replay("plain_text")) as server:
        agent = create_agent(model=MODEL, provider=provider_for(server), retry=FAST_RETRY)
        session = agent.create_session()
        if retryable:
            result = await session.run("hi")
            assert result.status == "succeeded"
            assert len(server.requests) == 2
            return
        with pytest.raises(AgentRunError) as raised:
            await session.run("hi")
    error = raised.value.result.error
    assert error is not None
    assert error.code == code
    assert error.retryable is False
    assert f"upstream said {status}" in error.message
    assert len(server.requests) == 1


async def test_quota_exhaustion_is_not_retried() -> None:
    """A 429 whose code is ``insufficient_quota`` fails at once: waiting will not help."""
    quota = error_reply(429, "You exceeded your current quota.", code="insufficient_quota")
    with serve(quota, replay("plain_text")) as server:
        agent = create_agent(model=MODEL, provider=provider_for(server), retry=FAST_RETRY)
        with pytest.raises(AgentRunError) as raised:
            await agent.create_session().run("hi")
    error = raised.value.result.error
    assert error is not None
    assert (error.code, error.retryable) == (pe.PROVIDER_RATE_LIMITED, False)
    assert len(server.requests) == 1


async def test_unauthorized_shows_the_server_message_but_never_the_key() -> None:
    """A 401 fails without retry; the message is the server's, with the key redacted."""
    masked = f"{API_KEY[:8]}****{API_KEY[-4:]}"
    message = f"Incorrect API key provided: {masked}. The key {API_KEY} is not valid."
    with serve(error_reply(401, message, code="invalid_api_key")) as server:
        agent = create_agent(model=MODEL, provider=provider_for(server), retry=FAST_RETRY)
        stream = agent.create_session().stream("hi")
        events = [e async for e in stream]
    result = stream.result
    assert result is not None
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == pe.PROVIDER_AUTH
    assert "HTTP 401" in result.error.message
    assert "Incorrect API key provided" in result.error.message
    shown = repr(events) + repr(result)
    assert API_KEY not in shown
    assert API_KEY[:8] not in shown
    assert server.requests[0].headers["authorization"] == f"Bearer {API_KEY}"
    assert len(server.requests) == 1


async def test_an_error_event_mid_stream_fails_the_run_after_the_text_so_far() -> None:
    """A ``data: {"error": …}`` frame after some text fails the run; nothing is retried."""
    with serve(replay("error_mid_stream"), replay("plain_text")) as server:
        agent = create_agent(model=MODEL, provider=provider_for(server), retry=FAST_RETRY)
        stream = agent.create_session().stream("Think hard")
        events = [e async for e in stream]
    texts = [e.delta.text for e in events if e.type == "message_delta"]
    assert texts == ["Let me", " think"]
    result = stream.result
    assert result is not None
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == pe.PROVIDER_STREAM
    assert "The server had an error while processing your request" in result.error.message
    assert types(events)[-1] == "error"
    assert len(server.requests) == 1


async def test_an_error_event_before_any_output_is_retried() -> None:
    """A stream that fails before its first token is retried, and the retry succeeds."""
    failing = Reply(
        chunks=sse([{"error": {"message": "overloaded, try again", "type": "server_error"}}])
    )
    with serve(failing, replay("plain_text")) as server:
        agent = create_agent(model=MODEL, provider=provider_for(server), retry=FAST_RETRY)
        stream = agent.create_session().stream("hi")
        events = [e async for e in stream]
    assert stream.result is not None
    assert stream.result.status == "succeeded"
    (scheduled,) = [e for e in events if e.type == "retry_scheduled"]
    assert scheduled.error.code == pe.PROVIDER_STREAM
    assert "overloaded, try again" in scheduled.error.message
    assert len(server.requests) == 2


async def test_a_stream_cut_before_the_finish_reason_is_an_error() -> None:
    """A body that ends without a finish reason is a retryable stream error, not success."""
    cut = Reply(chunks=frames("plain_text")[:3])
    with serve(cut, replay("plain_text")) as server:
        agent = create_agent(model=MODEL, provider=provider_for(server), retry=False)
        with pytest.raises(AgentRunError) as raised:
            await agent.create_session().run("hi")
    error = raised.value.result.error
    assert error is not None
    assert (error.code, error.retryable) == (pe.PROVIDER_STREAM, True)
    assert len(server.requests) == 1


async def test_content_filter_finish_is_a_refusal() -> None:
    """``finish_reason: content_filter`` fails the turn with a non-retryable error."""
    raw = b"".join(f for f in frames("plain_text") if isinstance(f, bytes))
    filtered = raw.replace(b'"finish_reason":"stop"', b'"finish_reason":"content_filter"')
    with serve(Reply(chunks=(filtered,))) as server:
        agent = create_agent(model=MODEL, provider=provider_for(server), retry=FAST_RETRY)
        with pytest.raises(AgentRunError) as raised:
            await agent.create_session().run("hi")
    error = raised.value.result.error
    assert error is not None
    assert (error.code, error.retryable) == (pe.PROVIDER_CONTENT_FILTER, False)
    assert len(server.requests) == 1


async def test_a_stalled_stream_times_out() -> None:
    """The read timeout fires on a server that stops sending; the turn fails as a timeout."""
    stalled = Reply(chunks=frames("plain_text")[:1], stall=True)
    with serve(stalled) as server:
        provider = provider_for(server, timeout=0.3)
        agent = create_agent(model=MODEL, provider=provider, retry=False)
        started = time.monotonic()
        with pytest.raises(AgentRunError) as raised:
            await agent.create_session().run("hi")
        elapsed = time.monotonic() - started
        assert server.wait_for_disconnect(5)
    error = raised.value.result.error
    assert error is not None
    assert (error.code, error.retryable) == (pe.PROVIDER_TIMEOUT, True)
    assert elapsed >= 0.25  # never before the read timeout


async def test_an_unreachable_server_is_a_retryable_connection_error() -> None:
    """Nothing listening: a connection error that the retry policy may retry."""
    with serve() as server:
        base_url = server.base_url
    provider = oa.create_openai_provider(api_key=API_KEY, base_url=base_url + "/v1", timeout=2.0)
    agent = create_agent(model=MODEL, provider=provider, retry=False)
    with pytest.raises(AgentRunError) as raised:
        await agent.create_session().run("hi")
    error = raised.value.result.error
    assert error is not None
    assert (error.code, error.retryable) == (pe.PROVIDER_CONNECTION, True)


async def test_abort_mid_stream_closes_the_connection_at_once() -> None:
    """``session.abort()`` during a slow stream ends the run and the server sees the close."""
    with serve(replay("slow_text", pause=0.05)) as server:
        session = create_agent(model=MODEL, provider=provider_for(server)).create_session()
        stream = session.stream("Count slowly")
        texts: list[str] = []
        async for event in stream:
            if event.type == "message_delta":
                texts.append(event.delta.text)
                if len(texts) == 3:
                    session.abort("user pressed stop")
        assert server.wait_for_disconnect(5)
    assert stream.result is not None
    assert stream.result.status == "aborted"
    assert stream.result.abort_reason == "user pressed stop"
    assert len(texts) == 3


async def test_leaving_the_event_stream_early_closes_the_connection() -> None:
    """Breaking out of ``session.stream()`` aborts the run and drops the HTTP stream."""
    with serve(replay("slow_text", pause=0.05)) as server:
        session = create_agent(model=MODEL, provider=provider_for(server)).create_session()
        stream = session.stream("Count slowly")
        async for event in stream:
            if event.type == "message_delta":
                break
        await stream.aclose()
        assert server.wait_for_disconnect(5)
    assert stream.result is not None
    assert stream.result.status == "aborted"


async def test_the_abort_signal_alone_cancels_the_provider_read() -> None:
    """Firing ``request.signal`` (no cancellation) stops ``generate`` while it waits."""
    with serve(replay("slow_text", pause=0.2)) as server:
        signal = AbortSignal()
        request = ProviderRequest(
            model=ModelConfig("openai", "gpt-4.1-mini"),
            messages=(Message.user("Count slowly"),),
            signal=signal,
        )
        seen: list[str] = []
        first_text = anyio.Event()

        async def consume() -> None:
            async for event in provider_for(server).generate(request):
                seen.append(event.type)
                if event.type == "text_delta":
                    first_text.set()

        async def abort_soon() -> None:
            await first_text.wait()
            signal.abort("stop")

        async with anyio.create_task_group() as group:
            group.start_soon(consume)
            group.start_soon(abort_soon)
        # Closed mid-reply: the server saw the close before its transcript ended.
        assert server.wait_for_disconnect(5)
    assert seen.count("text_delta") == 1
    assert "done" not in seen


async def test_a_retried_server_error_is_logged_by_code_and_never_with_the_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A 500 quoting the API key is retried: the retry's log record carries the attempt, the
    delay and the error code, and no record at any level carries the key."""
    caplog.set_level(logging.DEBUG)
    failing = error_reply(500, f"internal error for key {API_KEY}")
    with serve(failing, replay("plain_text")) as server:
        agent = create_agent(model=MODEL, provider=provider_for(server), retry=FAST_RETRY)
        result = await agent.create_session().run("hi")
    assert result.status == "succeeded"
    retries = [r for r in caplog.records if hasattr(r, "prism_attempt")]
    assert [(r.name, r.prism_attempt) for r in retries] == [("prism_core.runs", 1)]  # type: ignore[attr-defined]
    assert retries[0].prism_error_code == pe.PROVIDER_SERVER  # type: ignore[attr-defined]
    logged = "\n".join(f"{r.getMessage()} {r.__dict__!r}" for r in caplog.records)
    assert API_KEY not in logged
    assert API_KEY[8:-4] not in logged
