"""``prism chat`` in a subprocess, stdin piped, against the fake Chat Completions server."""

from __future__ import annotations

import io
import json
import subprocess

from prism_cli._chat import DEFAULT_SYSTEM, run_chat
from tests.cli.chat_cli import run_prism_chat
from tests.fake_http import FakeHTTPServer, serve

from ._support import API_KEY, error_reply, replay, text_reply, tool_reply


def _prism_chat(
    args: list[str], stdin: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return run_prism_chat(args, stdin, env, provider_env_prefix="OPENAI_")


def _tool_names(server: FakeHTTPServer) -> list[str]:
    return [t["function"]["name"] for t in server.requests[0].json()["tools"]]


def test_chat_streams_answers_shows_tools_and_asks_before_calculate() -> None:
    """Two questions: a read-only tool runs at once; ``calculate`` waits for a typed ``y``."""
    replies = (
        tool_reply("call_time_1", "current_time", "{}"),
        text_reply("It is ", "noon UTC."),
        tool_reply("call_calc_1", "calculate", '{"a": 6, ', '"b": 7, "op": "*"}'),
        text_reply("6 * 7 = ", "42."),
    )
    with serve(*replies) as server:
        done = _prism_chat(
            ["--model", "openai:gpt-4.1-mini"],
            "What time is it?\nWhat is 6 * 7?\ny\nexit\n",
            {"OPENAI_BASE_URL": server.base_url + "/v1", "OPENAI_API_KEY": API_KEY},
        )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "prism chat with openai:gpt-4.1-mini" in out
    assert "[tool] current_time {}" in out
    assert '[result] current_time {"local": ' in out
    assert "assistant> It is noon UTC.\n" in out
    assert 'allow calculate {"a": 6, "b": 7, "op": "*"}? [y/N] ' in out
    assert '[tool] calculate {"a": 6, "b": 7, "op": "*"}' in out
    assert '[result] calculate {"result": 42}' in out
    assert "assistant> 6 * 7 = 42.\n" in out
    assert out.index("allow calculate") < out.index("[result] calculate")
    assert len(server.requests) == 4
    assert _tool_names(server) == ["current_time", "calculate"]
    first = server.requests[0].json()
    assert first["model"] == "gpt-4.1-mini"
    assert first["messages"][0] == {"role": "system", "content": DEFAULT_SYSTEM}
    assert server.requests[0].headers["authorization"] == f"Bearer {API_KEY}"
    time_result = server.requests[1].json()["messages"][-1]
    assert time_result["tool_call_id"] == "call_time_1"
    assert set(json.loads(time_result["content"])) == {"utc", "local"}
    last = server.requests[3].json()["messages"]
    assert [m["role"] for m in last] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
    ]
    assert last[-1] == {"role": "tool", "tool_call_id": "call_calc_1", "content": '{"result": 42}'}


def test_chat_refusal_reaches_the_model_and_end_of_input_ends_the_chat() -> None:
    """Answering ``n`` blocks the call and tells the model; ``--base-url`` and ``--system``
    are used; end of input exits cleanly."""
    replies = (
        tool_reply("call_calc_9", "calculate", '{"a": 1, "b": 0, "op": "/"}'),
        text_reply("Understood, I will not divide."),
    )
    with serve(*replies) as server:
        done = _prism_chat(
            [
                "--model",
                "openai:local-model",
                "--base-url",
                server.base_url + "/v1",
                "--system",
                "Talk like a pirate.",
            ],
            "Divide 1 by 0\nn\n",
            {"OPENAI_API_KEY": "local"},
        )
    assert done.returncode == 0, done.stderr
    assert "[blocked] calculate: the user said no" in done.stdout
    assert "[result] calculate" not in done.stdout
    assert "assistant> Understood, I will not divide.\n" in done.stdout
    first, second = (r.json() for r in server.requests)
    assert first["model"] == "local-model"
    assert first["messages"][0] == {"role": "system", "content": "Talk like a pirate."}
    refusal = second["messages"][-1]
    assert refusal["role"] == "tool"
    assert json.loads(refusal["content"])["code"] == "approval_rejected"


def test_a_provider_error_is_shown_and_the_chat_goes_on() -> None:
    """A failed turn prints the server's message; the next question still gets an answer,
    its reasoning shown apart from the text."""
    failing = error_reply(400, "model 'nope' not found")
    with serve(failing, replay("reasoning_content")) as server:
        done = _prism_chat(
            ["--model", "openai:nope"],
            "hi\nhi again\n",
            {"OPENAI_BASE_URL": server.base_url + "/v1", "OPENAI_API_KEY": API_KEY},
        )
    assert done.returncode == 0, done.stderr
    assert "error: HTTP 400 from the model server: model 'nope' not found" in done.stdout
    assert "  (thinking) The user asks for 17 * 3. 17 * 3 = 51.\n" in done.stdout
    assert "assistant> 17 \u00d7 3 = 51.\n" in done.stdout
    assert API_KEY not in done.stdout + done.stderr


def test_no_provider_plugin_names_the_extra_to_install() -> None:
    """Without a plugin for the provider, the chat exits 1 and says what to install."""
    err = io.StringIO()
    assert run_chat(model="anthropic:claude-sonnet-4-5", plugins=[], stderr=err) == 1
    assert "pip install 'prism-runtime[anthropic]'" in err.getvalue()
    err = io.StringIO()
    assert run_chat(model="nosuch:model", plugins=[], stderr=err) == 1
    assert "prism_provider hook answers 'nosuch'" in err.getvalue()


def test_a_malformed_model_string_is_a_usage_error() -> None:
    """``--model gpt-4`` (no provider) exits 2 with the model-string help."""
    err = io.StringIO()
    assert run_chat(model="gpt-4", plugins=[], stderr=err) == 2
    assert "provider:model" in err.getvalue()
