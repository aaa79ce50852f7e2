"""Guardrails at the four stages: decisions, ordering, failures, caps and events."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from prism_core import (
    AgentRunError,
    Guardrail,
    GuardrailDecision,
    GuardrailError,
    InvalidOptionsError,
    create_secret_redactor,
)

from .helpers import echo_tool, scripted_agent, text_turn, tool_turn, types


def guard(name: str, stage: str, action: str, reason: str | None = None, **kw: Any) -> Guardrail:
    """A guard that always decides ``action``."""
    return Guardrail(
        name,
        stage,
        lambda ctx: {"action": action, "reason": reason} if reason else GuardrailDecision(action),
        **kw,
    )  # type: ignore[arg-type]


async def run_collect(agent: Any, *args: Any, **kw: Any) -> tuple[Any, list[Any]]:
    """Run once; return (result or error, events)."""
    session = agent.create_session()
    sub = session.subscribe()
    try:
        outcome: Any = await session.run(*args, **kw)
    except AgentRunError as exc:
        outcome = exc
    return outcome, [e async for e in sub]


@pytest.mark.anyio
async def test_input_block_rejects_before_append_and_provider() -> None:
    """An input block raises GuardrailError (code BLOCKED) with nothing stored or requested."""
    agent = scripted_agent(
        [text_turn("hi")], guardrails={"input": [guard("no-pii", "input", "block", "pii")]}
    )
    session = agent.create_session()
    sub = session.subscribe()
    with pytest.raises(GuardrailError) as info:
        await session.run("my ssn is 1")
    assert info.value.code == "ERR_PRISM_GUARDRAIL_BLOCKED"
    assert isinstance(info.value, AgentRunError)
    assert info.value.record.guardrail == "no-pii"
    events = [e async for e in sub]
    assert types(events) == ["agent_started", "guardrail_decision", "error"]
    assert await session.entries() == []
    assert agent.provider.requests == []  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_output_block_never_emits_or_stores_the_content() -> None:
    """Output is buffered: a blocked turn emits no message events and stores no assistant text."""
    agent = scripted_agent(
        [text_turn("secret plan")], guardrails={"output": [guard("no-plans", "output", "block")]}
    )
    outcome, events = await run_collect(agent, "tell me")
    assert isinstance(outcome, GuardrailError)
    assert "message_delta" not in types(events)
    assert "message_started" not in types(events)
    assert "secret plan" not in repr(events)


@pytest.mark.anyio
async def test_output_allow_releases_buffered_events_after_the_decision() -> None:
    """Allowed output: the decision event precedes the released message events."""
    agent = scripted_agent(
        [text_turn("fine")], guardrails={"output": [guard("ok", "output", "allow")]}
    )
    outcome, events = await run_collect(agent, "x")
    assert outcome.text == "fine"
    kinds = types(events)
    assert kinds.index("guardrail_decision") < kinds.index("message_started")
    assert kinds.index("message_delta") < kinds.index("message_finished")


@pytest.mark.anyio
async def test_tool_input_block_returns_blocked_result_and_run_continues() -> None:
    """A tool_input block never runs the tool; the provider sees the blocked result."""
    log: list[Any] = []
    agent = scripted_agent(
        [tool_turn(("c1", "echo", {})), text_turn("ok")],
        tools=[echo_tool(log=log)],
        guardrails={"tool_input": [guard("no-echo", "tool_input", "block")]},
    )
    outcome, events = await run_collect(agent, "x")
    assert outcome.status == "succeeded"
    assert log == []
    blocked = next(e for e in events if e.type == "tool_execution_blocked")
    assert (blocked.reason, blocked.error.message) == (
        "guardrail_blocked",
        "Tool call blocked by guardrail",
    )
    second = agent.provider.requests[1].messages  # type: ignore[union-attr]
    assert second[-1].content[0].error.message == "Tool call blocked by guardrail"


@pytest.mark.anyio
async def test_tool_output_block_replaces_the_result_after_the_side_effect() -> None:
    """tool_output runs after the side effect; a block replaces what the provider sees."""
    log: list[Any] = []
    agent = scripted_agent(
        [tool_turn(("c1", "echo", {"pw": "x"})), text_turn("ok")],
        tools=[echo_tool(log=log)],
        guardrails={"tool_output": [guard("redact", "tool_output", "block")]},
    )
    outcome, events = await run_collect(agent, "x")
    assert log == [("echo", {"pw": "x"})]
    finished = next(e for e in events if e.type == "tool_execution_finished")
    assert finished.result.error.message == "Tool result blocked by guardrail"
    assert finished.result.value is None
    assert outcome.status == "succeeded"


@pytest.mark.anyio
@pytest.mark.parametrize("stage", ["input", "output", "tool_input", "tool_output"])
async def test_tripwire_rejects_the_run_at_any_stage(stage: str) -> None:
    """tripwire fails the run wherever it fires."""
    agent = scripted_agent(
        [tool_turn(("c1", "echo", {})), text_turn("ok")],
        tools=[echo_tool()],
        guardrails={stage: [guard("wire", stage, "tripwire", "nope")]},
    )
    outcome, _ = await run_collect(agent, "x")
    assert isinstance(outcome, AgentRunError)
    assert outcome.result.status == "failed"
    assert "wire" in str(outcome)


@pytest.mark.anyio
@pytest.mark.parametrize("stage", ["input", "output", "tool_input", "tool_output"])
async def test_interrupt_outside_a_durable_run_is_unavailable(stage: str) -> None:
    """interrupt fails with INTERRUPT_UNAVAILABLE naming the stage (no durable state here)."""
    agent = scripted_agent(
        [tool_turn(("c1", "echo", {})), text_turn("ok")],
        tools=[echo_tool()],
        guardrails={stage: [guard("ask", stage, "interrupt")]},
    )
    outcome, _ = await run_collect(agent, "x")
    assert isinstance(outcome, AgentRunError)
    assert outcome.code == "ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE"
    assert stage in str(outcome)


@pytest.mark.anyio
async def test_declaration_order_and_short_circuit() -> None:
    """Guards run in order; evaluation stops at the first non-allow; one event per guard."""
    calls: list[str] = []

    def make(name: str, action: str) -> Guardrail:
        def evaluate(ctx: Any) -> Any:
            calls.append(name)
            return {"action": action}

        return Guardrail(name, "input", evaluate)

    agent = scripted_agent(
        [text_turn("x")],
        guardrails={"input": [make("a", "allow"), make("b", "block"), make("c", "allow")]},
    )
    outcome, events = await run_collect(agent, "x")
    assert calls == ["a", "b"]
    assert [e.record.guardrail for e in events if e.type == "guardrail_decision"] == ["a", "b"]
    assert isinstance(outcome, GuardrailError)


@pytest.mark.anyio
async def test_concurrent_evaluation_keeps_declaration_order() -> None:
    """With max_concurrency > 1 every guard runs, records stay in declaration order."""

    async def slow(ctx: Any) -> Any:
        await anyio.sleep(0.02)
        return {"action": "allow"}

    async def fast(ctx: Any) -> Any:
        return {"action": "block", "reason": "fast"}

    agent = scripted_agent(
        [text_turn("x")],
        guardrails={
            "input": [Guardrail("slow", "input", slow), Guardrail("fast", "input", fast)],
            "max_concurrency": 2,
        },
    )
    outcome, events = await run_collect(agent, "x")
    records = [e.record for e in events if e.type == "guardrail_decision"]
    assert [(r.guardrail, r.action) for r in records] == [("slow", "allow"), ("fast", "block")]
    assert isinstance(outcome, GuardrailError)
    with pytest.raises(ValueError, match="max_concurrency"):
        scripted_agent([], guardrails={"input": [], "max_concurrency": 17})


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("evaluate", "reason"),
    [
        (lambda ctx: 1 / 0, "guardrail_failed"),
        (lambda ctx: "allow", "guardrail_invalid_decision"),
        (lambda ctx: {"action": "maybe"}, "guardrail_invalid_decision"),
        (lambda ctx: {"action": "allow", "extra": 1}, "guardrail_invalid_decision"),
        (lambda ctx: {"action": "block", "reason": "x" * 4097}, "guardrail_invalid_decision"),
        (
            lambda ctx: {"action": "allow", "metadata": {"k": "v" * 16400}},
            "guardrail_invalid_decision",
        ),
        (lambda ctx: {"action": "allow", "metadata": {"k": {1, 2}}}, "guardrail_invalid_decision"),
    ],
)
async def test_broken_guards_become_tripwires(evaluate: Any, reason: str) -> None:
    """A guard that raises or answers malformed (or oversized) becomes a tripwire."""
    agent = scripted_agent(
        [text_turn("x")], guardrails={"input": [Guardrail("g", "input", evaluate)]}
    )
    outcome, events = await run_collect(agent, "x")
    record = next(e.record for e in events if e.type == "guardrail_decision")
    assert (record.action, record.reason) == ("tripwire", reason)
    assert isinstance(outcome, AgentRunError)


@pytest.mark.anyio
async def test_reasons_and_metadata_are_redacted() -> None:
    """Guardrail records pass through the redactor before events see them."""
    agent = scripted_agent(
        [text_turn("x")],
        redactor=create_secret_redactor(["tok-1"]),
        guardrails={
            "input": [
                Guardrail(
                    "g",
                    "input",
                    lambda ctx: {
                        "action": "allow",
                        "reason": "saw tok-1",
                        "metadata": {"k": "tok-1"},
                    },
                )
            ]
        },
    )
    _, events = await run_collect(agent, "x")
    record = next(e.record for e in events if e.type == "guardrail_decision")
    assert record.reason == "saw [REDACTED]"
    assert record.metadata == {"k": "[REDACTED]"}


@pytest.mark.anyio
async def test_run_guardrails_append_to_agent_guardrails() -> None:
    """Per-run guardrails add to the agent's; malformed config fails before provider work."""
    seen: list[str] = []
    agent_guard = Guardrail(
        "agent", "input", lambda ctx: seen.append("agent") or {"action": "allow"}
    )
    run_guard = Guardrail("run", "input", lambda ctx: seen.append("run") or {"action": "allow"})
    agent = scripted_agent([text_turn("x")], guardrails=[agent_guard])
    await agent.create_session().run("x", guardrails=[run_guard])
    assert seen == ["agent", "run"]
    with pytest.raises(InvalidOptionsError):
        await agent.create_session().run("x", guardrails={"input": [guard("o", "output", "allow")]})
    with pytest.raises(ValueError, match="stage"):
        Guardrail("bad", "somewhere", lambda ctx: None)  # type: ignore[arg-type]
