"""The attention compiler: configuration, per-turn stubs in the provider input only, the
attention_compiled event, and the sticky frontier (per session, and riding the checkpoint
under persist_session_state)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentConfigError,
    Guardrail,
    InvalidOptionsError,
    ToolDefinition,
    provider_done,
    provider_thinking_delta,
    provider_tool_call,
    resume_agent_run,
    tool_call_content,
)

from ..durable_support import World
from ..helpers import scripted_agent, text_turn, tool_turn

pytestmark = pytest.mark.anyio

#: 4000-byte results; a cap of 3000 tokens at ratio 0.5 triggers above ~6000 bytes of input.
COMPILER = {"max_input_tokens": 3000, "trigger_ratio": 0.5, "keep_last": 1}
THREE_ROUNDS = [
    tool_turn(("c1", "fetch", {"page": 1})),
    tool_turn(("c2", "fetch", {"page": 2})),
    tool_turn(("c3", "fetch", {"page": 3})),
    text_turn("done"),
]


def fetch_tool(size: int = 4000) -> ToolDefinition:
    return ToolDefinition("fetch", lambda args, ctx: {"page": args["page"], "body": "x" * size})


def stubbed(request: Any) -> list[str]:
    """The call ids whose results reach the provider as stubs."""
    return [
        block.tool_call_id
        for message in request.messages
        if message.role == "tool"
        for block in message.content
        if isinstance(block.value, str) and "omitted" in block.value
    ]


def test_the_compiler_is_configured_on_the_agent_and_refused_when_malformed() -> None:
    """True needs a cap (the agent's context_window); unknown keys, a ratio outside (0, 1)
    and a negative keep_last are refused at configuration."""
    with pytest.raises(AgentConfigError, match="context_window"):
        scripted_agent([text_turn("x")], attention_compiler=True)
    on = scripted_agent([text_turn("x")], attention_compiler=True, context_window=8000)
    assert on.attention_compiler.max_input_tokens == 8000
    for bad in ({"trigger_ratio": 1.5}, {"keep_last": -1}, {"budget": 3}):
        with pytest.raises(AgentConfigError):
            scripted_agent([text_turn("x")], attention_compiler={"max_input_tokens": 10, **bad})


async def test_a_run_may_turn_it_off_or_relax_it_but_never_tighten_or_enable_it() -> None:
    """Per run: False turns it off; a higher trigger_ratio relaxes it; a lower one, or any
    mapping where the agent has none, is refused before any request."""
    agent = scripted_agent(THREE_ROUNDS, tools=[fetch_tool()], attention_compiler=COMPILER)
    with pytest.raises(InvalidOptionsError, match="tighten"):
        await agent.create_session().run("go", attention_compiler={"trigger_ratio": 0.25})
    without = scripted_agent([text_turn("x")])
    with pytest.raises(InvalidOptionsError, match="the agent has none"):
        await without.create_session().run("go", attention_compiler={"trigger_ratio": 0.9})
    assert agent.provider.requests == []  # type: ignore[union-attr]
    events = [e async for e in agent.create_session().stream("go", attention_compiler=False)]
    assert "attention_compiled" not in [e.type for e in events]
    assert all(stubbed(r) == [] for r in agent.provider.requests)  # type: ignore[union-attr]


async def test_old_results_are_stubbed_in_the_request_only_and_reported() -> None:
    """Once the estimated input exceeds trigger_ratio x cap, results outside the newest
    keep_last are stubbed in the provider input; attention_compiled reports used (after) and
    cap; the stored transcript keeps every result whole."""
    agent = scripted_agent(THREE_ROUNDS, tools=[fetch_tool()], attention_compiler=COMPILER)
    session = agent.create_session()
    events = [e async for e in session.stream("go")]
    compiled = [e for e in events if e.type == "attention_compiled"]
    assert compiled
    for event in compiled:
        assert event.cap == 3000
        assert event.used <= 0.5 * 3000 < event.used_before
        assert event.stubbed_tool_results >= 1
    requests = agent.provider.requests  # type: ignore[union-attr]
    assert stubbed(requests[-1]) == ["c1", "c2"]
    stored = [
        block.value
        for entry in await session.entries()
        if entry.message is not None and entry.message.role == "tool"
        for block in entry.message.content
    ]
    assert all(isinstance(value, dict) and len(value["body"]) == 4000 for value in stored)


async def test_a_stub_stays_applied_on_later_runs_even_under_a_relaxed_ratio() -> None:
    """The session keeps one sticky frontier: a result stubbed once is stubbed again in a
    later run on the same session whose relaxed ratio does not trigger at all."""
    script = [*THREE_ROUNDS, text_turn("again")]
    # 2000-byte results: three of them cross 0.5 x 3000 tokens, never 0.9 x 3000.
    agent = scripted_agent(script, tools=[fetch_tool(2000)], attention_compiler=COMPILER)
    session = agent.create_session()
    first = [e async for e in session.stream("go")]
    assert [e.type for e in first].count("attention_compiled") >= 1
    assert stubbed(agent.provider.requests[-1]) == ["c1"]  # type: ignore[union-attr]
    relaxed = {"trigger_ratio": 0.9}
    events = [e async for e in session.stream("more", attention_compiler=relaxed)]
    assert "attention_compiled" not in [e.type for e in events]
    assert stubbed(agent.provider.requests[-1]) == ["c1"]  # type: ignore[union-attr]
    fresh = scripted_agent(script, tools=[fetch_tool(2000)], attention_compiler=COMPILER)
    await fresh.create_session().run("go", attention_compiler=relaxed)
    assert stubbed(fresh.provider.requests[-1]) == []  # type: ignore[union-attr]


async def test_the_frontier_rides_the_checkpoint_with_persist_session_state() -> None:
    """With persist_session_state the checkpoint carries session_state.attention_sticky
    (tool_call_ids, 32-hex thinking_keys); a resume restores it, so the resumed run's first
    request keeps the stubs; without persist_session_state the checkpoint carries none."""
    world = World()

    def thinking_turn(call_id: str, page: int) -> list[Any]:
        return [
            provider_thinking_delta(f"weighing page {page} " * 50, signature=f"sig{page}"),
            provider_tool_call(tool_call_content(call_id, "fetch", {"page": page})),
            provider_done(),
        ]

    script: list[Any] = [
        thinking_turn("c1", 1),
        thinking_turn("c2", 2),
        tool_turn(("c3", "fetch", {"page": 3})),
        tool_turn(("c4", "publish", {})),
        text_turn("done"),
    ]
    publish = ToolDefinition("publish", lambda args, ctx: "published")
    # Only publishing waits for a human; the fetches run and fill the context.
    gate = Guardrail(
        "publish-gate",
        "tool_input",
        lambda ctx: {"action": "interrupt" if ctx.tool_name == "publish" else "allow"},
    )
    options: dict[str, Any] = {
        "tools": [fetch_tool(), publish],
        "attention_compiler": COMPILER,
        "guardrails": {"tool_input": [gate]},
    }
    agent = world.agent(script, **options)
    result = await agent.create_session(id="s1").run(
        "go", run_state=world.run_state(persist_session_state=True)
    )
    assert result.status == "suspended"
    record = await world.checkpoints.inner.load(AGENT_RUN_NAMESPACE, result.run_id)
    assert record is not None
    sticky = record.value["session_state"]["attention_sticky"]
    assert sticky["tool_call_ids"][:2] == ["c1", "c2"]
    # The older thinking turn was stripped: one key, 32 hex, no text.
    assert len(sticky["thinking_keys"]) == 1
    assert re.fullmatch(r"[0-9a-f]{32}", sticky["thinking_keys"][0])

    # The resuming agent's compiler would not trigger on this input at all: what the first
    # resumed request stubs and strips comes from the restored frontier.
    relaxed = {**options, "attention_compiler": {"max_input_tokens": 100_000, "keep_last": 1}}
    resumed_agent = world.agent(script, **relaxed)
    done = await resume_agent_run(
        resumed_agent,
        {"run_id": result.run_id, "session_id": "s1"},
        {"expected_version": result.run_state.version, "decision": "approve"},
        **world.resume_options(),
    )
    assert done.status == "succeeded"
    first = resumed_agent.provider.requests[0]  # type: ignore[union-attr]
    assert stubbed(first)[:2] == ["c1", "c2"]
    with_thinking = [m for m in first.messages if any(b.type == "thinking" for b in m.content)]
    assert len(with_thinking) == 1

    plain = World()
    bare = plain.agent(script, **options)
    suspended = await bare.create_session(id="s1").run("go", run_state=plain.run_state())
    assert suspended.status == "suspended"
    record = await plain.checkpoints.inner.load(AGENT_RUN_NAMESPACE, suspended.run_id)
    assert record is not None
    assert "attention_sticky" not in (record.value.get("session_state") or {})
