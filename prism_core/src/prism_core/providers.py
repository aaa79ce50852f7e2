"""Providers: the protocol, the normalized provider events, helpers and the mock provider."""

from __future__ import annotations

import inspect
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

import attrs

from .arguments import check_tool_arguments, parse_tool_arguments
from .content import ErrorInfo, Message, ToolCallContent, Usage
from .models import ModelConfig
from .signals import AbortSignal

__all__ = (
    "AIProvider",
    "MockProvider",
    "ProviderDone",
    "ProviderError",
    "ProviderEvent",
    "ProviderOutputSpec",
    "ProviderRequest",
    "ProviderResolver",
    "ProviderTextDelta",
    "ProviderThinkingDelta",
    "ProviderToolCall",
    "ProviderToolCallDelta",
    "ProviderToolSpec",
    "ProviderUsage",
    "ToolCallAssembler",
    "create_mock_provider",
    "provider_done",
    "provider_error",
    "provider_text_delta",
    "provider_thinking_delta",
    "provider_tool_call",
    "provider_tool_call_delta",
    "provider_usage",
)


@attrs.frozen
class ProviderToolSpec:
    """What a provider is told about one tool: name, description and JSON-schema parameters."""

    name: str
    description: str | None = None
    parameters: Mapping[str, Any] | None = None


@attrs.frozen
class ProviderOutputSpec:
    """The shape the final answer must have (the run's ``output_type``): a ``name`` (letters,
    digits, ``_`` and ``-``, at most 64) and a JSON Schema whose root is what the answer's JSON
    must match. Providers that can constrain their output to a schema use it; the run checks
    the answer either way."""

    name: str
    schema: Mapping[str, Any]


@attrs.frozen(kw_only=True)
class ProviderRequest:
    """One provider turn's request. ``system`` holds the composed system prompt; ``output``
    is set when the run has an ``output_type`` (see :class:`ProviderOutputSpec`)."""

    model: ModelConfig
    messages: tuple[Message, ...]
    tools: tuple[ProviderToolSpec, ...] = ()
    system: str | None = None
    options: Mapping[str, Any] = attrs.field(factory=dict)
    metadata: Mapping[str, Any] = attrs.field(factory=dict)
    signal: AbortSignal = attrs.field(factory=AbortSignal, eq=False, repr=False)
    output: ProviderOutputSpec | None = None


@attrs.frozen
class ProviderTextDelta:
    """Streamed assistant text."""

    text: str
    type: Literal["text_delta"] = "text_delta"


@attrs.frozen
class ProviderThinkingDelta:
    """Streamed provider reasoning."""

    text: str
    signature: str | None = None
    type: Literal["thinking_delta"] = "thinking_delta"


@attrs.frozen
class ProviderToolCallDelta:
    """A fragment of a tool call; fragments with the same ``index`` are joined."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments_text: str | None = None
    type: Literal["tool_call_delta"] = "tool_call_delta"


@attrs.frozen
class ProviderToolCall:
    """A complete tool call."""

    call: ToolCallContent
    type: Literal["tool_call"] = "tool_call"


@attrs.frozen
class ProviderUsage:
    """Usage reported mid-stream."""

    usage: Usage
    type: Literal["usage"] = "usage"


@attrs.frozen
class ProviderDone:
    """The turn ended; optional final usage and why the model stopped.

    ``finish_reason`` is ``"stop"``, ``"length"``, ``"tool_calls"``, ``"content_filter"``,
    ``"pause"`` or a provider's own value, ``None`` when the provider does not say.
    """

    usage: Usage | None = None
    type: Literal["done"] = "done"
    finish_reason: str | None = attrs.field(default=None, kw_only=True)


@attrs.frozen
class ProviderError:
    """The provider failed this turn (``error.retryable`` hints whether a retry may help)."""

    error: ErrorInfo
    type: Literal["error"] = "error"


ProviderEvent: TypeAlias = (
    ProviderTextDelta
    | ProviderThinkingDelta
    | ProviderToolCallDelta
    | ProviderToolCall
    | ProviderUsage
    | ProviderDone
    | ProviderError
)


@runtime_checkable
class AIProvider(Protocol):
    """A model provider: ``generate`` streams :data:`ProviderEvent` values for one turn."""

    id: str

    def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream one turn's events; honour ``request.signal`` and anyio cancellation."""
        ...


#: Resolves the provider for a model each run (sync or async); ``None`` means "not mine".
ProviderResolver: TypeAlias = Callable[
    [ModelConfig], "AIProvider | Awaitable[AIProvider | None] | None"
]


def provider_text_delta(text: str) -> ProviderTextDelta:
    """A text fragment event."""
    return ProviderTextDelta(text)


def provider_thinking_delta(text: str, signature: str | None = None) -> ProviderThinkingDelta:
    """A reasoning fragment event."""
    return ProviderThinkingDelta(text, signature)


def provider_tool_call_delta(
    index: int, id: str | None = None, name: str | None = None, arguments_text: str | None = None
) -> ProviderToolCallDelta:
    """A tool-call fragment event."""
    return ProviderToolCallDelta(index, id, name, arguments_text)


def provider_tool_call(call: ToolCallContent) -> ProviderToolCall:
    """A complete tool-call event."""
    return ProviderToolCall(call)


def provider_usage(usage: Usage | Mapping[str, Any]) -> ProviderUsage:
    """A usage event (a mapping with snake_case keys is accepted)."""
    coerced = Usage.coerce(usage)
    assert coerced is not None
    return ProviderUsage(coerced)


def provider_done(
    usage: Usage | Mapping[str, Any] | None = None, *, finish_reason: str | None = None
) -> ProviderDone:
    """The end-of-turn event, with the final usage and the finish reason when known."""
    return ProviderDone(Usage.coerce(usage), finish_reason=finish_reason)


def provider_error(
    error: BaseException | ErrorInfo | str, secrets: Iterable[str] = ()
) -> ProviderError:
    """An error event; each of ``secrets`` is replaced by ``[REDACTED]`` in the message."""
    if isinstance(error, ErrorInfo):
        info = error
    elif isinstance(error, BaseException):
        info = ErrorInfo(str(error) or type(error).__name__, code=getattr(error, "code", None))
    else:
        info = ErrorInfo(str(error))
    message = info.message
    for secret in secrets:
        if secret:
            message = message.replace(secret, "[REDACTED]")
    return ProviderError(attrs.evolve(info, message=message))


@attrs.define
class _PartialCall:
    id: str | None = None
    name: str | None = None
    arguments_text: str = ""


class ToolCallAssembler:
    """Joins streamed ``tool_call_delta`` fragments (and complete calls) into final calls.

    Fragments are keyed by ``index``; ``id`` and ``name`` are taken from the first fragment
    that has them; ``arguments_text`` is concatenated and parsed as a JSON object when the turn
    completes. Malformed JSON never raises: the call is kept with empty arguments and its id is
    listed in :attr:`invalid_ids` so dispatch blocks it as ``invalid_json_arguments``. Parsing
    is strict (:func:`prism_core.arguments.parse_tool_arguments`): ``NaN``, ``Infinity``, a
    number that overflows, a lone surrogate or nesting deeper than 64 levels is malformed.
    """

    def __init__(self) -> None:
        self._partials: dict[int, _PartialCall] = {}
        self._order: list[tuple[str, int | str]] = []
        self._complete: dict[str, ToolCallContent] = {}
        self.invalid_ids: set[str] = set()

    def add_delta(self, delta: ProviderToolCallDelta) -> None:
        """Record one fragment."""
        partial = self._partials.get(delta.index)
        if partial is None:
            partial = self._partials[delta.index] = _PartialCall()
            self._order.append(("delta", delta.index))
        if delta.id and not partial.id:
            partial.id = delta.id
        if delta.name and not partial.name:
            partial.name = delta.name
        if delta.arguments_text:
            partial.arguments_text += delta.arguments_text

    def add_call(self, call: ToolCallContent) -> ToolCallContent:
        """Record a complete call (it replaces fragments carrying the same id) and return the
        call as recorded.

        Arguments that are not canonical JSON within the depth bound (NaN, a lone surrogate,
        deep nesting) are dropped and the call is listed in :attr:`invalid_ids`; measure the
        returned call, never the original, since the original may not encode."""
        if call.id not in self._complete:
            self._order.append(("call", call.id))
        if check_tool_arguments(call.arguments) is not None:
            self.invalid_ids.add(call.id)
            call = attrs.evolve(call, arguments={})
        else:
            self.invalid_ids.discard(call.id)
        self._complete[call.id] = call
        return call

    def finish(self) -> tuple[ToolCallContent, ...]:
        """The final calls in the order they first appeared."""
        calls: list[ToolCallContent] = []
        seen: set[str] = set()
        for kind, key in self._order:
            if kind == "call":
                call = self._complete[str(key)]
            else:
                assert isinstance(key, int)
                partial = self._partials[key]
                call_id = partial.id or f"call_{key}_{uuid.uuid4().hex[:12]}"
                if call_id in self._complete:
                    continue
                call = ToolCallContent(call_id, partial.name or "", self._parse(call_id, partial))
            if call.id in seen:
                continue
            seen.add(call.id)
            calls.append(call)
        return tuple(calls)

    def _parse(self, call_id: str, partial: _PartialCall) -> dict[str, Any]:
        value = parse_tool_arguments(partial.arguments_text)
        if value is None:
            self.invalid_ids.add(call_id)
            return {}
        return value


EventSource: TypeAlias = (
    Sequence[ProviderEvent] | Callable[[ProviderRequest], Iterable[ProviderEvent]]
)


class MockProvider:
    """A scripted provider for tests and demos. ``requests`` records every request it saw."""

    def __init__(
        self,
        events: EventSource = (),
        *,
        id: str = "mock",
        on_request: Callable[[ProviderRequest], Any] | None = None,
        turns: Sequence[Sequence[ProviderEvent]] | None = None,
    ) -> None:
        self.id = id
        self._events = events
        self._turns = list(turns) if turns is not None else None
        self._on_request = on_request
        self.requests: list[ProviderRequest] = []

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Replay the scripted events for this turn."""
        turn = len(self.requests)
        self.requests.append(request)
        if self._on_request is not None:
            outcome = self._on_request(request)
            if inspect.isawaitable(outcome):
                await outcome
        if self._turns is not None:
            if not self._turns:
                events: Iterable[ProviderEvent] = (provider_done(),)
            else:
                events = self._turns[min(turn, len(self._turns) - 1)]
        elif callable(self._events):
            events = self._events(request)
        else:
            events = self._events
        for event in events:
            yield event


def create_mock_provider(
    events: EventSource = (),
    *,
    id: str = "mock",
    on_request: Callable[[ProviderRequest], Any] | None = None,
    turns: Sequence[Sequence[ProviderEvent]] | None = None,
) -> MockProvider:
    """A provider that replays ``events`` on every turn.

    ``events`` may also be a callable ``(request) -> events``; ``turns`` scripts one event list
    per turn (the last one repeats). ``on_request`` (sync or async) sees each request first.
    """
    return MockProvider(events, id=id, on_request=on_request, turns=turns)
