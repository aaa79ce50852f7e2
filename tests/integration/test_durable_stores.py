"""Durable runs on real stores: a run suspended by one agent object (or process) is approved
by another built from the same stores."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from prism_cli._demo_stores import drop_demo_stores, open_demo_stores
from prism_core import RunStateOptions, create_agent, load_agent_run_state, resume_agent_run
from tests.conftest import POSTGRES_URL, REDIS_URL, service_unavailable
from tests.core.durable_support import by_history
from tests.core.helpers import echo_tool, text_turn, tool_turn
from tests.integration.test_crash_demo import reachable
from tests.store_plugins import STORE_PLUGINS

TURNS = [tool_turn(("c1", "echo", {"n": 1})), text_turn("approved and done")]
REVISION = "stores-1"


ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["sqlite", "postgresql", "redis"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    """A store URL and an isolating prefix for one backend (cleaned up afterwards)."""
    if request.param == "sqlite":
        yield {"url": f"sqlite:///{tmp_path / 'runs.db'}", "prefix": "t"}
        return
    host_port = {"postgresql": ("127.0.0.1", 5432), "redis": ("127.0.0.1", 6379)}[request.param]
    reason = reachable(*host_port)
    if reason:
        service_unavailable(request.param, reason)
    url = POSTGRES_URL if request.param == "postgresql" else REDIS_URL
    prefix = f"prismit_{uuid.uuid4().hex[:8]}"
    yield {"url": url, "prefix": prefix}
    drop_demo_stores(url, prefix, STORE_PLUGINS)


@pytest.fixture
def anyio_backend() -> str:
    """The SQL and Redis drivers run on asyncio."""
    return "asyncio"


@pytest.fixture
async def stores(backend: dict[str, str]) -> AsyncIterator[tuple[Any, Any]]:
    """Checkpoint and session stores on the backend."""
    checkpoints, sessions = open_demo_stores(backend["url"], backend["prefix"], STORE_PLUGINS)
    async with checkpoints, sessions:
        yield checkpoints, sessions


def agent_on(sessions: Any, log: list[Any]) -> Any:
    """A fresh agent object on the shared session store."""
    return create_agent(
        id="approver-demo",
        model={"provider": "mock", "model": "demo"},
        provider=by_history(TURNS),
        tools=[echo_tool(log=log)],
        store=sessions,
    )


@pytest.mark.anyio
async def test_suspended_by_one_agent_approved_by_another(stores: tuple[Any, Any]) -> None:
    """Suspend with agent A, approve with agent B on the same stores; the tool runs once."""
    checkpoints, sessions = stores
    log: list[Any] = []
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    suspended = (
        await agent_on(sessions, log)
        .create_session(id=session_id)
        .run("go", run_state=RunStateOptions(checkpoints, REVISION, interrupt_before_tool=True))
    )
    assert suspended.status == "suspended"
    assert log == []
    done = await resume_agent_run(
        agent_on(sessions, log),
        {"run_id": suspended.run_id, "session_id": session_id},
        {"expected_version": suspended.run_state.version, "decision": "approve"},
        checkpoints=checkpoints,
        definition_revision=REVISION,
    )
    assert done.status == "succeeded"
    assert done.text == "approved and done"
    assert log == [("echo", {"n": 1})]
    status = await load_agent_run_state(
        checkpoints, {"run_id": done.run_id, "session_id": session_id}
    )
    assert status is not None
    assert (status.state.status, status.version) == ("succeeded", 4)


SUSPEND_IN_CHILD = """
import anyio, json, sys
from prism_core import RunStateOptions, create_agent
from prism_cli._demo_stores import open_demo_stores
from tests.store_plugins import STORE_PLUGINS
from tests.core.durable_support import by_history
from tests.core.helpers import echo_tool, text_turn, tool_turn

args = json.loads(sys.argv[1])
TURNS = [tool_turn(("c1", "echo", {"n": 1})), text_turn("approved and done")]

async def main():
    checkpoints, sessions = open_demo_stores(args["url"], args["prefix"], STORE_PLUGINS)
    async with checkpoints, sessions:
        agent = create_agent(id="approver-demo", model={"provider": "mock", "model": "demo"},
                             provider=by_history(TURNS), tools=[echo_tool()], store=sessions)
        result = await agent.create_session(id=args["session"]).run(
            "go", run_state=RunStateOptions(checkpoints, "stores-1", interrupt_before_tool=True))
        print(json.dumps({"run_id": result.run_id, "version": result.run_state.version,
                          "status": result.status}))

anyio.run(main)
"""


@pytest.mark.anyio
async def test_suspended_in_another_process_is_approved_here(
    stores: tuple[Any, Any], backend: dict[str, str]
) -> None:
    """A child process suspends the run and exits; this process approves and finishes it."""
    checkpoints, sessions = stores
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    with anyio.fail_after(60):
        child = await anyio.run_process(
            [
                sys.executable,
                "-c",
                SUSPEND_IN_CHILD,
                json.dumps({**backend, "session": session_id}),
            ],
            cwd=ROOT,
        )
    created = json.loads(child.stdout.decode().strip().splitlines()[-1])
    assert created["status"] == "suspended"
    log: list[Any] = []
    done = await resume_agent_run(
        agent_on(sessions, log),
        {"run_id": created["run_id"], "session_id": session_id},
        {"expected_version": created["version"], "decision": "approve"},
        checkpoints=checkpoints,
        definition_revision=REVISION,
    )
    assert done.status == "succeeded"
    assert log == [("echo", {"n": 1})]
