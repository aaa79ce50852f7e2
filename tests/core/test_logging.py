"""Log records: checkpoint writes, session commits, refused resumes and provider retries carry
what an operator needs (ids, versions, sizes, codes) and never a secret or a raw argument."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from prism_core import (
    AgentRunStateError,
    ErrorInfo,
    ToolDefinition,
    create_agent,
    create_mock_provider,
    provider_done,
    provider_error,
    provider_text_delta,
    resume_agent_run,
)

from .durable_support import World
from .helpers import MODEL, text_turn, tool_turn

SECRET = "hunter2-Zq81-do-not-log"


def everything(records: list[logging.LogRecord]) -> str:
    """Every record's message and attributes as one text, to search for leaks."""
    return "\n".join(f"{r.getMessage()} {r.__dict__!r}" for r in records)


def from_prism(records: list[logging.LogRecord]) -> list[logging.LogRecord]:
    """The records of Prism's own loggers."""
    return [r for r in records if r.name.split(".")[0].startswith("prism")]


@pytest.mark.anyio
async def test_checkpoint_writes_and_session_commits_are_logged_without_arguments(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A durable run logs each checkpoint write (run, version, bytes, duration) and each
    session commit at debug level; the tool's secret argument appears in none of them."""
    caplog.set_level(logging.DEBUG, logger="prism_core")
    world = World()
    seen: list[Any] = []

    def login(args: dict[str, Any], context: Any) -> str:
        seen.append(args["password"])
        return "ok"

    agent = world.agent(
        [tool_turn(("c1", "login", {"password": SECRET})), text_turn("in")],
        tools=[ToolDefinition("login", login)],
    )
    result = await agent.create_session(id="s1").run(
        "log in", run_state=world.run_state(checkpoint_policy="every-turn")
    )
    assert result.status == "succeeded"
    assert seen == [SECRET]
    records = from_prism(caplog.records)
    writes = [r for r in records if hasattr(r, "prism_bytes")]
    assert writes, "no checkpoint write was logged"
    assert {r.name for r in writes} == {"prism_core.durable"}
    assert all(r.levelno == logging.DEBUG for r in writes)
    assert all(r.prism_run_id == result.run_id for r in writes)  # type: ignore[attr-defined]
    versions = [r.prism_version for r in writes]  # type: ignore[attr-defined]
    assert versions == sorted(versions)
    assert versions[-1] == result.run_state.version
    assert all(getattr(r, "prism_bytes") > 0 for r in writes)  # noqa: B009
    assert all(getattr(r, "prism_duration_ms") >= 0 for r in writes)  # noqa: B009
    commits = [r for r in records if hasattr(r, "prism_entry_id") or hasattr(r, "prism_entries")]
    assert commits, "no session commit was logged"
    assert all(r.levelno == logging.DEBUG for r in commits)
    assert SECRET not in everything(caplog.records)


@pytest.mark.anyio
async def test_a_refused_resume_logs_its_code_and_never_the_decision(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A stale resume is refused with a warning naming the run and the error code; the
    arguments the caller sent along appear nowhere."""
    world = World()
    agent = world.agent(
        [tool_turn(("c1", "login", {"password": SECRET})), text_turn("in")],
        tools=[ToolDefinition("login", lambda args, context: "ok")],
    )
    result = await agent.create_session(id="s1").run(
        "log in", run_state=world.run_state(interrupt_before_tool=True)
    )
    assert result.status == "suspended"
    caplog.set_level(logging.DEBUG, logger="prism_core")
    decision = {
        "approval_id": result.interruption.pending_decisions[0].approval_id,
        "outcome": "allow_once",
        "modified_arguments": {"password": SECRET},
    }
    with pytest.raises(AgentRunStateError) as info:
        await resume_agent_run(
            agent,
            {"run_id": result.run_id, "session_id": "s1"},
            {"expected_version": 99, "decisions": [decision]},
            **world.resume_options(),
        )
    refusals = [r for r in from_prism(caplog.records) if r.levelno == logging.WARNING]
    assert [r.prism_error_code for r in refusals] == [info.value.code]  # type: ignore[attr-defined]
    assert refusals[0].prism_run_id == result.run_id  # type: ignore[attr-defined]
    assert info.value.code in refusals[0].getMessage()
    assert SECRET not in everything(caplog.records)


@pytest.mark.anyio
async def test_a_malformed_resume_is_logged_before_any_store_access(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Input refused before the store is reached is logged too, by code only."""
    world = World()
    agent = world.agent([text_turn("x")])
    caplog.set_level(logging.WARNING, logger="prism_core")
    with pytest.raises(Exception) as info:
        await resume_agent_run(
            agent,
            {"run_id": "r1", "session_id": "s1"},
            {"expected_version": 1, "decision": {"action": SECRET}},
            **world.resume_options(),
        )
    code = getattr(info.value, "code", None)
    assert code is not None
    assert [r.prism_error_code for r in from_prism(caplog.records)] == [code]  # type: ignore[attr-defined]
    assert world.checkpoints.calls == 0
    assert SECRET not in everything(caplog.records)


@pytest.mark.anyio
async def test_provider_retries_log_attempt_delay_and_code_but_not_the_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each retry is an info record with the attempt, the delay and the error code; the
    provider's error text (which may quote a key) stays out of the log."""
    caplog.set_level(logging.DEBUG, logger="prism_core")
    error = ErrorInfo(f"bad key {SECRET}", code="provider_overloaded", retryable=True)
    provider = create_mock_provider(
        turns=[
            [provider_error(error)],
            [provider_error(error)],
            [provider_text_delta("fine"), provider_done()],
        ]
    )
    agent = create_agent(
        model=MODEL, provider=provider, retry={"max_attempts": 3, "base_delay_ms": 1}
    )
    result = await agent.create_session().run("hi")
    assert result.text == "fine"
    retries = [r for r in from_prism(caplog.records) if hasattr(r, "prism_attempt")]
    assert [(r.prism_attempt, r.prism_error_code) for r in retries] == [  # type: ignore[attr-defined]
        (1, "provider_overloaded"),
        (2, "provider_overloaded"),
    ]
    assert all(r.levelno == logging.INFO and r.prism_delay_ms >= 0 for r in retries)  # type: ignore[attr-defined]
    assert SECRET not in everything(caplog.records)
