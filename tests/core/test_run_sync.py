"""``agent.run_sync()``: a run for scripts and notebooks, refused inside an event loop."""

from __future__ import annotations

import pytest

from prism_core import AgentRunError, PrismError
from tests.core.helpers import echo_tool, scripted_agent, text_turn, tool_turn


def test_run_sync_runs_on_a_new_session_and_returns_the_result() -> None:
    """Outside any event loop it runs the whole run (tools included) and returns its result;
    each call gets a session of its own."""
    log: list[object] = []
    agent = scripted_agent(
        [tool_turn(("c1", "echo", {"n": 1})), text_turn("done")], tools=[echo_tool("echo", log)]
    )
    first = agent.run_sync("go")
    assert first.status == "succeeded"
    assert first.text == "done"
    assert log == [("echo", {"n": 1})]
    second = agent.run_sync("again", metadata={"k": "v"})
    assert second.session_id != first.session_id


def test_run_sync_raises_for_a_failed_run() -> None:
    """A failed run raises ``AgentRunError`` with the result, as ``run()`` does."""
    agent = scripted_agent([text_turn("x")], limits={"max_turns": 0})
    with pytest.raises(AgentRunError) as caught:
        agent.run_sync("go")
    assert caught.value.result.status == "failed"


@pytest.mark.anyio
async def test_run_sync_is_refused_inside_a_running_loop(anyio_backend: str) -> None:
    """Inside a running event loop (asyncio or trio) it is refused before anything runs."""
    log: list[object] = []
    agent = scripted_agent([tool_turn(("c1", "echo", {}))], tools=[echo_tool("echo", log)])
    with pytest.raises(PrismError) as caught:
        agent.run_sync("go")
    assert caught.value.code == "ERR_PRISM_RUN_SYNC_IN_LOOP"
    assert anyio_backend in str(caught.value)
    assert log == []
