"""Typed output across a restart, on SQLite: the output rides the terminal checkpoint, so a
fresh store on the same file returns it; a run suspended before the restart resumes to its
output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from prism_core import (
    RunStateOptions,
    ToolDefinition,
    create_agent,
    load_agent_run_state,
    resume_agent_run,
)
from prism_store_sql import open_sql_stores
from tests.core.durable_support import by_history
from tests.core.helpers import MODEL, text_turn, tool_turn

REVISION = "typed-1"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@attrs.frozen
class Verdict:
    """Whether a claim holds, and why."""

    holds: bool
    because: str


ANSWER = '{"holds": true, "because": "the ledger balances"}'


def agent_on(sessions: Any, log: list[Any]) -> Any:
    def audit(args: dict[str, Any], context: Any) -> str:
        log.append(args)
        return "balanced"

    return create_agent(
        id="auditor",
        model=MODEL,
        store=sessions,
        provider=by_history([tool_turn(("c1", "audit", {"book": "2026"})), text_turn(ANSWER)]),
        tools=[ToolDefinition("audit", audit)],
        output_type=Verdict,
    )


@pytest.mark.anyio
async def test_the_output_is_read_back_after_a_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    log: list[Any] = []
    async with open_sql_stores(url) as (checkpoints, sessions):
        every_turn = RunStateOptions(checkpoints, REVISION, checkpoint_policy="every-turn")
        session = agent_on(sessions, log).create_session(id="s1")
        result = await session.run("does the claim hold?", run_state=every_turn)
    assert result.output == Verdict(True, "the ledger balances")
    async with open_sql_stores(url) as (checkpoints, _sessions):
        status = await load_agent_run_state(checkpoints, {"run_id": result.run_id})
    assert status is not None
    assert status.state.status == "succeeded"
    assert status.state.output == {"holds": True, "because": "the ledger balances"}


@pytest.mark.anyio
async def test_a_suspended_run_resumes_to_its_output_after_a_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    log: list[Any] = []
    async with open_sql_stores(url) as (checkpoints, sessions):
        suspended = (
            await agent_on(sessions, log)
            .create_session(id="s1")
            .run(
                "does the claim hold?",
                run_state=RunStateOptions(checkpoints, REVISION, interrupt_before_tool=True),
            )
        )
    assert suspended.status == "suspended"
    async with open_sql_stores(url) as (checkpoints, sessions):
        resumed = await resume_agent_run(
            agent_on(sessions, log),
            {"run_id": suspended.run_id, "session_id": "s1"},
            {"expected_version": suspended.run_state.version, "decision": "approve"},
            checkpoints=checkpoints,
            definition_revision=REVISION,
        )
        status = await load_agent_run_state(checkpoints, {"run_id": suspended.run_id})
    assert resumed.output == Verdict(True, "the ledger balances")
    assert log == [{"book": "2026"}]
    assert status is not None
    assert status.state.output == {"holds": True, "because": "the ledger balances"}
