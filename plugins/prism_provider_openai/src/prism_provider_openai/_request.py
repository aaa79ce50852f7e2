"""Turning a Prism ``ProviderRequest`` into Chat Completions request parameters."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from prism_core import (
    Message,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolResultContent,
)
from prism_core.errors import PrismError
from prism_core.provider_errors import PROVIDER_OPTIONS
from prism_core.providers import ProviderRequest, ProviderToolSpec

__all__ = (
    "PASS_THROUGH_OPTIONS",
    "PRISM_OPTIONS",
    "OpenAIRequestError",
    "build_params",
)

#: Request options copied verbatim into the Chat Completions request when present.
PASS_THROUGH_OPTIONS = frozenset(
    {
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "user",
        "response_format",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning_effort",
        "service_tier",
        "store",
        "prompt_cache_key",
        "safety_identifier",
        "verbosity",
        "prediction",
        "web_search_options",
        "stream_options",
        # The SDK's own escape hatches, for server-specific fields (vLLM's ``top_k``, …).
        "extra_body",
        "extra_headers",
        "extra_query",
    }
)

#: Options this provider reads itself; they are never sent as they are.
PRISM_OPTIONS = frozenset({"preserve_thinking", "system_role", "thinking_level"})

# Prism's thinking levels, as Chat Completions ``reasoning_effort`` values.
_EFFORTS = {
    "off": "none",
    "none": "none",
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "xhigh",
}


class OpenAIRequestError(PrismError):
    """A request option has a value this provider cannot send."""

    code = PROVIDER_OPTIONS


def build_params(request: ProviderRequest, *, preserve_thinking: bool) -> dict[str, Any]:
    """The keyword arguments of ``client.chat.completions.create`` for one streamed turn.

    ``preserve_thinking`` (overridden by the request option of the same name) decides whether
    prior ``thinking`` blocks ride assistant messages as ``reasoning_content``.
    """
    options = request.options
    keep = options.get("preserve_thinking", preserve_thinking)
    if not isinstance(keep, bool):
        raise OpenAIRequestError(f"option preserve_thinking must be a bool, got {keep!r}")
    role = options.get("system_role", "system")
    if role not in ("system", "developer"):
        raise OpenAIRequestError(
            f"option system_role must be 'system' or 'developer', got {role!r}"
        )
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": role, "content": request.system})
    for message in request.messages:
        messages.extend(_message(message, keep_thinking=keep, system_role=role))
    params: dict[str, Any] = {
        "model": request.model.model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        params["tools"] = [_tool(spec) for spec in request.tools]
    level = options.get("thinking_level")
    if level is not None and "reasoning_effort" not in options:
        effort = _EFFORTS.get(str(level))
        if effort is None:
            raise OpenAIRequestError(
                f"thinking_level {level!r} has no reasoning_effort; use one of {sorted(_EFFORTS)}"
            )
        params["reasoning_effort"] = effort
    format_ = _response_format(request)
    if format_ is not None:
        params["response_format"] = format_
    for key, value in options.items():
        if key in PASS_THROUGH_OPTIONS:
            params[key] = dict(value) if isinstance(value, Mapping) else value
    return params


def _response_format(request: ProviderRequest) -> dict[str, Any] | None:
    """``response_format`` for a run with an ``output_type`` (an object schema): the schema as
    ``json_schema``, ``strict`` when every object in it is closed and requires all its
    properties (what strict mode accepts). A host's own ``response_format`` option wins."""
    output = request.output
    if output is None or output.schema.get("type") != "object":
        return None
    schema = dict(output.schema)
    return {
        "type": "json_schema",
        "json_schema": {"name": output.name, "schema": schema, "strict": _strict(schema)},
    }


def _strict(schema: Any) -> bool:
    """Whether every object schema in ``schema`` has ``additionalProperties: false`` and
    requires each of its properties."""
    if isinstance(schema, list):
        return all(_strict(item) for item in schema)
    if not isinstance(schema, Mapping):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        if schema.get("additionalProperties") is not False:
            return False
        if set(schema.get("required") or ()) != set(properties):
            return False
    return all(_strict(value) for key, value in schema.items() if key not in ("enum", "const"))


def _tool(spec: ProviderToolSpec) -> dict[str, Any]:
    function: dict[str, Any] = {
        "name": spec.name,
        "parameters": dict(spec.parameters or {"type": "object", "properties": {}}),
    }
    if spec.description:
        function["description"] = spec.description
    return {"type": "function", "function": function}


def _message(
    message: Message, *, keep_thinking: bool, system_role: str
) -> Iterable[dict[str, Any]]:
    if message.role == "assistant":
        yield _assistant(message, keep_thinking=keep_thinking)
        return
    results = [b for b in message.content if isinstance(b, ToolResultContent)]
    for result in results:
        yield {
            "role": "tool",
            "tool_call_id": result.tool_call_id,
            "content": _result_text(result),
        }
    text = "".join(b.text for b in message.content if isinstance(b, TextContent))
    if text or not results:
        role = system_role if message.role == "system" else "user"
        yield {"role": role, "content": text}


def _assistant(message: Message, *, keep_thinking: bool) -> dict[str, Any]:
    text = "".join(b.text for b in message.content if isinstance(b, TextContent))
    calls = [b for b in message.content if isinstance(b, ToolCallContent)]
    out: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": json.dumps(call.arguments, ensure_ascii=False),
                },
            }
            for call in calls
        ]
    elif not text:
        out["content"] = ""
    if keep_thinking:
        thinking = "".join(b.text for b in message.content if isinstance(b, ThinkingContent))
        if thinking:
            out["reasoning_content"] = thinking
    return out


def _result_text(result: ToolResultContent) -> str:
    if result.error is not None:
        error: dict[str, Any] = {"error": result.error.message}
        if result.error.code:
            error["code"] = result.error.code
        return json.dumps(error, ensure_ascii=False)
    if isinstance(result.value, str):
        return result.value
    return json.dumps(result.value, ensure_ascii=False)
