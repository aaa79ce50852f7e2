"""What the host's agent and ``create_agui_app``'s arguments decide, in process (Starlette's
test client, memory stores): an owner named by the agent's own ``run_state``, and the
arguments the app refuses at construction."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.testclient import TestClient

from prism_agui import create_agui_app
from prism_core import (
    AgentRunStateError,
    ToolDefinition,
    create_agent,
    create_memory_checkpoint_store,
    create_memory_session_store,
    provider_done,
    provider_tool_call,
    tool_call_content,
)


class AskingModel:
    """Asks for one ``charge`` call."""

    id = "mock"

    async def generate(self, request: Any) -> Any:
        yield provider_tool_call(tool_call_content("c1", "charge", {"amount": 12}))
        yield provider_done()


def _agent(**options: Any) -> Any:
    return create_agent(
        id="payments",
        model={"provider": "mock", "model": "demo"},
        provider=AskingModel(),
        tools=[ToolDefinition("charge", lambda args, context: "charged")],
        **options,
    )


def _app(agent: Any) -> Any:
    return create_agui_app(
        agent,
        definition_revision="payments-1",
        checkpoints=create_memory_checkpoint_store(),
        sessions=create_memory_session_store(),
        authorize=lambda request: {"tenant_id": request.headers["x-tenant"]},
    )


def _post(http: TestClient, tenant: str) -> Any:
    body = {
        "threadId": f"thread-{tenant}",
        "runId": "r1",
        "messages": [{"id": "m1", "role": "user", "content": "pay"}],
    }
    return http.post("/", json=body, headers={"x-tenant": tenant})


def _events(answer: Any) -> list[dict[str, Any]]:
    lines = answer.text.splitlines()
    return [json.loads(line[len("data: ") :]) for line in lines if line.startswith("data: ")]


def test_an_agent_that_names_its_owner_is_served_to_that_owner_only() -> None:
    agent = _agent(run_state={"interrupt_before_tool": True, "ownership": {"tenant_id": "t1"}})
    with TestClient(_app(agent)) as http:
        foreign = _post(http, "t2")
        assert foreign.status_code == 403
        assert foreign.json()["code"] == "ERR_PRISM_WEB_FORBIDDEN"
        owned = _post(http, "t1")
        assert owned.status_code == 200
        assert _events(owned)[-1]["outcome"]["type"] == "interrupt"


def test_the_app_refuses_what_it_cannot_serve() -> None:
    stores = {
        "checkpoints": create_memory_checkpoint_store(),
        "sessions": create_memory_session_store(),
    }
    with pytest.raises(ValueError, match="definition_revision"):
        create_agui_app(_agent(), definition_revision=" ", **stores)
    with pytest.raises(TypeError, match="authorize"):
        create_agui_app(_agent(), definition_revision="r", authorize="yes", **stores)
    with pytest.raises(ValueError, match="max_body_bytes"):
        create_agui_app(_agent(), definition_revision="r", max_body_bytes=0, **stores)
    with pytest.raises(AgentRunStateError, match="bogus"):
        create_agui_app(_agent(run_state={"bogus": True}), definition_revision="r", **stores)
