"""Turning a Prism ``ProviderRequest`` into the keyword arguments of ``messages.create``."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from prism_core import (
    Message,
    ProviderRequest,
    ProviderToolSpec,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolResultContent,
)
from prism_core.errors import PrismError
from prism_core.provider_errors import PROVIDER_OPTIONS

from ._output import add_output_tool

__all__ = (
    "DEFAULT_MAX_TOKENS",
    "THINKING_BUDGETS",
    "AnthropicRequestError",
    "build_create_params",
    "convert_messages",
    "convert_tools",
)

#: ``max_tokens`` when neither the agent nor the run sets one (the API requires a value).
DEFAULT_MAX_TOKENS = 8192

#: ``budget_tokens`` for each ``thinking_level``; ``"off"``/``"none"`` sends no thinking config.
THINKING_BUDGETS: Mapping[str, int] = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 24576,
    "max": 32000,
}
_THINKING_OFF = frozenset({"off", "none", "disabled"})

# Messages API parameters a host may set through ``provider_options``. Anything else there is
# a hint for other providers or for Prism itself (``session_id``, ``cache_key``) and is not sent.
_PASSED_THROUGH = frozenset(
    {
        "max_tokens",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "metadata",
        "tool_choice",
        "thinking",
        "service_tier",
        "cache_control",
        "output_config",
        "container",
        "inference_geo",
        "speed",
    }
)
_SDK_EXTRAS = {"extra_headers": "extra_headers", "headers": "extra_headers"}


class AnthropicRequestError(PrismError):
    """A request option the Anthropic provider cannot send (``ERR_PRISM_PROVIDER_OPTIONS``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code=PROVIDER_OPTIONS)


def _tool_result_content(block: ToolResultContent) -> str:
    if block.error is not None:
        return block.error.message
    if isinstance(block.value, str):
        return block.value
    return json.dumps(block.value, ensure_ascii=False, sort_keys=True)


def _blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text:  # the API refuses empty text blocks
                blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ThinkingContent):
            # Only Anthropic's own signed thinking is accepted back; unsigned reasoning (from
            # another provider, or a stream that never signed it) is dropped, not forged.
            if message.role == "assistant" and block.signature:
                blocks.append(
                    {"type": "thinking", "thinking": block.text, "signature": block.signature}
                )
        elif isinstance(block, ToolCallContent):
            blocks.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": block.arguments}
            )
        elif isinstance(block, ToolResultContent):
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": block.tool_call_id,
                "content": _tool_result_content(block),
            }
            if block.error is not None:
                result["is_error"] = True
            blocks.append(result)
    return blocks


def convert_messages(
    messages: Iterable[Message],
) -> tuple[list[str], list[dict[str, Any]]]:
    """Split history into system text and Messages-API messages.

    ``system`` messages join the top-level system prompt; ``tool`` messages become ``user``
    messages of ``tool_result`` blocks; consecutive messages of one role are merged, since
    the API expects user and assistant turns to alternate; empty messages are left out.
    """
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            if message.text:
                system.append(message.text)
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    for entry in out:
        if entry["role"] == "user":
            # Tool results must lead their user message.
            entry["content"].sort(key=lambda b: b["type"] != "tool_result")
    return system, out


def convert_tools(tools: Iterable[ProviderToolSpec]) -> list[dict[str, Any]]:
    """Messages-API tool definitions (``input_schema`` is the tool's JSON Schema)."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        schema = dict(tool.parameters) if tool.parameters else {"type": "object", "properties": {}}
        spec: dict[str, Any] = {"name": tool.name, "input_schema": schema}
        if tool.description:
            spec["description"] = tool.description
        out.append(spec)
    return out


def _thinking(level: Any) -> dict[str, Any] | None:
    if level is None:
        return None
    if not isinstance(level, str):
        raise AnthropicRequestError(f"thinking_level must be a string, got {level!r}")
    key = level.strip().lower()
    if key in _THINKING_OFF:
        return None
    budget = THINKING_BUDGETS.get(key)
    if budget is None:
        raise AnthropicRequestError(
            f"unknown thinking_level {level!r}; use one of "
            f"{sorted([*THINKING_BUDGETS, *_THINKING_OFF])} or set provider_options "
            '{"thinking": {...}} directly'
        )
    return {"type": "enabled", "budget_tokens": budget}


def build_create_params(
    request: ProviderRequest, *, default_max_tokens: int = DEFAULT_MAX_TOKENS
) -> dict[str, Any]:
    """The keyword arguments for ``AsyncAnthropic().messages.create(stream=True, ...)``.

    Known Messages-API parameters in ``request.options`` are passed as they are;
    ``extra_body``/``extra_headers`` (or ``headers``)/``extra_query`` go to the SDK; an
    ``anthropic`` mapping in the options is applied last and may carry any body field.
    ``thinking_level`` becomes a ``thinking`` budget unless ``thinking`` is set explicitly.
    """
    options = dict(request.options)
    nested = options.pop("anthropic", None) or {}
    if not isinstance(nested, Mapping):
        raise AnthropicRequestError("provider_options['anthropic'] must be a mapping")
    system_parts, messages = convert_messages(request.messages)
    params: dict[str, Any] = {
        "model": request.model.model,
        "messages": messages,
        "stream": True,
    }
    extra_body: dict[str, Any] = {}
    for key, value in options.items():
        if key in _PASSED_THROUGH:
            params[key] = value
        elif key in _SDK_EXTRAS:
            params[_SDK_EXTRAS[key]] = dict(value)
        elif key == "extra_body":
            extra_body.update(value)
        elif key == "extra_query":
            params["extra_query"] = dict(value)
    for key, value in nested.items():
        if key in _PASSED_THROUGH:
            params[key] = value
        elif key in ("model", "messages", "stream"):
            raise AnthropicRequestError(f"provider_options['anthropic'] may not set {key!r}")
        else:
            extra_body[key] = value
    if extra_body:
        params["extra_body"] = extra_body
    if "thinking" not in params:
        thinking = _thinking(options.get("thinking_level"))
        if thinking is not None:
            params["thinking"] = thinking
    if "max_tokens" not in params:
        max_tokens = default_max_tokens
        thinking = params.get("thinking")
        if isinstance(thinking, Mapping) and isinstance(thinking.get("budget_tokens"), int):
            # The budget counts toward max_tokens and must stay below it.
            max_tokens = max(max_tokens, int(thinking["budget_tokens"]) + default_max_tokens)
        params["max_tokens"] = max_tokens
    system = "\n\n".join(p for p in [request.system or "", *system_parts] if p)
    if system:
        params["system"] = system
    if request.tools:
        params["tools"] = convert_tools(request.tools)
    add_output_tool(request, params)
    return params
