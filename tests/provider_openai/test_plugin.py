"""The plugin hook, configuration from the environment, host-owned clients, request building."""

from __future__ import annotations

import email.utils
import json
from datetime import UTC, datetime, timedelta

import openai
import pytest

import prism_provider_openai as oa
from prism_core import (
    AgentRunError,
    ErrorInfo,
    Message,
    ModelConfig,
    ProviderRequest,
    ProviderToolSpec,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolResultContent,
    create_agent,
    discover_plugins,
)
from prism_core.provider_errors import PROVIDER_CONFIG, retry_after_ms
from prism_provider_openai._errors import redact_key
from prism_provider_openai._request import build_params
from tests.fake_http import serve

from ._support import API_KEY, MODEL, SDK_STREAM_FINALISER, error_reply, replay

pytestmark = SDK_STREAM_FINALISER


def test_the_hook_answers_only_for_openai() -> None:
    """``prism_provider`` returns a provider for ``openai`` models and ``None`` otherwise."""
    provider = oa.plugin.prism_provider(ModelConfig("openai", "gpt-4.1-mini"))
    assert isinstance(provider, oa.OpenAIProvider)
    assert provider.id == "openai"
    assert oa.plugin.prism_provider(ModelConfig("anthropic", "claude-sonnet-4-5")) is None
    assert oa.plugin.prism_provider(ModelConfig("mock", "demo")) is None


def test_the_distribution_declares_the_plugin() -> None:
    """The ``prism`` entry point of ``prism-runtime-openai`` loads the plugin module."""
    assert oa.plugin in discover_plugins()


def test_public_names_are_exported() -> None:
    """Every public name of the package is in ``__all__`` and documented."""
    for name in oa.__all__:
        value = getattr(oa, name)
        if callable(value):
            assert value.__doc__, name


@pytest.mark.anyio
async def test_the_environment_configures_the_plugin_provider(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` reach the provider the plugin builds."""
    with serve(replay("plain_text")) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment-1234")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url + "/compat/v1")
        agent = create_agent(model="openai:qwen2.5:7b", plugins=[oa.plugin])
        result = await agent.create_session().run("hi")
    assert result.text == "The capital of France is Paris."
    (request,) = server.requests
    assert request.path == "/compat/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-from-the-environment-1234"
    assert request.json()["model"] == "qwen2.5:7b"


@pytest.mark.anyio
async def test_a_missing_key_fails_the_run_with_a_clear_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No key anywhere: the run fails before any request, naming ``OPENAI_API_KEY``."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with serve(replay("plain_text")) as server:
        provider = oa.create_openai_provider(base_url=server.base_url + "/v1")
        agent = create_agent(model=MODEL, provider=provider)
        with pytest.raises(AgentRunError) as raised:
            await agent.create_session().run("hi")
        assert server.requests == []
    error = raised.value.result.error
    assert error is not None
    assert error.code == PROVIDER_CONFIG
    assert "OPENAI_API_KEY" in error.message


@pytest.mark.anyio
async def test_a_host_owned_client_is_used_without_sdk_retries_and_left_open() -> None:
    """A host's ``AsyncOpenAI`` is used as given, its own retries off, and not closed."""
    with serve(error_reply(500, "boom"), replay("plain_text")) as server:
        client = openai.AsyncOpenAI(
            api_key=API_KEY, base_url=server.base_url + "/v1", max_retries=5
        )
        agent = create_agent(model=MODEL, provider=oa.create_openai_provider(client=client))
        with pytest.raises(AgentRunError):
            await agent.create_session().run("hi", retry=False)
        assert len(server.requests) == 1
        assert not client.is_closed()
        result = await agent.create_session().run("hi again")
        assert result.status == "succeeded"
        await client.close()


def test_a_client_and_a_key_together_are_refused() -> None:
    """``client=`` with ``api_key=`` is ambiguous and refused."""
    client = openai.AsyncOpenAI(api_key=API_KEY, base_url="http://127.0.0.1:9/v1")
    with pytest.raises(oa.OpenAIRequestError) as raised:
        oa.create_openai_provider(client=client, api_key="other")
    assert raised.value.code == PROVIDER_CONFIG


def _request(*messages: Message, **options: object) -> ProviderRequest:
    return ProviderRequest(
        model=ModelConfig("openai", "gpt-4.1-mini"),
        messages=messages,
        system="Be brief.",
        options=options,
        tools=(ProviderToolSpec("now"),),
    )


def test_conversation_messages_map_to_chat_completions_roles() -> None:
    """User, assistant (text, thinking, calls), tool results and errors map one to one."""
    history = (
        Message.user("What time is it?"),
        Message(
            "assistant",
            (
                ThinkingContent("I should call now."),
                TextContent("Checking."),
                ToolCallContent("call_1", "now", {"tz": "UTC"}),
            ),
        ),
        Message("tool", (ToolResultContent("call_1", "now", "12:00"),)),
        Message(
            "tool",
            (ToolResultContent("call_2", "now", error=ErrorInfo("no clock", "tool_failed")),),
        ),
    )
    params = build_params(_request(*history), preserve_thinking=False)
    assert params["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What time is it?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "now", "arguments": '{"tz": "UTC"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "12:00"},
        {
            "role": "tool",
            "tool_call_id": "call_2",
            "content": json.dumps({"error": "no clock", "code": "tool_failed"}),
        },
    ]
    assert params["tools"] == [
        {
            "type": "function",
            "function": {"name": "now", "parameters": {"type": "object", "properties": {}}},
        }
    ]


def test_bad_prism_options_are_refused_before_any_request() -> None:
    """Malformed ``preserve_thinking``, ``system_role`` or ``thinking_level`` raise typed errors."""
    for options in (
        {"preserve_thinking": "yes"},
        {"system_role": "admin"},
        {"thinking_level": "extreme"},
    ):
        with pytest.raises(oa.OpenAIRequestError) as raised:
            build_params(_request(Message.user("hi"), **options), preserve_thinking=False)
        assert raised.value.code == "ERR_PRISM_PROVIDER_OPTIONS"


@pytest.mark.anyio
async def test_a_bad_option_fails_the_run_without_a_request() -> None:
    """A refused option surfaces as the run's non-retryable error; nothing is sent."""
    with serve(replay("plain_text")) as server:
        provider = oa.create_openai_provider(api_key=API_KEY, base_url=server.base_url + "/v1")
        agent = create_agent(model=MODEL, provider=provider, retry=True)
        with pytest.raises(AgentRunError) as raised:
            await agent.create_session().run("hi", thinking_level="extreme")
        assert server.requests == []
    error = raised.value.result.error
    assert error is not None
    assert error.code == "ERR_PRISM_PROVIDER_OPTIONS"
    assert error.retryable is False


def test_retry_after_headers_in_every_form() -> None:
    """``retry-after-ms`` wins; ``retry-after`` may be seconds or an HTTP date."""
    assert retry_after_ms({"retry-after-ms": "250", "retry-after": "9"}) == 250
    assert retry_after_ms({"retry-after": "2"}) == 2000
    assert retry_after_ms({"retry-after": "0.5"}) == 500
    soon = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=30))
    waited = retry_after_ms({"retry-after": soon})
    assert waited is not None
    assert 28_000 <= waited <= 31_000
    assert retry_after_ms({"retry-after": "soon-ish"}) is None
    assert retry_after_ms({}) is None


def test_keys_and_their_masked_echoes_are_redacted() -> None:
    """The key and the ``sk-abc…wxyz`` form a server echoes of it are both removed."""
    message = f"bad key {API_KEY}; you sent {API_KEY[:7]}***{API_KEY[-4:]}."
    cleaned = redact_key(message, API_KEY)
    assert API_KEY not in cleaned
    assert API_KEY[:6] not in cleaned
    assert cleaned.startswith("bad key [REDACTED]; you sent [REDACTED]")
    assert redact_key("nothing secret", None) == "nothing secret"
