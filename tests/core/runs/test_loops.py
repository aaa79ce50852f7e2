"""Loop strategies: single-shot, generate-validate-revise, custom and plugin strategies."""

from __future__ import annotations

from typing import Any

import pytest

from prism_core import (
    AgentRunError,
    GenerateValidateReviseLoop,
    InvalidOptionsError,
    Message,
    SingleShotLoop,
    create_agent,
    create_mock_provider,
)
from prism_core.hookspecs import hookimpl

from ..helpers import MODEL, text_turn


def agent_answering(*answers: str, **config: Any) -> Any:
    """An agent whose provider answers ``answers`` turn by turn (the last repeats)."""
    return create_agent(
        model=MODEL, provider=create_mock_provider(turns=[text_turn(a) for a in answers]), **config
    )


def test_builtin_loops_have_names_and_revision_one() -> None:
    """Both built-in loops are named and at revision "1"."""
    assert (SingleShotLoop().name, SingleShotLoop().revision) == ("single-shot", "1")
    gvr = GenerateValidateReviseLoop(validate=lambda text: None)
    assert (gvr.name, gvr.revision) == ("generate-validate-revise", "1")


@pytest.mark.anyio
async def test_generate_validate_revise_asks_for_revisions_until_valid() -> None:
    """An invalid answer gets revise feedback as a user message; a valid one ends the run."""
    loop = GenerateValidateReviseLoop(
        validate=lambda text: None if text.endswith(".") else "end with a period",
        revise=lambda text, problem: f"Revise: {problem}",
        max_revisions=2,
    )
    agent = agent_answering("draft", "still draft", "final.", loop=loop)
    session = agent.create_session()
    result = await session.run("write")
    assert result.text == "final."
    texts = [e.message.text for e in await session.entries() if e.message]
    assert texts == [
        "write",
        "draft",
        "Revise: end with a period",
        "still draft",
        "Revise: end with a period",
        "final.",
    ]
    assert loop.revisions == 0  # the configured loop is a template; runs get fresh state


@pytest.mark.anyio
async def test_generate_validate_revise_fails_after_max_revisions() -> None:
    """Still invalid after max_revisions: the run fails with ERR_PRISM_LOOP_VALIDATION."""
    loop = GenerateValidateReviseLoop(validate=lambda text: "never good", max_revisions=1)
    agent = agent_answering("a", loop=loop)
    with pytest.raises(AgentRunError) as info:
        await agent.create_session().run("x")
    assert info.value.code == "ERR_PRISM_LOOP_VALIDATION"


@pytest.mark.anyio
async def test_run_loop_overrides_agent_loop_and_custom_loops_work() -> None:
    """A host strategy object drives turns through its context."""

    class TwoPasses:
        name = "two-passes"
        revision = "7"

        async def run(self, context: Any) -> Any:
            async for event in context.run_turns():
                yield event
            await context.add_user_message(Message.user("second pass"))
            async for event in context.run_turns():
                yield event

    agent = agent_answering("one", "two")
    session = agent.create_session()
    result = await session.run("go", loop=TwoPasses())
    assert result.text == "two"
    assert [e.message.text for e in await session.entries() if e.message][-2:] == [
        "second pass",
        "two",
    ]


@pytest.mark.anyio
async def test_plugin_loop_strategies_resolve_by_name() -> None:
    """prism_loop_strategies makes a strategy selectable by name; unknown names fail early."""

    class Once:
        name = "once"
        revision = "1"

        async def run(self, context: Any) -> Any:
            async for event in context.run_turns():
                yield event

    class LoopPlugin:
        @hookimpl
        def prism_loop_strategies(self) -> list[Any]:
            return [Once()]

    agent = agent_answering("ok", plugins=[LoopPlugin()], loop="once")
    assert (await agent.create_session().run("x")).text == "ok"
    with pytest.raises(InvalidOptionsError, match="Unknown loop strategy"):
        await agent.create_session().run("x", loop="twice")
