"""A durable run on the OpenAI provider, suspended before a side effect and approved elsewhere."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from prism_core import RunStateOptions
from prism_store_sql import create_sql_checkpoint_store, create_sql_session_store
from tests.fake_http import serve

from ._support import SDK_STREAM_FINALISER, text_reply, tool_reply
from .durable_app import API_KEY, REVISION, build_agent

ROOT = Path(__file__).resolve().parents[2]


RESTART_CALL = tool_reply("call_restart_payments", "restart", '{"service": ', '"payments"}')
ANSWER = text_reply("Payments is back.")


@pytest.fixture
def anyio_backend() -> str:
    """The SQLite stores run on asyncio (SQLAlchemy's async engine is asyncio-only)."""
    return "asyncio"


@pytest.mark.anyio
@SDK_STREAM_FINALISER
async def test_suspend_before_the_side_effect_and_approve_from_another_process(
    tmp_path: Path,
) -> None:
    """The run suspends before ``restart``; a second process approves; the tool runs once and
    the final answer comes from the model server."""
    db_url = f"sqlite:///{tmp_path / 'runs.db'}"
    log = tmp_path / "restarts.log"
    with serve(RESTART_CALL, ANSWER) as server:
        base_url = server.base_url + "/v1"
        async with (
            create_sql_checkpoint_store(db_url) as checkpoints,
            create_sql_session_store(db_url) as sessions,
        ):
            session = build_agent(base_url, log, sessions).create_session(id="incident-7")
            suspended = await session.run(
                "Payments is stuck; restart it.",
                run_state=RunStateOptions(checkpoints, REVISION, interrupt_before_tool=True),
            )
        assert suspended.status == "suspended"
        assert suspended.interruption is not None
        (pending,) = suspended.interruption.pending_decisions
        assert pending.scope.tool_name == "restart"
        assert not log.exists()
        assert suspended.run_state is not None

        approver = await anyio.run_process(
            [
                sys.executable,
                "-m",
                "tests.provider_openai.durable_app",
                db_url,
                base_url,
                str(log),
                suspended.run_id,
                suspended.session_id,
                str(suspended.run_state.version),
            ],
            cwd=ROOT,
            check=False,
        )
    assert approver.returncode == 0, approver.stderr.decode()
    resumed = json.loads(approver.stdout.decode().strip().splitlines()[-1])
    assert resumed == {
        "status": "succeeded",
        "text": "Payments is back.",
        "run_id": suspended.run_id,
    }
    lines = log.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [
        {"call": "call_restart_payments", "service": "payments"}
    ]
    first, second = server.requests
    assert first.headers["authorization"] == second.headers["authorization"] == f"Bearer {API_KEY}"
    messages = second.json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assert messages[1]["tool_calls"][0]["id"] == "call_restart_payments"
    assert messages[2] == {
        "role": "tool",
        "tool_call_id": "call_restart_payments",
        "content": '{"restarted": "payments"}',
    }
