"""``prism chat --model anthropic:…`` in a subprocess, stdin piped, against a fake Messages API
server speaking the real streaming wire format, through the official SDK."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from prism_cli._chat import DEFAULT_SYSTEM
from tests.cli.chat_cli import run_prism_chat
from tests.fake_http import Reply, serve, sse_frames

from .support import API_KEY, sent_key


def _frame(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


def _stream(block: dict[str, Any], deltas: list[dict[str, Any]], stop_reason: str) -> Reply:
    """One streamed message of one content block (its start, its deltas), ended with
    ``stop_reason``."""
    message = {
        "id": "msg_01Chat",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 120, "output_tokens": 1},
    }
    text = _frame("message_start", {"type": "message_start", "message": message})
    text += _frame(
        "content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}
    )
    for delta in deltas:
        text += _frame(
            "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
        )
    text += _frame("content_block_stop", {"type": "content_block_stop", "index": 0})
    text += _frame(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": 12},
        },
    )
    text += _frame("message_stop", {"type": "message_stop"})
    return Reply(chunks=sse_frames(text))


def _text(*parts: str) -> Reply:
    deltas = [{"type": "text_delta", "text": part} for part in parts]
    return _stream({"type": "text", "text": ""}, deltas, "end_turn")


def _tool(call_id: str, name: str, *json_parts: str) -> Reply:
    block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
    deltas = [{"type": "input_json_delta", "partial_json": part} for part in json_parts]
    return _stream(block, deltas, "tool_use")


def _prism_chat(
    args: list[str], stdin: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return run_prism_chat(args, stdin, env, provider_env_prefix="ANTHROPIC_")


def test_chat_with_an_anthropic_model_runs_tools_and_asks_before_calculate() -> None:
    """Two questions: ``current_time`` runs at once, ``calculate`` waits for a typed ``y``;
    every request carries the system prompt, both tools and the key, and each tool result
    goes back as a ``tool_result`` block of the user turn."""
    replies = (
        _tool("toolu_time_1", "current_time", "{}"),
        _text("It is ", "noon UTC."),
        _tool("toolu_calc_1", "calculate", '{"a": 6, ', '"b": 7, "op": "*"}'),
        _text("6 * 7 = ", "42."),
    )
    with serve(*replies) as server:
        done = _prism_chat(
            ["--model", "anthropic:claude-sonnet-4-6"],
            "What time is it?\nWhat is 6 * 7?\ny\nexit\n",
            {"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": API_KEY},
        )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "prism chat with anthropic:claude-sonnet-4-6" in out
    assert "[tool] current_time {}" in out
    assert '[result] current_time {"local": ' in out
    assert "assistant> It is noon UTC.\n" in out
    assert 'allow calculate {"a": 6, "b": 7, "op": "*"}? [y/N] ' in out
    assert '[result] calculate {"result": 42}' in out
    assert "assistant> 6 * 7 = 42.\n" in out
    assert out.index("allow calculate") < out.index("[result] calculate")
    assert API_KEY not in out + done.stderr

    assert [r.path for r in server.requests] == ["/v1/messages"] * 4
    first = server.requests[0].json()
    assert first["model"] == "claude-sonnet-4-6"
    assert first["stream"] is True
    assert first["system"] in (DEFAULT_SYSTEM, [{"type": "text", "text": DEFAULT_SYSTEM}])
    assert [t["name"] for t in first["tools"]] == ["current_time", "calculate"]
    assert all(sent_key(r.headers) == API_KEY for r in server.requests)
    time_turn = server.requests[1].json()["messages"][-1]
    assert time_turn["role"] == "user"
    (time_result,) = time_turn["content"]
    assert time_result["type"] == "tool_result"
    assert time_result["tool_use_id"] == "toolu_time_1"
    last = server.requests[3].json()["messages"]
    assert [m["role"] for m in last] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    (calc_result,) = last[-1]["content"]
    assert calc_result["tool_use_id"] == "toolu_calc_1"
    assert "42" in json.dumps(calc_result["content"])


def test_chat_refusal_with_an_anthropic_model_reaches_the_model() -> None:
    """Answering ``n`` blocks ``calculate`` and tells the model in an error tool result."""
    replies = (
        _tool("toolu_calc_9", "calculate", '{"a": 1, "b": 0, "op": "/"}'),
        _text("Understood, I will not divide."),
    )
    with serve(*replies) as server:
        done = _prism_chat(
            ["--model", "anthropic:claude-sonnet-4-6", "--base-url", server.base_url],
            "Divide 1 by 0\nn\n",
            {"ANTHROPIC_API_KEY": API_KEY},
        )
    assert done.returncode == 0, done.stderr
    assert "[blocked] calculate: the user said no" in done.stdout
    assert "[result] calculate" not in done.stdout
    assert "assistant> Understood, I will not divide.\n" in done.stdout
    refusal = server.requests[1].json()["messages"][-1]["content"][0]
    assert refusal["type"] == "tool_result"
    assert refusal["tool_use_id"] == "toolu_calc_9"
    assert refusal.get("is_error") is True
    assert refusal["content"] == "the user said no"
