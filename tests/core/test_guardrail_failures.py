"""A guard that raises fails closed and keeps its exception: cause, metadata and a log."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from prism_core import (
    AgentRunError,
    Guardrail,
    GuardrailRunError,
    create_secret_redactor,
)
from prism_core.codec import dumps, structure, unstructure
from prism_core.guardrails import GuardrailContext, GuardrailRecord, evaluate_guardrails
from prism_core.guardrails._engine import MAX_GUARDRAIL_ERROR_CHARS

from .helpers import echo_tool, scripted_agent, text_turn, tool_turn

SECRET = "pw-123456-secret"


class LookupDown(RuntimeError):
    """The policy service a guard asks is unreachable."""


def broken(stage: str) -> Guardrail:
    """A guard whose evaluation raises with a secret in its message."""

    def evaluate(context: GuardrailContext) -> Any:
        raise LookupDown(f"policy service refused password {SECRET}")

    return Guardrail("policy", stage, evaluate)  # type: ignore[arg-type]


def causes(error: BaseException) -> list[BaseException]:
    """The ``__cause__`` chain below ``error``."""
    chain = []
    while error.__cause__ is not None:
        error = error.__cause__
        chain.append(error)
    return chain


@pytest.mark.anyio
async def test_the_record_keeps_type_message_and_exception() -> None:
    """The tripwire record names the exception type and its redacted, bounded message."""
    records = await evaluate_guardrails(
        [broken("input")],
        GuardrailContext(stage="input", value="hi", session_id="s", run_id="r"),
        redactor=create_secret_redactor([SECRET]),
    )
    (record,) = records
    assert (record.action, record.reason) == ("tripwire", "guardrail_failed")
    assert record.metadata == {
        "error_type": "LookupDown",
        "error": "policy service refused password [REDACTED]",
    }
    assert isinstance(record.exception, LookupDown)


@pytest.mark.anyio
async def test_a_long_message_is_bounded() -> None:
    """The kept message never exceeds the bound."""

    def evaluate(context: GuardrailContext) -> Any:
        raise ValueError("x" * 5000)

    (record,) = await evaluate_guardrails(
        [Guardrail("g", "input", evaluate)],
        GuardrailContext(stage="input", value="hi", session_id="s", run_id="r"),
    )
    assert record.metadata is not None
    assert len(record.metadata["error"]) == MAX_GUARDRAIL_ERROR_CHARS


def test_the_exception_never_reaches_json() -> None:
    """Events, stores and checkpoints see the record without its exception."""
    record = GuardrailRecord(
        "g", "input", "tripwire", "guardrail_failed", {"error_type": "E"}, exception=KeyError("k")
    )
    data = unstructure(record)
    assert "exception" not in data
    assert b"exception" not in dumps(record)
    assert structure(data, GuardrailRecord) == record


@pytest.mark.anyio
async def test_an_input_guard_that_raises_fails_the_run_with_its_cause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The run fails closed; the raised error chains to the guard's exception; a warning is
    logged without the secret."""
    agent = scripted_agent(
        [text_turn("never")],
        guardrails={"input": [broken("input")]},
        redactor=create_secret_redactor([SECRET]),
    )
    session = agent.create_session()
    sub = session.subscribe()
    with (
        caplog.at_level(logging.DEBUG, logger="prism_core"),
        pytest.raises(GuardrailRunError) as info,
    ):
        await session.run("hello")
    events = [e async for e in sub]
    assert any(isinstance(c, LookupDown) for c in causes(info.value))
    decision = next(e for e in events if e.type == "guardrail_decision")
    assert decision.record.metadata == {
        "error_type": "LookupDown",
        "error": "policy service refused password [REDACTED]",
    }
    warnings = [r for r in caplog.records if r.name == "prism_core.guardrails"]
    assert [r.levelno for r in warnings] == [logging.WARNING]
    assert "LookupDown" in warnings[0].getMessage()
    assert all(SECRET not in r.getMessage() for r in caplog.records)


@pytest.mark.anyio
async def test_a_tool_input_guard_that_raises_keeps_its_cause() -> None:
    """At the tool stage too: the tool never runs and the error chains to the exception."""
    log: list[Any] = []
    agent = scripted_agent(
        [tool_turn(("c1", "echo", {"n": 1})), text_turn("never")],
        tools=[echo_tool(log=log)],
        guardrails={"tool_input": [broken("tool_input")]},
    )
    with pytest.raises(AgentRunError) as info:
        await agent.create_session().run("go")
    assert log == []
    assert info.value.result.status == "failed"
    assert any(isinstance(c, LookupDown) for c in causes(info.value))


def raising_pack() -> dict[str, Any]:
    """An inline pack whose ``deny`` predicate raises, quoting a secret it was given."""

    def deny(args: dict[str, Any], context: Any) -> bool:
        raise LookupDown(f"inventory refused token {args.get('token')}")

    return {
        "id": "house",
        "version": 1,
        "rules": [{"id": "no-root", "tool": "echo", "deny": deny, "reason": "never the root"}],
    }


@pytest.mark.anyio
@pytest.mark.parametrize("durable", [False, True], ids=["live", "durable"])
async def test_a_pack_whose_deny_predicate_raises_fails_the_run_closed(
    durable: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The tool never runs; the run fails with ``ERR_PRISM_GUARDRAIL_BLOCKED`` chained to the
    predicate's exception; the decision record names the exception type and its redacted
    text; one warning names the pack rule and the type, never the secret."""
    from .durable_support import World

    log: list[Any] = []
    world = World()
    config: dict[str, Any] = {
        "tools": [echo_tool(log=log)],
        "redactor": create_secret_redactor([SECRET]),
    }
    turns = [tool_turn(("c1", "echo", {"path": "/", "token": SECRET})), text_turn("never")]
    agent = world.agent(turns, **config)
    session = agent.create_session(id="s1", guardrail_packs=[raising_pack()])
    sub = session.subscribe()
    options: dict[str, Any] = (
        {"run_state": world.run_state(checkpoint_policy="every-turn")} if durable else {}
    )
    with (
        caplog.at_level(logging.DEBUG, logger="prism_core"),
        pytest.raises(GuardrailRunError) as info,
    ):
        await session.run("clean up", **options)
    events = [e async for e in sub]
    assert log == []
    assert info.value.code == "ERR_PRISM_GUARDRAIL_BLOCKED"
    assert info.value.result.status == "failed"
    chain = causes(info.value)
    assert any(isinstance(c, LookupDown) for c in chain)
    (decision,) = [e for e in events if e.type == "guardrail_decision"]
    record = decision.record
    assert (record.guardrail, record.action, record.reason) == (
        "pack:house/no-root",
        "tripwire",
        "guardrail_failed",
    )
    assert record.metadata == {
        "error_type": "LookupDown",
        "error": "inventory refused token [REDACTED]",
    }
    warnings = [r for r in caplog.records if r.name == "prism_core.guardrails"]
    assert [r.levelno for r in warnings] == [logging.WARNING]
    assert "pack:house/no-root" in warnings[0].getMessage()
    assert "LookupDown" in warnings[0].getMessage()
    assert all(SECRET not in f"{r.getMessage()} {r.__dict__!r}" for r in caplog.records)
    if durable:
        stored = await world.checkpoints.inner.load("prism.agent-run", info.value.result.run_id)
        assert stored is not None
        assert stored.value["status"] == "failed"
        assert SECRET not in dumps(stored.value).decode()
