"""The tasks cannot hand over a run's own guardrails (callables), so resuming or continuing a
run that recorded some is refused, writing nothing; the bodies run in-process here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from prism_celery._config import make_settings
from prism_celery._runs import continue_run, resume_run
from prism_celery._stores import TaskStores
from prism_core import (
    AGENT_RUN_NAMESPACE,
    AgentRunStateError,
    Guardrail,
    RunStateOptions,
    create_agent,
    open_checkpoint_store,
    open_session_store,
)
from prism_store_sql import plugin as sql_plugin
from tests.core.durable_support import by_history
from tests.core.helpers import echo_tool, text_turn, tool_turn

REVISION = "guarded-1"
GUARD = Guardrail("no-root", "tool_input", lambda ctx: {"action": "allow"})


def build(log: list[Any]) -> Any:
    return create_agent(
        id="guarded",
        model={"provider": "mock", "model": "demo"},
        provider=by_history([tool_turn(("c1", "echo", {"x": 1})), text_turn("done")]),
        tools=[echo_tool(log=log)],
    )


@pytest.mark.parametrize("how", ["resume", "continue"])
def test_a_run_with_guardrails_of_its_own_is_refused(tmp_path: Path, how: str) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    log: list[Any] = []
    settings = make_settings(
        resolve_agent=lambda agent_id: (build(log), REVISION),
        store_url=url,
        lease_ms=30000,
        sessions_url=None,
    )

    async def main() -> None:
        checkpoints = open_checkpoint_store(url, plugins=[sql_plugin])
        sessions = open_session_store(url, plugins=[sql_plugin])
        try:
            agent = build(log)
            agent.store = sessions
            options: dict[str, Any] = (
                {"interrupt_before_tool": True}
                if how == "resume"
                else {"checkpoint_policy": "every-turn"}
            )
            result = await agent.create_session(id="s1").run(
                "go",
                run_state=RunStateOptions(checkpoints, REVISION, **options),
                guardrails={"tool_input": [GUARD]},
            )
            record = await checkpoints.load(AGENT_RUN_NAMESPACE, result.run_id)
            assert record is not None
            if how == "continue":
                # Stands in for a worker that died mid-run: the record says running.
                value = {**record.value, "status": "running"}
                record = await checkpoints.save(
                    AGENT_RUN_NAMESPACE,
                    result.run_id,
                    value,
                    version=record.version + 1,
                    expected_version=record.version,
                )
            log.clear()
            stores = TaskStores(checkpoints=checkpoints, sessions=sessions)
            resume = {"expected_version": record.version, "decision": "approve"}

            async def attempt() -> Any:
                if how == "resume":
                    return await resume_run(settings, stores, result.run_id, resume)
                return await continue_run(settings, stores, result.run_id)

            with pytest.raises(AgentRunStateError) as info:
                await attempt()
            assert info.value.code == "ERR_PRISM_RUN_GUARDRAILS"
            after = await checkpoints.load(AGENT_RUN_NAMESPACE, result.run_id)
            assert after is not None
            assert after.version == record.version
            assert log == []
        finally:
            await checkpoints.aclose()
            await sessions.aclose()

    anyio.run(main)
