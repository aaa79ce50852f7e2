"""A durable run on the Anthropic provider: suspended before a side effect on a SQLite
checkpoint store, approved by a resume, the tool run exactly once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from prism_core import (
    Agent,
    RunStateOptions,
    ToolDefinition,
    create_agent,
    load_agent_run_state,
    resume_agent_run,
)
from prism_provider_anthropic import create_anthropic_provider
from prism_store_sql import create_sql_checkpoint_store, create_sql_session_store
from tests.fake_http import serve

from .support import API_KEY, MODEL, stream_reply

REVISION = "anthropic-durable-1"


@pytest.fixture
def anyio_backend() -> str:
    """The SQLite driver runs on asyncio."""
    return "asyncio"


def mailer(base_url: str, sessions: Any, outbox: list[dict[str, Any]]) -> Agent:
    """A fresh agent object (as a new process would build) with a side-effecting tool."""

    def send_email(args: dict[str, Any], context: Any) -> Any:
        outbox.append(args)
        return {"sent": True}

    tool = ToolDefinition(
        "send_email",
        send_email,
        description="Send an email.",
        parameters={
            "type": "object",
            "properties": {"to": {"type": "string"}, "subject": {"type": "string"}},
            "required": ["to", "subject"],
        },
        effect="write",
    )
    provider = create_anthropic_provider(
        api_key=API_KEY, base_url=base_url, reuse_connections=False
    )
    return create_agent(id="mailer", model=MODEL, provider=provider, tools=[tool], store=sessions)


@pytest.mark.anyio
async def test_interrupted_before_the_email_then_approved_sends_it_once(tmp_path: Path) -> None:
    """The run suspends before send_email with nothing sent; the approval resumes it, the
    email goes out once, the tool result reaches the model, and the run succeeds."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    outbox: list[dict[str, Any]] = []
    with serve(stream_reply("tool_use_send_email"), stream_reply("after_tools")) as server:
        async with (
            create_sql_checkpoint_store(url) as checkpoints,
            create_sql_session_store(url) as sessions,
        ):
            suspended = await (
                mailer(server.base_url, sessions, outbox)
                .create_session(id="s-mail")
                .run(
                    "Tell ops the deploy is done",
                    run_state=RunStateOptions(checkpoints, REVISION, interrupt_before_tool=True),
                )
            )
            assert suspended.status == "suspended"
            assert outbox == []
            assert len(server.requests) == 1
            (decision,) = suspended.interruption.pending_decisions
            assert decision.scope.tool_name == "send_email"

            done = await resume_agent_run(
                mailer(server.base_url, sessions, outbox),
                {"run_id": suspended.run_id, "session_id": "s-mail"},
                {"expected_version": suspended.run_state.version, "decision": "approve"},
                checkpoints=checkpoints,
                definition_revision=REVISION,
            )
            state = await load_agent_run_state(
                checkpoints, {"run_id": done.run_id, "session_id": "s-mail"}
            )
    assert done.status == "succeeded"
    assert done.text == "Paris is sunny; Tokyo is rainy."
    assert outbox == [{"to": "ops@example.com", "subject": "Deploy done"}]
    assert state is not None
    assert state.state.status == "succeeded"
    assert len(server.requests) == 2
    messages = server.requests[1].json()["messages"]
    assert messages[1]["content"] == [
        {
            "type": "tool_use",
            "id": "toolu_01Em4ilSendX9",
            "name": "send_email",
            "input": {"to": "ops@example.com", "subject": "Deploy done"},
        }
    ]
    (result,) = messages[2]["content"]
    assert result["tool_use_id"] == "toolu_01Em4ilSendX9"
    assert '"sent": true' in result["content"]
