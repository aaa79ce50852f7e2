"""The provider plugin example of docs/providers.md, run from the page and checked."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import pytest

from prism_core import AgentRunError, ModelConfig, create_agent

PAGE = Path(__file__).resolve().parent.parent / "docs" / "providers.md"
SECTION = "## Writing a provider plugin"


def example() -> str:
    """The first ``python`` block of the page's plugin-writing section."""
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index(SECTION) :]
    match = re.search(r"^```python\n(.*?)^```", section, re.S | re.M)
    assert match is not None, f"{SECTION} has no python example"
    return match.group(1)


def run_example(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """Execute the example as a script; return its namespace."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(example(), f"{PAGE.name}:{SECTION}", "exec", dont_inherit=True), namespace)
    return namespace


def test_the_example_runs_and_prints_what_its_comment_says(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The page's plugin answers for its model through the hook, calls the tool, streams the
    answer and reports usage and the finish reason."""
    namespace = run_example(capsys)
    assert capsys.readouterr().out == "HELLO!PLUGINS! 40 stop\n"
    assert namespace["logged"] == ["hello plugins"]


def test_the_plugin_answers_only_for_its_provider_id(capsys: pytest.CaptureFixture[str]) -> None:
    """The hook returns a provider for ``shout:…`` and ``None`` for any other provider id; an
    agent with only this plugin fails closed for another provider."""
    namespace = run_example(capsys)
    plugin = namespace["plugin"]
    assert plugin.prism_provider(ModelConfig.parse("shout:v1")).id == "shout"
    assert plugin.prism_provider(ModelConfig.parse("openai:gpt-4.1-mini")) is None

    async def other() -> None:
        agent = create_agent(model="other:v1", plugins=[plugin])
        with pytest.raises(AgentRunError) as caught:
            await agent.create_session().run("hi")
        assert caught.value.result.status == "failed"

    anyio.run(other)


def test_the_providers_failure_is_an_event(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown model of the plugin's provider fails the run with the provider's code,
    not retried."""
    namespace = run_example(capsys)

    async def unknown() -> None:
        agent = create_agent(model="shout:v2", plugins=[namespace["plugin"]])
        with pytest.raises(AgentRunError) as caught:
            await agent.create_session().run("hi")
        error = caught.value.result.error
        assert error is not None
        assert (error.code, error.retryable) == ("bad_model", False)

    anyio.run(unknown)
