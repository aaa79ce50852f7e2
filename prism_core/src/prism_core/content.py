"""Messages and content blocks: the frozen data every provider, tool and store speaks."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

import attrs

from .codec import converter

__all__ = (
    "ContentBlock",
    "ErrorInfo",
    "Message",
    "Role",
    "TextContent",
    "ThinkingContent",
    "ToolCallContent",
    "ToolResult",
    "ToolResultContent",
    "Usage",
    "message_size_bound",
    "message_text",
    "to_messages",
    "tool_call_content",
)

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]


def _freeze(value: Any) -> Any:
    """Copy JSON-like data so a frozen value does not share mutable containers with callers."""
    # Exact JSON types first: the same answers as the checks below, without an ABC check
    # for every value of a decoded transcript.
    kind = type(value)
    if kind is str or value is None or kind is int or kind is float or kind is bool:
        return value
    if kind is dict:
        return {str(k): _freeze(v) for k, v in value.items()}
    if kind is list:
        return [_freeze(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _freeze(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_freeze(v) for v in value]
    return value


@attrs.frozen
class ErrorInfo:
    """A redactable, serialisable description of an error."""

    message: str
    code: str | None = None
    retryable: bool | None = None
    #: How long the server asked the caller to wait before retrying (``retry-after``).
    retry_after_ms: float | None = None


@attrs.frozen
class TextContent:
    """Plain text produced by a user or a provider."""

    text: str
    type: Literal["text"] = "text"


@attrs.frozen
class ThinkingContent:
    """Provider reasoning, kept on the assistant message in session history."""

    text: str
    signature: str | None = None
    type: Literal["thinking"] = "thinking"


@attrs.frozen
class ToolCallContent:
    """A complete tool call requested by the provider."""

    id: str
    name: str
    arguments: dict[str, Any] = attrs.field(factory=dict, converter=_freeze)
    type: Literal["tool_call"] = "tool_call"


@attrs.frozen
class ToolResultContent:
    """The result of one tool call, sent back to the provider on the next turn."""

    tool_call_id: str
    name: str
    value: Any = attrs.field(default=None, converter=_freeze)
    error: ErrorInfo | None = None
    type: Literal["tool_result"] = "tool_result"


@attrs.frozen
class ToolResult:
    """What a tool returned for one call: a JSON ``value`` or an ``error``."""

    tool_call_id: str
    name: str
    value: Any = attrs.field(default=None, converter=_freeze)
    error: ErrorInfo | None = None

    @property
    def is_error(self) -> bool:
        """Whether this result reports an error."""
        return self.error is not None

    def to_content(self) -> ToolResultContent:
        """The content block that carries this result to the provider."""
        return ToolResultContent(self.tool_call_id, self.name, self.value, self.error)


ContentBlock: TypeAlias = TextContent | ThinkingContent | ToolCallContent | ToolResultContent

_BLOCK_TYPES: dict[str, type[Any]] = {
    "text": TextContent,
    "thinking": ThinkingContent,
    "tool_call": ToolCallContent,
    "tool_result": ToolResultContent,
}


def _blocks(value: Iterable[ContentBlock]) -> tuple[ContentBlock, ...]:
    return tuple(value)


@attrs.frozen
class Message:
    """One message: a role and its content blocks."""

    role: Role
    content: tuple[ContentBlock, ...] = attrs.field(converter=_blocks)

    @classmethod
    def user(cls, text: str) -> Message:
        """A user message holding one text block."""
        return cls("user", (TextContent(text),))

    @property
    def text(self) -> str:
        """The concatenated text blocks of this message."""
        return message_text(self)

    @property
    def tool_calls(self) -> tuple[ToolCallContent, ...]:
        """The tool-call blocks of this message, in order."""
        return tuple(b for b in self.content if isinstance(b, ToolCallContent))


@attrs.frozen
class Usage:
    """Token and cost accounting for one provider turn, or summed over a run."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    #: Of ``output_tokens``, how many the model spent reasoning (when the provider says).
    reasoning_tokens: int = 0
    cost: float | None = None
    currency: str | None = None

    def __add__(self, other: Usage) -> Usage:
        cost: float | None
        if self.cost is None and other.cost is None:
            cost = None
        else:
            cost = (self.cost or 0.0) + (other.cost or 0.0)
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cost=cost,
            currency=self.currency or other.currency,
        )

    @classmethod
    def coerce(cls, value: Usage | Mapping[str, Any] | None) -> Usage | None:
        """Accept a ``Usage`` or a mapping with snake_case keys; ``total_tokens`` is derived."""
        if value is None or isinstance(value, Usage):
            return value
        data = dict(value)
        if "total_tokens" not in data:
            data["total_tokens"] = int(data.get("input_tokens", 0)) + int(
                data.get("output_tokens", 0)
            )
        return converter().structure(data, Usage)


def message_size_bound(message: Message) -> int:
    """An upper bound of the canonical-JSON size of ``message``, without encoding it.

    Text (also a tool result's text value) counts six bytes a character (the widest JSON form
    of one character); arguments, other values and errors count six bytes per character of
    their ``repr``; every block and field name gets a fixed allowance.
    """
    total = 48
    for block in message.content:
        if isinstance(block, TextContent):
            total += 6 * len(block.text) + 40
        elif isinstance(block, ThinkingContent):
            total += 6 * (len(block.text) + len(block.signature or "")) + 64
        elif isinstance(block, ToolCallContent):
            total += 6 * (len(block.id) + len(block.name) + len(repr(block.arguments))) + 80
        elif type(block.value) is str and block.error is None:
            # The common tool result: no ``repr`` of a long text value.
            total += 6 * (len(block.tool_call_id) + len(block.name) + len(block.value)) + 96
        else:
            total += 6 * len(repr(block)) + 16
    return total


def message_text(message: Message) -> str:
    """Concatenate the text blocks of ``message``."""
    return "".join(b.text for b in message.content if isinstance(b, TextContent))


def tool_call_content(id: str, name: str, args: Mapping[str, Any] | None = None) -> ToolCallContent:
    """Build a complete :class:`ToolCallContent`."""
    return ToolCallContent(id=id, name=name, arguments=dict(args or {}))


def to_messages(value: str | Message | Mapping[str, Any] | Sequence[Any]) -> tuple[Message, ...]:
    """Normalise run input (a string, a message, or a sequence of messages) into messages.

    Raises ``TypeError`` for anything else, before any provider work.
    """
    if isinstance(value, str):
        return (Message.user(value),)
    if isinstance(value, Message):
        return (value,)
    if isinstance(value, Mapping):
        return (converter().structure(dict(value), Message),)
    if isinstance(value, Sequence):
        out: list[Message] = []
        for item in value:
            if isinstance(item, Message):
                out.append(item)
            elif isinstance(item, Mapping):
                out.append(converter().structure(dict(item), Message))
            else:
                raise TypeError(
                    f"run input items must be Message values, got {type(item).__name__}"
                )
        if not out:
            raise TypeError("run input must not be an empty sequence")
        return tuple(out)
    raise TypeError(
        "run input must be a string, a Message or a sequence of messages, "
        f"got {type(value).__name__}"
    )


def _structure_block(data: Any, _: Any) -> ContentBlock:
    if not isinstance(data, Mapping):
        raise TypeError("a content block must be a mapping")
    kind = data.get("type")
    cls = _BLOCK_TYPES.get(str(kind))
    if cls is None:
        raise ValueError(f"unknown content block type {kind!r}")
    block: ContentBlock = converter().structure(dict(data), cls)
    return block


converter().register_structure_hook(ContentBlock, _structure_block)
converter().register_structure_hook(Any, lambda v, _: v)
