"""Model strings: ``"provider:model"`` wherever a model is accepted."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import (
    ModelConfig,
    create_agent,
    create_mock_provider,
    provider_done,
    provider_text_delta,
)

pytestmark = pytest.mark.anyio


def test_parse_splits_at_the_first_colon() -> None:
    """The provider id is before the first colon; the model name keeps later colons."""
    assert ModelConfig.parse("openai:gpt-4.1-mini") == ModelConfig("openai", "gpt-4.1-mini")
    assert ModelConfig.parse("ollama:llama3:8b") == ModelConfig("ollama", "llama3:8b")
    assert ModelConfig.parse("openrouter:meta/llama-3") == ModelConfig("openrouter", "meta/llama-3")


@pytest.mark.parametrize("text", ["gpt-4.1", "openai:", ":gpt", "Open AI:gpt", "", "x" * 500])
def test_parse_refuses_what_is_not_provider_colon_model(text: str) -> None:
    """A string without both parts is refused with an example, and a bounded echo."""
    with pytest.raises(ValueError, match="provider:model") as caught:
        ModelConfig.parse(text)
    assert len(str(caught.value)) < 300


def test_create_agent_accepts_a_model_string() -> None:
    """create_agent(model="provider:model") builds the ModelConfig."""
    agent = create_agent(model="openai:gpt-4.1-mini")
    assert agent.model == ModelConfig("openai", "gpt-4.1-mini")


def test_create_agent_refuses_a_bad_model_string() -> None:
    """A model string without a provider id fails when the agent is created."""
    with pytest.raises(TypeError, match="provider:model"):
        create_agent(model="gpt-4.1-mini")


async def test_run_option_model_string_reaches_the_provider() -> None:
    """A per-run model string overrides the agent's model for that run's requests."""
    seen: list[Any] = []
    provider = create_mock_provider(
        [provider_text_delta("hi"), provider_done()], on_request=seen.append
    )
    agent = create_agent(model="mock:base", provider=provider)
    result = await agent.create_session().run("hello", model="mock:override")
    assert result.status == "succeeded"
    assert seen[0].model == ModelConfig("mock", "override")
