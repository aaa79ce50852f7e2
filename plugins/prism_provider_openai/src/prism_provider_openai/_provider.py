"""The OpenAI-compatible provider: one streamed Chat Completions call per provider turn."""

from __future__ import annotations

import importlib
import os
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from contextlib import aclosing
from typing import Any, TypeVar

import anyio
import openai

from prism_core import ErrorInfo, Usage
from prism_core.provider_errors import PROVIDER_CONFIG, PROVIDER_CONTENT_FILTER, PROVIDER_STREAM
from prism_core.providers import (
    ProviderEvent,
    ProviderRequest,
    provider_done,
    provider_error,
    provider_text_delta,
    provider_thinking_delta,
    provider_tool_call_delta,
)
from prism_core.signals import AbortSignal

from ._errors import error_info
from ._request import OpenAIRequestError, build_params

__all__ = ("FINISH_REASONS", "PROVIDER_ID", "OpenAIProvider", "create_openai_provider")

#: The ``model.provider`` this plugin answers for (``"openai:gpt-4.1-mini"``).
PROVIDER_ID = "openai"

#: Chat Completions ``finish_reason`` → Prism finish reason (the values the Anthropic provider
#: reports); unknown values pass through unchanged. ``content_filter`` fails the turn instead.
FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}

T = TypeVar("T")


class _Aborted(Exception):
    """The run's abort signal fired while the provider was waiting on the server."""


class _AbortGuard:
    """Cancels the server wait in flight when the run's abort signal fires."""

    def __init__(self, signal: AbortSignal) -> None:
        self._scope: anyio.CancelScope | None = None
        self._signal = signal
        signal.on_abort(self._cancel)

    def _cancel(self, _reason: Any) -> None:
        if self._scope is not None:
            self._scope.cancel()

    async def wait(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable``; raise :class:`_Aborted` if the signal fires first."""
        if self._signal.aborted:
            raise _Aborted
        with anyio.CancelScope() as scope:
            self._scope = scope
            try:
                return await awaitable
            finally:
                self._scope = None
        raise _Aborted


class _ToolIndexes:
    """Stable Prism indexes for streamed tool calls.

    Some servers number every parallel call ``0`` (or omit the index) and tell calls apart
    only by their ids; a new id at a used index gets the next free index.
    """

    def __init__(self) -> None:
        self._ids: dict[int, str | None] = {}
        self._map: dict[int, int] = {}

    def index(self, wire_index: int | None, call_id: str | None, position: int) -> int:
        wire = position if wire_index is None else wire_index
        current = self._map.get(wire)
        if current is None or (call_id and self._ids.get(current) not in (None, call_id)):
            current = len(self._ids)
            self._map[wire] = current
            self._ids[current] = call_id
        elif call_id and self._ids.get(current) is None:
            self._ids[current] = call_id
        return current


def _ssl_context() -> ssl.SSLContext | None:
    """The SSL context the SDK's HTTP library would build, made once per provider.

    Loading the CA bundle takes a good fraction of a second, and the SDK does it for every
    client; a context is not tied to an event loop, so each turn's client can share one.
    """
    library = openai.DefaultAsyncHttpxClient.__mro__[1].__module__.partition(".")[0]
    create = getattr(importlib.import_module(library), "create_ssl_context", None)
    if create is None:
        return None
    context = create()
    return context if isinstance(context, ssl.SSLContext) else None


def _usage(raw: Any) -> Usage:
    prompt = int(getattr(raw, "prompt_tokens", 0) or 0)
    completion = int(getattr(raw, "completion_tokens", 0) or 0)
    total = int(getattr(raw, "total_tokens", 0) or 0) or prompt + completion
    cached = getattr(getattr(raw, "prompt_tokens_details", None), "cached_tokens", 0)
    reasoning = getattr(getattr(raw, "completion_tokens_details", None), "reasoning_tokens", 0)
    return Usage(
        input_tokens=prompt,
        output_tokens=completion,
        total_tokens=total,
        cache_read_tokens=int(cached or 0),
        reasoning_tokens=int(reasoning or 0),
    )


def _reasoning(delta: Any) -> str | None:
    # vLLM, DeepSeek and LM Studio say ``reasoning_content``; OpenRouter and Ollama ``reasoning``.
    for name in ("reasoning_content", "reasoning"):
        value = getattr(delta, name, None)
        if isinstance(value, str) and value:
            return value
    return None


class OpenAIProvider:
    """An :class:`~prism_core.AIProvider` speaking streamed Chat Completions.

    Build it with :func:`create_openai_provider`. Each ``generate`` call is one streamed
    request; the SDK does not retry (``max_retries=0``), so Prism's retry policy decides.
    """

    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str | None,
        client: openai.AsyncOpenAI | None,
        organization: str | None,
        timeout: float | openai.Timeout | None,
        preserve_thinking: bool,
        id: str,
    ) -> None:
        self.id = id
        self.preserve_thinking = preserve_thinking
        self._client = client.with_options(max_retries=0) if client is not None else None
        self._api_key = client.api_key if client is not None else api_key
        self._base_url = base_url
        self._organization = organization
        self._timeout = timeout
        self._ssl: ssl.SSLContext | None = None

    @property
    def base_url(self) -> str:
        """Where requests go (``https://api.openai.com/v1`` unless configured)."""
        if self._client is not None:
            return str(self._client.base_url)
        return self._base_url or "https://api.openai.com/v1"

    def _turn_client(self) -> tuple[openai.AsyncOpenAI, bool]:
        """The client for one turn, and whether this provider owns (and closes) it."""
        if self._client is not None:
            return self._client, False
        if not self._api_key:
            raise OpenAIRequestError(
                "No API key for the OpenAI-compatible provider: set OPENAI_API_KEY or pass "
                "create_openai_provider(api_key=...). Local servers that ignore keys (Ollama, "
                "vLLM, LM Studio) accept any value, e.g. OPENAI_API_KEY=local.",
                code=PROVIDER_CONFIG,
            )
        # A client per turn: its connection pool belongs to the event loop of this turn, and
        # nothing outlives the turn that the host did not ask for.
        options: dict[str, Any] = {}
        if self._timeout is not None:
            options["timeout"] = self._timeout
        if self._ssl is None:
            self._ssl = _ssl_context()
        if self._ssl is not None:
            options["http_client"] = openai.DefaultAsyncHttpxClient(verify=self._ssl)
        client = openai.AsyncOpenAI(
            api_key=self._api_key,
            base_url=self._base_url,
            organization=self._organization,
            max_retries=0,
            **options,
        )
        return client, True

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream one turn: text, reasoning and tool-call fragments, then usage and done."""
        if request.signal.aborted:
            return
        try:
            params = build_params(request, preserve_thinking=self.preserve_thinking)
            client, owned = self._turn_client()
        except OpenAIRequestError as exc:
            yield provider_error(ErrorInfo(exc.message, exc.code, False))
            return
        try:
            async with aclosing(self._stream(client, params, request.signal)) as events:
                async for event in events:
                    yield event
        finally:
            if owned:
                with anyio.CancelScope(shield=True):
                    await client.close()

    async def _stream(
        self, client: openai.AsyncOpenAI, params: dict[str, Any], signal: AbortSignal
    ) -> AsyncGenerator[ProviderEvent, None]:
        guard = _AbortGuard(signal)
        try:
            stream: Any = await guard.wait(client.chat.completions.create(**params))
        except _Aborted:
            return
        except openai.OpenAIError as exc:
            yield provider_error(error_info(exc, api_key=self._api_key))
            return
        indexes = _ToolIndexes()
        finish: str | None = None
        usage: Usage | None = None
        try:
            while True:
                try:
                    chunk = await guard.wait(anext(stream, None))
                except _Aborted:
                    return
                except openai.OpenAIError as exc:
                    yield provider_error(error_info(exc, api_key=self._api_key))
                    return
                if chunk is None:
                    break
                if getattr(chunk, "usage", None) is not None:
                    usage = _usage(chunk.usage)
                for choice in getattr(chunk, "choices", None) or ():
                    if (getattr(choice, "index", 0) or 0) != 0:
                        continue
                    delta = choice.delta
                    if delta is not None:
                        for event in self._delta_events(delta, indexes):
                            yield event
                    if choice.finish_reason:
                        finish = str(choice.finish_reason)
        finally:
            # Closing the response drops the connection, so the server stops generating.
            with anyio.CancelScope(shield=True):
                await stream.close()
        if finish is None:
            yield provider_error(
                ErrorInfo(
                    "The model server ended the stream before finishing the answer",
                    PROVIDER_STREAM,
                    True,
                )
            )
        elif finish == "content_filter":
            yield provider_error(
                ErrorInfo(
                    "The model server stopped the answer (content_filter)",
                    PROVIDER_CONTENT_FILTER,
                    False,
                )
            )
        else:
            yield provider_done(usage, finish_reason=FINISH_REASONS.get(finish, finish))

    @staticmethod
    def _delta_events(delta: Any, indexes: _ToolIndexes) -> list[ProviderEvent]:
        events: list[ProviderEvent] = []
        thinking = _reasoning(delta)
        if thinking:
            events.append(provider_thinking_delta(thinking))
        for text in (getattr(delta, "content", None), getattr(delta, "refusal", None)):
            if isinstance(text, str) and text:
                events.append(provider_text_delta(text))
        for position, call in enumerate(getattr(delta, "tool_calls", None) or ()):
            function = getattr(call, "function", None)
            events.append(
                provider_tool_call_delta(
                    indexes.index(getattr(call, "index", None), call.id, position),
                    call.id or None,
                    getattr(function, "name", None) or None,
                    getattr(function, "arguments", None) or None,
                )
            )
        return events


def create_openai_provider(
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    client: openai.AsyncOpenAI | None = None,
    organization: str | None = None,
    timeout: float | openai.Timeout | None = None,
    preserve_thinking: bool = False,
    id: str = PROVIDER_ID,
) -> OpenAIProvider:
    """A provider for OpenAI or any server speaking streamed Chat Completions.

    ``api_key`` and ``base_url`` default to ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` (read
    now), ``organization`` to ``OPENAI_ORG_ID``. A host-owned ``client`` (an ``AsyncOpenAI``)
    is used as it is, with its retries turned off, and never closed by Prism. ``timeout``
    (seconds, or ``openai.Timeout(60.0, connect=5.0)``) bounds connecting and each read; a
    stalled stream then fails the turn with a retryable timeout. ``preserve_thinking=True``
    sends prior thinking back as ``reasoning_content`` (for servers whose models accept it);
    the request option ``preserve_thinking`` overrides it per agent or run.
    """
    if client is not None and (api_key is not None or base_url is not None):
        raise OpenAIRequestError(
            "pass either client= or api_key=/base_url=, not both: a host-owned client "
            "already carries its key and base URL",
            code=PROVIDER_CONFIG,
        )
    return OpenAIProvider(
        api_key=api_key if api_key is not None else os.environ.get("OPENAI_API_KEY"),
        base_url=base_url if base_url is not None else os.environ.get("OPENAI_BASE_URL") or None,
        client=client,
        organization=organization if organization is not None else os.environ.get("OPENAI_ORG_ID"),
        timeout=timeout,
        preserve_thinking=preserve_thinking,
        id=id,
    )
