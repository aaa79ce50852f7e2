"""The console's run page on a call that needs two approvers and expires: the card shows the
approvals needed and given and the deadline (and offers only a plain approve or deny); the
audit shows each allow, then the receipt of the call that ran; stored text shows its control
characters escaped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from prism_core import (
    RunStateOptions,
    ToolDefinition,
    create_agent,
    provider_done,
    provider_text_delta,
    provider_tool_call,
    resume_agent_run,
    tool_call_content,
)
from prism_server._console_cards import pending_card
from prism_server._console_run import audit_section
from prism_server._views import run_detail
from prism_store_sql import create_sql_checkpoint_store, create_sql_session_store


class _Model:
    id = "mock"

    async def generate(self, request: Any) -> Any:
        if not any(m.role == "assistant" for m in request.messages):
            yield provider_tool_call(tool_call_content("w1", "wire", {"amount": 4000}))
        else:
            yield provider_text_delta("wired")
        yield provider_done()


@pytest.mark.anyio
async def test_the_run_page_shows_approvals_deadlines_and_receipts(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    checkpoints = create_sql_checkpoint_store(url)
    sessions = create_sql_session_store(url)
    try:
        agent = create_agent(
            id="treasury",
            model={"provider": "mock", "model": "demo"},
            provider=_Model(),
            store=sessions,
            tools=[
                ToolDefinition(
                    "wire",
                    lambda args, context: "sent",
                    needs_approval=True,
                    approvers=2,
                    approval_timeout_ms=4 * 3600 * 1000,
                )
            ],
        )
        held = await agent.create_session(id="s1").run(
            "wire", run_state=RunStateOptions(checkpoints, "t1")
        )
        ref = {"run_id": held.run_id, "session_id": "s1"}
        options = {"checkpoints": checkpoints, "definition_revision": "t1"}
        after = await resume_agent_run(
            agent,
            ref,
            {
                "expected_version": held.run_state.version,
                "decision": "approve",
                "actor": "alice\x1b[31m",
                "reason": "fine\n<b>forged</b>",
                "channel": "console",
            },
            **options,
        )
        detail = await run_detail(checkpoints, sessions, held.run_id, None, agent)
        assert detail is not None
        (item,) = detail["pending"]
        assert (item["approvers"], item["approved_by"]) == (2, ["alice\x1b[31m"])
        assert item["expires_at"] - item["pending_since"] == pytest.approx(14400.0)
        card = pending_card(item)
        assert "<dt>Approvals</dt><dd>1 of 2 given (alice\\x1b[31m)" in card
        assert "<dt>Expires</dt><dd><time" in card
        assert 'data-action="approve"' in card
        assert 'data-action="approve_run"' not in card
        assert 'data-action="edit"' not in card
        assert "\x1b" not in card
        table = audit_section(detail)
        assert "fine\\x0a&lt;b&gt;forged&lt;/b&gt;" in table
        assert "via console" in table

        await resume_agent_run(
            agent,
            ref,
            {"expected_version": after.run_state.version, "decision": "approve", "actor": "bob"},
            **options,
        )
        done = await run_detail(checkpoints, sessions, held.run_id, None, agent)
        assert done is not None
        assert [r["outcome"] for r in done["audit"]] == ["allow_once", "allow_once", "executed"]
        table = audit_section(done)
        assert "<strong>ran</strong> <small>(executed)</small>" in table
        assert "via worker" in table
    finally:
        await checkpoints.aclose()
        await sessions.aclose()
