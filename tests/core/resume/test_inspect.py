"""``inspect_agent_run``: a run's waiting and in-doubt calls, with their arguments and keys."""

from __future__ import annotations

import pytest

from prism_core import (
    RunStateOptions,
    create_memory_checkpoint_store,
    create_memory_session_store,
    create_secret_redactor,
    inspect_agent_run,
)
from prism_core.tools import idempotency_key
from tests.core.helpers import echo_tool, scripted_agent, text_turn, tool_turn


@pytest.mark.anyio
async def test_pending_calls_come_with_their_arguments_and_keys() -> None:
    """Each pending decision names its tool, the stored arguments (with the host's redactor
    applied on top) and the call's idempotency key; another owner reads nothing."""
    checkpoints, sessions = create_memory_checkpoint_store(), create_memory_session_store()
    agent = scripted_agent(
        [tool_turn(("c1", "refund", {"order": "A-1", "note": "code 7788"})), text_turn("ok")],
        id="billing",
        tools=[echo_tool("refund")],
        store=sessions,
    )
    owner = {"tenant_id": "t1"}
    result = await agent.create_session().run(
        "refund",
        run_state=RunStateOptions(checkpoints, "r1", interrupt_before_tool=True, ownership=owner),
    )
    detail = await inspect_agent_run(
        checkpoints,
        sessions,
        {"run_id": result.run_id},
        ownership=owner,
        redactor=create_secret_redactor(["7788"]),
    )
    assert detail is not None
    assert detail.summary.status == "suspended"
    (call,) = detail.pending
    assert (call.tool_name, call.tool_call_id, call.kind) == ("refund", "c1", "tool_approval")
    assert call.arguments == {"order": "A-1", "note": "code [REDACTED]"}
    assert call.idempotency_key == idempotency_key(result.run_id, "c1")
    assert detail.in_doubt == ()
    assert await inspect_agent_run(checkpoints, sessions, {"run_id": result.run_id}) is None
    assert (
        await inspect_agent_run(checkpoints, sessions, {"run_id": "run_nope"}, ownership=owner)
        is None
    )
    without_branch = await inspect_agent_run(
        checkpoints, None, {"run_id": result.run_id}, ownership=owner
    )
    assert without_branch is not None
    assert without_branch.pending[0].arguments is None
