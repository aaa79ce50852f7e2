"""The Anthropic provider: one streamed Messages-API call per Prism provider turn."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar

import anthropic
import anyio
import attrs
import httpx2
from anthropic.resources import AsyncMessages

from prism_core import ErrorInfo, ProviderEvent, ProviderRequest, provider_error

from ._errors import error_info
from ._request import DEFAULT_MAX_TOKENS, AnthropicRequestError, build_create_params
from ._stream import StreamDecoder

__all__ = ("AnthropicProvider", "create_anthropic_provider")

_T = TypeVar("_T")
_END: Any = object()
_TIMEOUT_KEYS = frozenset({"connect", "read", "write", "pool"})
# The body fields this SDK version takes as keyword arguments; others ride ``extra_body``, so
# an option the SDK has no parameter for (yet, or any more) still reaches the API.
_SDK_PARAMS = frozenset(inspect.signature(AsyncMessages.create).parameters) - {"self"}


def _sdk_call(params: dict[str, Any]) -> dict[str, Any]:
    call: dict[str, Any] = {}
    extra_body: dict[str, Any] = {}
    for key, value in params.items():
        if key in _SDK_PARAMS and key != "extra_body":
            call[key] = value
        else:
            extra_body[key] = value
    extra_body.update(params.get("extra_body") or {})
    extra_body.pop("extra_body", None)
    if extra_body:
        call["extra_body"] = extra_body
    return call


@attrs.define
class _Outcome:
    value: Any = None
    error: BaseException | None = None
    aborted: bool = False


class _AbortWatch:
    """Cancels the await in flight when the request's abort signal fires.

    The run loop cancels its own scope on abort; this makes the provider stop just as fast when
    only the signal is fired (a host calling ``generate`` directly, or a signal bridged from
    elsewhere). No scope is held across a ``yield``: each await gets a fresh one.
    """

    def __init__(self) -> None:
        self.scope: anyio.CancelScope | None = None
        self.fired = False

    def fire(self, _reason: Any) -> None:
        self.fired = True
        if self.scope is not None:
            self.scope.cancel()

    async def run(self, step: Callable[[], Awaitable[_T]]) -> _Outcome:
        if self.fired:
            return _Outcome(aborted=True)
        outcome = _Outcome()
        with anyio.CancelScope() as scope:
            self.scope = scope
            try:
                outcome.value = await step()
            except (anthropic.AnthropicError, httpx2.HTTPError) as exc:
                outcome.error = exc
            finally:
                self.scope = None
        if scope.cancelled_caught or self.fired:
            outcome.aborted = True
        return outcome


async def _dispose(stream: anthropic.AsyncStream[Any]) -> None:
    """Close the response, then run the SDK's event generators to their end.

    A generator left suspended is finalized by the garbage collector, which trio reports as a
    leak; one more read on the closed response ends each of them with an exception instead.
    """
    await stream.close()
    with contextlib.suppress(Exception):  # the response is closed: a read error is expected
        await anext(stream, None)


class AnthropicProvider:
    """A Prism ``AIProvider`` on the official ``anthropic`` SDK (``AsyncAnthropic``).

    Each turn is one ``messages.create(stream=True)`` call. The SDK's own retries are off:
    failures come back as ``error`` events with ``retryable`` and ``retry_after_ms`` set, and
    Prism's retry policy decides. Closing the stream (the run aborted, or the consumer left)
    closes the HTTP response at once. Use it as an async context manager, or call
    :meth:`aclose`, to close a client the provider created itself.
    """

    def __init__(
        self,
        client: anthropic.AsyncAnthropic,
        *,
        owns_client: bool = False,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        id: str = "anthropic",
    ) -> None:
        self.id = id
        self.client = client
        self.max_tokens = max_tokens
        self._owns_client = owns_client

    def _secrets(self) -> tuple[str, ...]:
        return tuple(
            s
            for s in (
                getattr(self.client, "api_key", None),
                getattr(self.client, "auth_token", None),
            )
            if isinstance(s, str) and s
        )

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream one turn: text, thinking, tool-call fragments, then ``done`` (or ``error``)."""
        try:
            params = _sdk_call(build_create_params(request, default_max_tokens=self.max_tokens))
        except AnthropicRequestError as exc:
            yield provider_error(ErrorInfo(exc.message, code=exc.code, retryable=False))
            return
        watch = _AbortWatch()
        request.signal.on_abort(watch.fire)
        stream: anthropic.AsyncStream[Any] | None = None
        try:
            opened = await watch.run(lambda: self.client.messages.create(**params))
            if opened.aborted:
                stream = opened.value
                return
            if opened.error is not None:
                yield provider_error(error_info(opened.error, secrets=self._secrets()))
                return
            stream = live = opened.value
            decoder = StreamDecoder()
            while True:
                step = await watch.run(lambda: anext(live, _END))
                if step.aborted:
                    return
                if step.error is not None:
                    yield provider_error(error_info(step.error, secrets=self._secrets()))
                    return
                if step.value is _END:
                    break
                for event in decoder.feed(step.value):
                    yield event
            if not decoder.finished:
                yield decoder.truncated()
        finally:
            watch.fire(None)
            if stream is not None:
                with anyio.CancelScope(shield=True):
                    await _dispose(stream)

    async def aclose(self) -> None:
        """Close the SDK client when this provider created it (idempotent)."""
        if self._owns_client:
            self._owns_client = False
            await self.client.close()

    async def __aenter__(self) -> AnthropicProvider:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _timeout(value: float | anthropic.Timeout | Mapping[str, float]) -> anthropic.Timeout:
    if isinstance(value, anthropic.Timeout):
        return value
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - _TIMEOUT_KEYS)
        if unknown:
            raise ValueError(f"unknown timeout keys {unknown}; known keys: {sorted(_TIMEOUT_KEYS)}")
        base = anthropic.DEFAULT_TIMEOUT
        return anthropic.Timeout(
            connect=value.get("connect", base.connect),
            read=value.get("read", base.read),
            write=value.get("write", base.write),
            pool=value.get("pool", base.pool),
        )
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {value!r}")
    return anthropic.Timeout(float(value), connect=min(float(value), 5.0))


def create_anthropic_provider(
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    client: anthropic.AsyncAnthropic | None = None,
    timeout: float | anthropic.Timeout | Mapping[str, float] | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
) -> AnthropicProvider:
    """An Anthropic provider.

    With no arguments the SDK finds its credentials and endpoint as it always does
    (``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``). ``client`` is a host-built
    ``AsyncAnthropic`` (used through a copy with ``max_retries=0``; the provider never closes
    it). ``timeout`` is seconds (a number: the read timeout, connect capped at 5 s), an
    ``anthropic.Timeout``, or ``{"connect": s, "read": s, "write": s, "pool": s}``; the read
    timeout bounds every wait for the next piece of a stream. ``max_tokens`` is the default for
    requests whose ``provider_options`` do not set one.
    """
    if client is not None and (api_key is not None or base_url is not None):
        raise ValueError("pass either client= or api_key=/base_url=, not both")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    extra: dict[str, Any] = {}
    if timeout is not None:
        extra["timeout"] = _timeout(timeout)
    if client is not None:
        return AnthropicProvider(
            client.with_options(max_retries=0, **extra), owns_client=False, max_tokens=max_tokens
        )
    built = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url, max_retries=0, **extra)
    return AnthropicProvider(built, owns_client=True, max_tokens=max_tokens)
