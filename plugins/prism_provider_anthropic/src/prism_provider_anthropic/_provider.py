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
from ._output import output_tool_name
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
            except (anthropic.AnthropicError, httpx2.HTTPError, TypeError) as exc:
                # TypeError: the SDK's "could not resolve authentication method" (no key).
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
    closes the HTTP response at once.

    With ``client`` the provider reuses that client's connections across turns; use it as an
    async context manager (or call :meth:`aclose`) to close a client it created. With
    ``client_factory`` it opens a client per turn and closes it when the turn ends, so a
    provider nobody closes (the one the plugin hands each run) holds nothing between turns.
    """

    def __init__(
        self,
        client: anthropic.AsyncAnthropic | None = None,
        *,
        client_factory: Callable[[], anthropic.AsyncAnthropic] | None = None,
        owns_client: bool = False,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        id: str = "anthropic",
    ) -> None:
        if (client is None) == (client_factory is None):
            raise ValueError("AnthropicProvider needs exactly one of client= or client_factory=")
        self.id = id
        self.client = client
        self.max_tokens = max_tokens
        self._factory = client_factory
        self._owns_client = owns_client

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream one turn: text, thinking, tool-call fragments, then ``done`` (or ``error``)."""
        try:
            params = _sdk_call(build_create_params(request, default_max_tokens=self.max_tokens))
        except AnthropicRequestError as exc:
            yield provider_error(ErrorInfo(exc.message, code=exc.code, retryable=False))
            return
        if self._factory is not None:
            try:
                client = self._factory()
            except (anthropic.AnthropicError, TypeError) as exc:
                yield provider_error(error_info(exc))
                return
        else:
            assert self.client is not None
            client = self.client
        found = (getattr(client, "api_key", None), getattr(client, "auth_token", None))
        secrets = tuple(s for s in found if isinstance(s, str) and s)
        watch = _AbortWatch()
        request.signal.on_abort(watch.fire)
        stream: anthropic.AsyncStream[Any] | None = None
        try:
            opened = await watch.run(lambda: client.messages.create(**params))
            if opened.aborted:
                stream = opened.value
                return
            if opened.error is not None:
                yield provider_error(error_info(opened.error, secrets=secrets))
                return
            stream = live = opened.value
            decoder = StreamDecoder(output_tool=output_tool_name(request))
            while True:
                step = await watch.run(lambda: anext(live, _END))
                if step.aborted:
                    return
                if step.error is not None:
                    yield provider_error(error_info(step.error, secrets=secrets))
                    return
                if step.value is _END:
                    break
                for event in decoder.feed(step.value):
                    yield event
            if not decoder.finished:
                yield decoder.truncated()
        finally:
            watch.fire(None)
            with anyio.CancelScope(shield=True):
                if stream is not None:
                    await _dispose(stream)
                if self._factory is not None:
                    await client.close()

    async def aclose(self) -> None:
        """Close the SDK client when this provider created it (idempotent)."""
        if self._owns_client and self.client is not None:
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
    reuse_connections: bool = True,
) -> AnthropicProvider:
    """An Anthropic provider.

    With no arguments the SDK finds its credentials and endpoint as it always does
    (``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``). ``client`` is a host-built
    ``AsyncAnthropic`` (used through a copy with ``max_retries=0``; the provider never closes
    it). ``timeout`` is seconds (a number: the read timeout, connect capped at 5 s), an
    ``anthropic.Timeout``, or ``{"connect": s, "read": s, "write": s, "pool": s}``; the read
    timeout bounds every wait for the next piece of a stream. ``max_tokens`` is the default for
    requests whose ``provider_options`` do not set one. ``reuse_connections=False`` opens a
    client for each turn and closes it afterwards (nothing to close later); otherwise close the
    provider with ``aclose()`` or ``async with`` when done.
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

    def build() -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url, max_retries=0, **extra)

    if not reuse_connections:
        return AnthropicProvider(client_factory=build, max_tokens=max_tokens)
    return AnthropicProvider(build(), owns_client=True, max_tokens=max_tokens)
